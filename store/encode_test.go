package store

import (
	"math"
	"regexp"
	"strconv"
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
		"too long":       []byte("r4 5 0 0 0 0 0 0 0 0 " + strings.Repeat("x", MaxEncoded)),
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

// TestEncodingGrammar: each kind of word reads as the encoding's grammar
// says (the doc at the top of encode.go) and nothing else: no '+', no
// leading zero, no hex, no inf or nan, no underscore, no space, no
// exponent but "e", a sign and digits. retryredis's script reads the
// same (the kit's Edges hold a Store to it).
func TestEncodingGrammar(t *testing.T) {
	ints := map[string]int64{"0": 0, "7": 7, "-7": -7, "9223372036854775807": math.MaxInt64}
	uints := map[string]uint64{"0": 0, "7": 7, "18446744073709551615": math.MaxUint64}
	floats := map[string]float64{"0": 0, "16": 16, "0.5": 0.5, "1.5e-07": 1.5e-7, "1e+05": 1e5, "1e+5": 1e5,
		"1e+21": 1e21, "1e-400": 0, "100000000000000000000": 1e20, "1.0000000000000001e-05": 1.0000000000000001e-05}
	junk := []string{"", "-", "--1", "+1", "01", "00", "0x1", "0X1", "0b1", "0o1", "1_0", "1.0", "1e+00", " 1", "1\r",
		"\t1", "1\t", "1\n", "\v1", "٣"}
	floatJunk := []string{"", "-", "--1", "+16", "016", "00.5", "16.", ".5", "0x10", "0X10", "0x1p-2", "1e5", "1E+05",
		"1e", "1e+", "e5", "1e+400", "inf", "Inf", "+Inf", "-Inf", "nan", "NaN", "infinity", "1_6", "\t16", "16\t", "16\n", " 16"}
	for w, want := range ints {
		d := &decoder{s: w}
		assert.Equal(t, want, d.int(), "int %q", w)
		assert.False(t, d.bad, "int %q", w)
	}
	for w, want := range uints {
		d := &decoder{s: w}
		assert.Equal(t, want, d.uint(), "uint %q", w)
		assert.False(t, d.bad, "uint %q", w)
	}
	for w, want := range floats {
		d := &decoder{s: w}
		assert.Equal(t, want, d.float(), "float %q", w)
		assert.False(t, d.bad, "float %q", w)
	}
	d := &decoder{s: "-0"}
	assert.True(t, math.Signbit(d.float()) && !d.bad, "float -0: Go writes it for a negative zero")
	for _, w := range append(junk, "-0", "9223372036854775808") {
		d := &decoder{s: w}
		d.int()
		assert.True(t, d.bad, "int %q is junk", w)
	}
	for _, w := range append(junk, "-0", "-1", "18446744073709551616") {
		d := &decoder{s: w}
		d.uint()
		assert.True(t, d.bad, "uint %q is junk", w)
	}
	for _, w := range floatJunk {
		d := &decoder{s: w}
		d.float()
		assert.True(t, d.bad, "float %q is junk", w)
	}
	for w, ok := range map[string]bool{"1:r": true, "0:": true, "+1:r": false, "01:r": false, "-0:": false, "0x1:r": false, "1.0:r": false} {
		d := &decoder{s: w}
		d.bytes()
		assert.Equal(t, ok, !d.bad, "length in %q", w)
	}
}

// grammar is the encoding's grammar of a float (encode.go), as a
// regular expression: the oracle of FuzzFloatGrammar.
var grammar = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?(e[-+][0-9]+)?$`)

// FuzzFloatGrammar: a word reads as a float exactly when the grammar
// takes it and it is finite, and then as strconv.ParseFloat reads it; a
// float Go writes (FormatFloat 'g', -1) always reads back.
func FuzzFloatGrammar(f *testing.F) {
	for _, w := range []string{"0", "-0", "1.5e-07", "1e+21", "0x10", "+1", "inf", "01", "1_6", "1e5", ".5"} {
		f.Add(w)
	}
	f.Fuzz(func(t *testing.T, w string) {
		if strings.Contains(w, " ") {
			return // a space ends a word
		}
		d := &decoder{s: w}
		got := d.float()
		want, err := strconv.ParseFloat(w, 64)
		ok := grammar.MatchString(w) && err == nil
		if ok != !d.bad || (ok && got != want) {
			t.Fatalf("%q read as %v (junk %v); the grammar takes it: %v, as %v", w, got, d.bad, ok, want)
		}
		if v, err := strconv.ParseFloat(w, 64); err == nil && !math.IsInf(v, 0) && !math.IsNaN(v) {
			s := strconv.FormatFloat(v, 'g', -1, 64)
			d := &decoder{s: s}
			if d.float() != v || d.bad {
				t.Fatalf("%q, what Go writes of %v, does not read back", s, v)
			}
		}
	})
}
