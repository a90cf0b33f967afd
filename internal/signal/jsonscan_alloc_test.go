//go:build !race

package signal

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AllocsPerRun counts the mallocs of every goroutine; under the race
// detector the scan is slow enough for other tests' leftovers to be
// counted, hence the build tag (as the root's cost_test.go's).

// allocBody is a 64 KiB request body (what estimate reads) with every kind
// of value the scanner skips, and its cap at the very end.
func allocBody() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[`)
	for i := 0; b.Len() < maxDrain-200; i++ {
		fmt.Fprintf(&b, `{"role":"user","content":"line %d: \"quoted\" \\ {[ ]} \u00e9","n":[%d,-1.5e3,true,null,{}]},`, i, i)
	}
	b.WriteString(`{}],"generationConfig":{"topK":40,"maxOutputTokens":1024},"max_tokens":2048}`)
	return []byte(b.String())
}

// TestOutputCapAllocatesNothing: a 64 KiB body is read with no allocation
// (R16: a watched key estimates every call).
func TestOutputCapAllocatesNothing(t *testing.T) {
	b := allocBody()
	require.LessOrEqual(t, len(b), maxDrain)
	require.Equal(t, int64(2048), OutputCap(b), "the scan reaches the end")
	allocs := testing.AllocsPerRun(100, func() { OutputCap(b) })
	assert.Zero(t, allocs, "allocations per outputCap of a 64 KiB body")
}

// TestAppendModelAllocatesNothing: the model at the end of a 64 KiB body
// is read with no allocation beyond dst's room (R16: a key by model reads
// the body of every call to a watched origin), escaped or not.
func TestAppendModelAllocatesNothing(t *testing.T) {
	for _, model := range []string{`gpt-4o`, `gpt\u002d4o`} {
		b := allocBody()
		b = append(b[:len(b)-1], `,"model":"`+model+`"}`...)
		require.LessOrEqual(t, len(b), maxDrain)
		dst := make([]byte, 0, 64)
		require.Equal(t, "gpt-4o", string(AppendModel(dst, b)), "the scan reaches the end")
		allocs := testing.AllocsPerRun(100, func() { AppendModel(dst, b) })
		assert.Zero(t, allocs, "allocations per AppendModel of a 64 KiB body, model %s", model)
	}
}
