package signal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mostTokens is where outputCap saturates: a cap past 2^62 tokens means "a
// lot", and the sum with the input tokens still fits an int64.
const mostTokens = 1 << 62

// outputCapTests are rows of TestOutputCap: a body and the output cap it
// asks for (R23).
var outputCapTests = []struct {
	name string
	body string
	want int64
}{
	// Each field, alone.
	{"max_tokens (OpenAI chat, Anthropic)", `{"model":"m","max_tokens":100}`, 100},
	{"max_completion_tokens (OpenAI reasoning)", `{"max_completion_tokens":200}`, 200},
	{"max_output_tokens (OpenAI Responses)", `{"max_output_tokens":300}`, 300},
	{"generationConfig.maxOutputTokens (Gemini)", `{"contents":[],"generationConfig":{"temperature":0.5,"maxOutputTokens":400}}`, 400},
	{"generation_config.max_output_tokens (Gemini, snake case)", `{"generation_config":{"max_output_tokens":500}}`, 500},
	{"generationConfig.max_output_tokens", `{"generationConfig":{"max_output_tokens":600}}`, 600},
	{"generation_config.maxOutputTokens", `{"generation_config":{"maxOutputTokens":700}}`, 700},
	{"zero", `{"max_tokens":0}`, 0},
	{"none", `{"model":"m","messages":[]}`, 0},
	{"empty object", `{}`, 0},

	// Several: the largest.
	{"several: the largest", `{"max_tokens":100,"max_completion_tokens":300,"max_output_tokens":200}`, 300},
	{"several: the generationConfig's is the largest", `{"max_tokens":100,"generationConfig":{"maxOutputTokens":900},"max_output_tokens":200}`, 900},
	{"both spellings of generationConfig", `{"generationConfig":{"maxOutputTokens":10},"generation_config":{"max_output_tokens":20}}`, 20},
	{"both keys in one generationConfig", `{"generationConfig":{"maxOutputTokens":30,"max_output_tokens":20}}`, 30},
	{"a key twice: the largest", `{"max_tokens":5,"max_tokens":3}`, 5},
	{"the largest comes first", `{"max_completion_tokens":5000,"max_tokens":3}`, 5000},

	// Whitespace, wherever JSON allows it.
	{"spaces", `{ "max_tokens" : 100 }`, 100},
	{"tabs, newlines, returns", "\r\n\t{\r\n\t\"max_tokens\"\t:\n100\r\n}\n", 100},
	{"pretty-printed", "{\n  \"model\": \"m\",\n  \"generationConfig\": {\n    \"maxOutputTokens\": 64\n  },\n  \"max_tokens\": 32\n}\n", 64},
	{"a number ended by a space at the end", `{"max_tokens":100 `, 100},

	// Nested: only the top level counts (and generationConfig's own).
	{"in a message's content string", `{"messages":[{"role":"user","content":"{\"max_tokens\": 9999}"}],"max_tokens":10}`, 10},
	{"in a string that holds a key", `{"note":"\"max_tokens\":9999,","max_tokens":7}`, 7},
	{"in a message object", `{"messages":[{"role":"user","max_tokens":9999}]}`, 0},
	{"in another object", `{"metadata":{"max_tokens":9999,"max_output_tokens":9999},"max_tokens":1}`, 1},
	{"in an array", `{"stop":[{"max_tokens":9999}],"max_tokens":1}`, 1},
	{"deeper in generationConfig", `{"generationConfig":{"nested":{"maxOutputTokens":9999}}}`, 0},
	{"a generationConfig nested elsewhere", `{"tools":[{"generationConfig":{"maxOutputTokens":9999}}]}`, 0},
	{"max_tokens inside generationConfig", `{"generationConfig":{"max_tokens":9999}}`, 0},
	{"maxOutputTokens at the top level", `{"maxOutputTokens":9999}`, 0},
	{"a top-level array", `[{"max_tokens":5}]`, 0},

	// Strings, escapes and brackets before the keys.
	{"an escaped backslash ends a string", `{"a":"\\","max_tokens":7}`, 7},
	{"an escaped quote does not", `{"a":"\"","max_tokens":7}`, 7},
	{"backslashes then a quote", `{"a":"x\\\"y\\\\","max_tokens":7}`, 7},
	{"an escaped quote in a key", `{"a\"b":1,"max_tokens":7}`, 7},
	{"a key that ends in an escaped backslash", `{"max_tokens\\":9999,"max_tokens":7}`, 7},
	{"unicode escapes", `{"a":"\u0022\u005c","max_tokens":7}`, 7},
	{"brackets in strings", `{"a":"}]{[","max_tokens":7}`, 7},
	{"brackets in strings inside arrays", `{"a":["]\"",{"b":"}"},"{"],"max_tokens":7}`, 7},
	{"an escaped key is not read (no encoder escapes one)", `{"max\u005ftokens":9999}`, 0},
	{"invalid UTF-8 in a string", "{\"a\":\"\xff\xfe\",\"max_tokens\":7}", 7},

	// Values of every kind before the keys.
	{"arrays", `{"a":[],"b":[[],[[]],[1,2]],"max_tokens":7}`, 7},
	{"literals and numbers", `{"a":[1,2.5,-3e4,true,false,null],"b":true,"c":null,"d":-0.5e-3,"max_tokens":7}`, 7},
	{"objects", `{"a":{},"b":{"c":{"d":[{}]}},"max_tokens":7}`, 7},
	{"deep nesting", `{"a":` + strings.Repeat(`[{"x":`, 50_000) + `1` + strings.Repeat(`}]`, 50_000) + `,"max_tokens":7}`, 7},
	{"deep nesting, never closed", `{"max_tokens":7,"a":` + strings.Repeat(`[`, 100_000), 7},

	// Caps that are not a non-negative integer are not taken.
	{"negative", `{"max_tokens":-5}`, 0},
	{"negative zero", `{"max_tokens":-0}`, 0},
	{"fractional", `{"max_tokens":100.5}`, 0},
	{"a whole number written with a fraction", `{"max_tokens":100.0}`, 0},
	{"an exponent", `{"max_tokens":1e3}`, 0},
	{"a negative one among others", `{"max_tokens":-5,"max_output_tokens":9}`, 9},
	{"a fraction among others", `{"max_tokens":1.5,"max_output_tokens":9}`, 9},
	{"a string cap is skipped, the rest read", `{"max_tokens":"100","max_completion_tokens":50}`, 50},
	{"a null cap is skipped, the rest read", `{"max_tokens":null,"max_output_tokens":7}`, 7},
	{"a boolean cap is skipped", `{"max_tokens":true,"max_output_tokens":7}`, 7},
	{"an object cap is skipped", `{"max_tokens":{"value":9999},"max_output_tokens":7}`, 7},
	{"an array cap is skipped", `{"max_tokens":[9999],"max_output_tokens":7}`, 7},
	{"a null maxOutputTokens is skipped", `{"generationConfig":{"maxOutputTokens":null,"max_output_tokens":9},"max_tokens":7}`, 9},
	{"a string maxOutputTokens is skipped", `{"generationConfig":{"maxOutputTokens":"9999"},"max_tokens":7}`, 7},
	{"generationConfig a string", `{"generationConfig":"x","max_tokens":7}`, 7},
	{"generationConfig an array", `{"generationConfig":[{"maxOutputTokens":9999}],"max_tokens":7}`, 7},
	{"generationConfig null", `{"generationConfig":null,"max_tokens":7}`, 7},

	// Huge caps saturate.
	{"2^62 - 1", `{"max_tokens":4611686018427387903}`, mostTokens - 1},
	{"2^62", `{"max_tokens":4611686018427387904}`, mostTokens},
	{"2^62 + 5: never above 2^62", `{"max_tokens":4611686018427387909}`, mostTokens},
	{"2^62 - 4, read exactly", `{"max_tokens":4611686018427387900}`, mostTokens - 4},
	{"the largest int64", `{"max_tokens":9223372036854775807}`, mostTokens},
	{"past int64", `{"max_tokens":9223372036854775808}`, mostTokens},
	{"thirty digits", `{"max_tokens":` + strings.Repeat("9", 30) + `}`, mostTokens},
	{"ten thousand digits", `{"max_tokens":` + strings.Repeat("9", 10_000) + `,"x":1}`, mostTokens},

	// Not JSON, or not an object: 0; damaged JSON: what came before.
	{"empty", ``, 0},
	{"blank", " \n\t", 0},
	{"null", `null`, 0},
	{"a number", `100`, 0},
	{"a string", `"max_tokens"`, 0},
	{"form-encoded", `max_tokens=100&model=m`, 0},
	{"XML", `<max_tokens>100</max_tokens>`, 0},
	{"no braces", `"max_tokens":100`, 0},
	{"an unquoted key", `{max_tokens:100}`, 0},
	{"single quotes", `{'max_tokens':100}`, 0},
	{"no colon", `{"max_tokens" 100}`, 0},
	{"byte order mark", "\xef\xbb\xbf{\"max_tokens\":100}", 0},
	{"damage before the key", `{"a":1 "max_tokens":100}`, 0},
	{"damage after the key", `{"max_tokens":100 "x":1,"max_output_tokens":200}`, 100},
	{"bytes after the object", `{"max_tokens":100}garbage{"max_tokens":200}`, 100},
	{"a second object is not read", `{"max_tokens":1}{"max_tokens":9}`, 1},
}

func TestOutputCap(t *testing.T) {
	for _, tt := range outputCapTests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, OutputCap([]byte(tt.body)), "OutputCap(%.200q)", tt.body)
		})
	}
}

// cutSample is a body for TestOutputCapTruncated and
// TestEstimateTokensTruncated: caps at the top level, in generationConfig,
// and decoys in strings and nested objects, with the value of each cap and
// the text that ends it.
var cutSample = struct {
	body string
	caps []struct {
		end   string // the cap's key and value: it counts once the byte after them is there
		value int64
	}
}{
	body: `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"say \"max_tokens\": 9999 \\"},` +
		`{"max_tokens":8888}],"generationConfig":{"temperature":0.5,"maxOutputTokens":300},` +
		"\n" + `"max_completion_tokens":200 ,"max_output_tokens":50}`,
	caps: []struct {
		end   string
		value int64
	}{
		{`"max_tokens":100`, 100},
		{`"maxOutputTokens":300`, 300},
		{`"max_completion_tokens":200`, 200},
		{`"max_output_tokens":50`, 50},
	},
}

// capBefore is the output cap cutSample's first n bytes ask for: the
// largest cap whose value the cut leaves whole and followed by a byte (a
// number at the very end may be cut short), 0 before the first.
func capBefore(t *testing.T, n int) int64 {
	t.Helper()
	var best int64
	for _, c := range cutSample.caps {
		i := strings.Index(cutSample.body, c.end)
		require.GreaterOrEqual(t, i, 0, "cutSample holds %s", c.end)
		if i+len(c.end) < n {
			best = max(best, c.value)
		}
	}
	return best
}

// TestOutputCapTruncated: cut at every byte, the sample gives the caps that
// came before the cut, or 0, and never panics; whole, it gives the largest.
func TestOutputCapTruncated(t *testing.T) {
	b := []byte(cutSample.body)
	require.Equal(t, int64(300), OutputCap(b), "the whole sample")
	for n := 0; n <= len(b); n++ {
		assert.Equal(t, capBefore(t, n), OutputCap(b[:n]), "cut at %d: %q", n, b[:n])
	}
}
