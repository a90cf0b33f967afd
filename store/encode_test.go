package store

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEncoding: a Record and a State round-trip; junk, and bytes past
// MaxEncoded, decode to the zero value with ErrEncoding, whatever they held
// (a Store that ignores the error keeps nothing of them).
func TestEncoding(t *testing.T) {
	r := Record{Seq: 7, Lanes: []Lane{{Until: epoch, Refuse: true, Next: epoch.Add(time.Second), Shift: time.Millisecond,
		Per: 1.5e-7, Burst: 3e9, Rates: "a b:c\n"}}, Circuit: Circuit{Failures: 2, From: 1 << 63, Many: true, Open: epoch}}
	b, _ := r.MarshalBinary()
	var got Record
	require.NoError(t, got.UnmarshalBinary(b))
	assert.Equal(t, r, got)

	st := State{Now: epoch, Record: r, Result: Result{Wait: 3 * time.Millisecond, Took: true, Publish: true}}
	sb, _ := st.MarshalBinary()
	var gs State
	require.NoError(t, gs.UnmarshalBinary(sb))
	assert.True(t, gs.Now.Equal(st.Now))
	gs.Now = st.Now
	assert.Equal(t, st, gs, "the whole State, not its Record alone")

	for name, junk := range map[string][]byte{
		"too many lanes": mustMarshal(Record{Seq: 5, Lanes: make([]Lane, MaxLanes+1)}),
		"too long":       []byte("r3 5 0 0 0 0 0 0 0 0 " + strings.Repeat("x", MaxEncoded)),
		"cut":            b[:len(b)-3],
	} {
		got := Record{Seq: 99}
		assert.ErrorIs(t, got.UnmarshalBinary(junk), ErrEncoding, name)
		assert.Zero(t, got.Seq, "%s: the zero Record", name)
		assert.Nil(t, got.Lanes, name)
	}
}

func mustMarshal(r Record) []byte {
	b, _ := r.MarshalBinary()
	return b
}
