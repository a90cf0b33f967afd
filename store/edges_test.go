package store

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The edges of Apply's rules, each on both sides: what a lane a send does
// not count against, or one not paced, does to a take; the last lane, the
// longest Rates, the marks no take gave; the counts a Record holds.

// TestTakeEdges: a lane a send costs nothing on neither refuses, holds nor
// moves it; a lane not paced (Per 0, a Next left from when it was) paces
// nothing and keeps its Next; a retry that costs nothing (cost × Per
// rounds to 0) goes at once, where a first try waits for the bucket.
func TestTakeEdges(t *testing.T) {
	now := epoch
	hour := time.Hour
	for _, tc := range []struct {
		name  string
		lanes []Lane
		op    Op
		wait  time.Duration
		refd  bool
		nexts []time.Time // each lane's Next after
	}{
		{"a refusing hold on a lane the send costs nothing on", []Lane{{}, {Until: now.Add(time.Second), Refuse: true}},
			Op{Costs: []float64{1, 0}}, 0, false, []time.Time{{}, {}}},
		{"a lane the send costs nothing on keeps its schedule", []Lane{{Until: now.Add(time.Second)}, {Per: float64(ms), Next: now}},
			Op{Costs: []float64{1, 0}}, time.Second, false, []time.Time{{}, now}},
		{"a lane not paced paces nothing, and keeps its Next", []Lane{{Next: now.Add(time.Second)}},
			Op{Costs: []float64{1}}, 0, false, []time.Time{now.Add(time.Second)}},
		{"a lane not paced behind a hold keeps its Next", []Lane{{Until: now.Add(time.Second)}},
			Op{Costs: []float64{1}}, time.Second, false, []time.Time{{}}},
		{"a retry that costs nothing goes at once", []Lane{{Per: 0.1, Next: now.Add(time.Second)}},
			Op{Costs: []float64{5e-324}, Retry: true}, 0, false, []time.Time{now.Add(time.Second)}},
		{"a first try that costs nothing waits for the bucket", []Lane{normalWaiting(Lane{Per: 0.1, Next: now.Add(time.Second)})},
			Op{Costs: []float64{5e-324}}, time.Second, false, []time.Time{now.Add(time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Record{Lanes: tc.lanes}
			tc.op.Kind, tc.op.Within = OpTake, hour
			res := Apply(&r, now, []Op{tc.op})
			assert.Equal(t, tc.wait, res.Wait, "wait")
			assert.Equal(t, tc.refd, res.Refused, "refused")
			assert.Equal(t, !tc.refd, res.Took, "took")
			for i, want := range tc.nexts {
				assert.Equal(t, want, r.Lanes[i].Next, "lane %d's Next", i)
			}
		})
	}
}

// TestOpEdges: MaxRates bytes of Rates are kept, one more is not; lane
// MaxLanes is past the end, for every op; a mark at the Unix epoch or at
// 2^53 µs is none (a correction of a send not paced: later only).
func TestOpEdges(t *testing.T) {
	now := epoch
	r := Record{}
	Apply(&r, now, []Op{{Kind: OpRates, Per: float64(ms), Rates: strings.Repeat("r", MaxRates)}})
	assert.Equal(t, MaxRates, len(r.Lane(0).Rates), "MaxRates bytes are kept")
	Apply(&r, now, []Op{{Kind: OpRates, Version: 1, Per: float64(ms), Rates: strings.Repeat("s", MaxRates+1)}})
	assert.Equal(t, uint64(1), r.Lane(0).Version, "one more is left out")

	r = Record{}
	Apply(&r, now, []Op{{Kind: OpHold, Lane: MaxLanes, For: time.Second}, {Kind: OpLimited, Lane: MaxLanes},
		{Kind: OpRates, Lane: MaxLanes, Per: 1}, {Kind: OpCorrect, Lane: MaxLanes, For: time.Second}})
	assert.Empty(t, r.Lanes, "lane MaxLanes is past the end")
	r = Record{Lanes: []Lane{lane100()}}
	assert.NotPanics(t, func() { Apply(&r, now, []Op{{Kind: OpUntake, Lane: 1, Mark: now, Charge: 1}}) })
	assert.Len(t, r.Lanes, 1, "an Untake makes no lane")

	for name, mark := range map[string]time.Time{"the Unix epoch": time.Unix(0, 0), "2^53 µs": time.UnixMicro(maxInt)} {
		r := Record{Lanes: []Lane{{Next: now.Add(time.Second)}}}
		Apply(&r, now, []Op{{Kind: OpCorrect, For: 2 * time.Second, Mark: mark}})
		assert.Equal(t, now.Add(2*time.Second), r.Lanes[0].Next, "a mark at %s is none", name)
		assert.Equal(t, time.Second, r.Lanes[0].Moved, name)
	}
}

// TestCorrectAsOfMoved: a correction reads its mark as moved on by what
// Moved grew since the send's take (the op's Moved), not by all of it.
func TestCorrectAsOfMoved(t *testing.T) {
	now := epoch
	r := Record{Lanes: []Lane{{Next: now.Add(3 * time.Second), Moved: 1500 * ms}}}
	// the send's take left Next at mark and Moved at 500 ms: its mark is
	// now+2 s, which the count (full at now+2 s) says was right.
	Apply(&r, now, []Op{{Kind: OpCorrect, For: 2 * time.Second, Mark: now.Add(time.Second), Moved: 500 * ms}})
	assert.Equal(t, now.Add(3*time.Second), r.Lanes[0].Next)
	assert.Equal(t, 1500*ms, r.Lanes[0].Moved)
}

// TestSetRatesMoves: a rescale moves the queue, and Moved counts it.
func TestSetRatesMoves(t *testing.T) {
	r := Record{Lanes: []Lane{lane100()}}
	r.Lanes[0].Next, r.Lanes[0].Moved = epoch.Add(time.Second), 5*ms
	Apply(&r, epoch, []Op{{Kind: OpRates, Per: float64(200 * ms)}})
	assert.Equal(t, epoch.Add(2*time.Second), r.Lanes[0].Next)
	assert.Equal(t, time.Second+5*ms, r.Lanes[0].Moved)
}

// TestCountsAtTheirBound: a row of failures stops at 2^53-1, and the
// Record stays Valid; Valid takes each count up to its bound and no
// further.
func TestCountsAtTheirBound(t *testing.T) {
	r := Record{Circuit: Circuit{Failures: maxInt - 1, From: 1, Last: epoch}}
	Apply(&r, epoch, []Op{{Kind: OpFail, From: 1}})
	assert.Equal(t, maxInt-1, r.Circuit.Failures)
	assert.True(t, r.Valid(epoch))

	lanes := func(n int) []Lane { return make([]Lane, n) }
	for _, tc := range []struct {
		name       string
		ok, not    Record
		okay, nope bool
	}{
		{"Seq", Record{Seq: maxInt - 1}, Record{Seq: maxInt}, true, false},
		{"lanes", Record{Lanes: lanes(MaxLanes)}, Record{Lanes: lanes(MaxLanes + 1)}, true, false},
		{"Version", Record{Lanes: []Lane{{Version: maxInt - 1}}}, Record{Lanes: []Lane{{Version: maxInt}}}, true, false},
		{"Rates", Record{Lanes: []Lane{{Rates: strings.Repeat("r", MaxRates)}}},
			Record{Lanes: []Lane{{Rates: strings.Repeat("r", MaxRates+1)}}}, true, false},
		{"Failures", Record{Circuit: Circuit{Failures: maxInt - 1}}, Record{Circuit: Circuit{Failures: maxInt}}, true, false},
	} {
		assert.Equal(t, tc.okay, tc.ok.Valid(epoch), "%s at its bound", tc.name)
		assert.Equal(t, tc.nope, tc.not.Valid(epoch), "%s past it", tc.name)
	}
}

// TestLocalEdges: Plant keeps a Record that decodes; a key is kept
// through its Expires and dropped after, by the sweep a sweepEvery after
// the last, to the instant.
func TestLocalEdges(t *testing.T) {
	clk := &movingClock{now: epoch}
	s := NewLocal(clk.Now)
	ctx := context.Background()
	want := Record{Seq: 3, Lanes: []Lane{{Until: epoch.Add(time.Second)}}}
	require.NoError(t, s.Plant("planted", mustMarshal(want)))
	st, err := s.Apply(ctx, "planted", nil)
	require.NoError(t, err)
	assert.Equal(t, want, st.Record, "a Record planted is read back")

	s = NewLocal(clk.Now)
	_, err = s.Apply(ctx, "k", []Op{{Kind: OpHold, For: time.Second}}) // swept at epoch; Expires epoch+1s+KeepFor
	require.NoError(t, err)
	for _, step := range []struct {
		at   time.Duration
		keys int
	}{
		{time.Second + KeepFor, 2},              // a sweep at its Expires: kept
		{time.Second + KeepFor + sweepEvery, 1}, // a sweepEvery later, to the instant: gone
	} {
		clk.add(epoch.Add(step.at).Sub(clk.Now()))
		_, err := s.Apply(ctx, "other", []Op{{Kind: OpLimited}})
		require.NoError(t, err)
		assert.Equal(t, step.keys, s.Len(), "at %v", step.at)
	}
}

// TestEncodingEdges: a Record of no lanes reads back with none (nil);
// bytes of MaxEncoded exactly decode; times and spans of ±maxMicros µs
// round-trip, one more is junk; a State's Now is after the epoch and at
// most maxMicros, and its Record part MaxEncoded bytes at most.
func TestEncodingEdges(t *testing.T) {
	var got Record
	require.NoError(t, got.UnmarshalBinary(mustMarshal(Record{Seq: 1})))
	assert.Equal(t, Record{Seq: 1}, got, "no lanes: nil")

	long := exactly(t, MaxEncoded)
	require.NoError(t, got.UnmarshalBinary(mustMarshal(long)), "MaxEncoded bytes")
	assert.Equal(t, long, got)
	assert.ErrorIs(t, got.UnmarshalBinary(mustMarshal(exactly(t, MaxEncoded+1))), ErrEncoding)

	top, bottom := time.UnixMicro(maxMicros).UTC(), time.UnixMicro(-maxMicros).UTC()
	edge := Record{Lanes: []Lane{{Until: top, Next: bottom, Shift: time.Duration(maxMicros) * time.Microsecond, Moved: -time.Duration(maxMicros) * time.Microsecond}}}
	require.NoError(t, got.UnmarshalBinary(mustMarshal(edge)))
	assert.Equal(t, edge, got, "±maxMicros round-trip")
	for _, field := range []int{0, 2, 3, 7, 8, 9, 13, 14, 16, 18, 22} { // Until, Next, Tails 1 and 5, Shift, Pushes 0 and 4, Moved, Fixed, FixedPushed, Limited
		for _, v := range []int64{maxMicros + 1, -maxMicros - 1} {
			b := oneLane(field, itoa(v))
			assert.ErrorIs(t, got.UnmarshalBinary(b), ErrEncoding, "%s", b)
		}
	}

	var st State
	for now, ok := range map[int64]bool{0: false, 1: true, maxMicros: true, -1: false} {
		err := st.UnmarshalBinary([]byte(itoa(now) + " 0 0 0 0 0 0 0 r4 1 0 0 0 0 0 0 0 0"))
		assert.Equal(t, ok, err == nil, "a State at %d µs: %v", now, err)
	}
	for n, ok := range map[int]bool{MaxEncoded: true, MaxEncoded + 1: false} {
		b, _ := State{Now: epoch, Record: exactly(t, n)}.MarshalBinary()
		assert.Equal(t, ok, st.UnmarshalBinary(b) == nil, "a State whose Record takes %d bytes", n)
	}
}

// exactly is a Record whose encoding takes n bytes (its Rates made long).
func exactly(t *testing.T, n int) Record {
	t.Helper()
	for k := n - 512; k < n; k++ {
		r := Record{Seq: 1, Lanes: []Lane{{Rates: strings.Repeat("x", k)}}}
		if len(mustMarshal(r)) == n {
			return r
		}
	}
	t.Fatalf("no Record encodes to %d bytes", n)
	return Record{}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// oneLane is the encoding of a Record of one zero lane, but for its
// field i (0 Until, 1 Refuse, ... 23 Version), which is v.
func oneLane(i int, v string) []byte {
	f := strings.Fields(strings.Repeat("0 ", 24))
	f[i] = v
	return []byte("r4 1 1 " + strings.Join(f, " ") + " 0: 0 0 0 0 0 0 0")
}

// TestNames: the lanes' and the ops' names, and those of ids past them.
func TestNames(t *testing.T) {
	assert.Equal(t, "requests tokens input_tokens output_tokens lane(4) lane(255)",
		strings.Join([]string{Requests.String(), Tokens.String(), InputTokens.String(), OutputTokens.String(),
			LaneID(4).String(), LaneID(255).String()}, " "))
	assert.Equal(t, "op(?) take probe_end op(?)", strings.Join([]string{OpKind(0).String(), OpTake.String(),
		OpProbeEnd.String(), OpKind(10).String()}, " "))
}

// TestValidEdges: Valid on each side of each bound it names, so that a
// bound moved by one (a > for a >=) is caught: a time just after the Unix
// epoch (the epoch itself is not a time a Store keeps), a span of exactly
// maxSpan either way, a rate of exactly its top.
func TestValidEdges(t *testing.T) {
	now := epoch
	lane := func(f func(*Lane)) Record {
		l := Lane{}
		f(&l)
		return Record{Lanes: []Lane{l}}
	}
	for _, tc := range []struct {
		name  string
		r     Record
		valid bool
	}{
		{"a time 1 µs after the Unix epoch", lane(func(l *Lane) { l.Until = time.UnixMicro(1) }), true},
		{"the Unix epoch", lane(func(l *Lane) { l.Until = time.UnixMicro(0) }), false},
		{"a time MaxAhead past now", lane(func(l *Lane) { l.Next = now.Add(MaxAhead) }), true},
		{"a time 1 µs later", lane(func(l *Lane) { l.Next = now.Add(MaxAhead + time.Microsecond) }), false},
		{"a shift of maxSpan", lane(func(l *Lane) { l.Shift = maxSpan }), true},
		{"a shift of -maxSpan", lane(func(l *Lane) { l.Shift = -maxSpan }), true},
		{"a shift of maxSpan and 1 µs", lane(func(l *Lane) { l.Shift = maxSpan + time.Microsecond }), false},
		{"a shift of -maxSpan and -1 µs", lane(func(l *Lane) { l.Moved = -maxSpan - time.Microsecond }), false},
		{"Per of MaxPer", lane(func(l *Lane) { l.Per = float64(MaxPer) }), true},
		{"Per past MaxPer", lane(func(l *Lane) { l.Per = float64(MaxPer) + 1 }), false},
		{"Burst of MaxAhead", lane(func(l *Lane) { l.Burst = float64(MaxAhead) }), true},
		{"Burst past MaxAhead", lane(func(l *Lane) { l.Burst = float64(MaxAhead) + 1 }), false},
		{"a negative Scaled", lane(func(l *Lane) { l.Scaled = -1 }), false},
		{"Scaled of 0", lane(func(l *Lane) { l.Scaled = 0 }), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.valid, tc.r.Valid(now))
		})
	}
}

// TestSetRatesEdges: OpRates scales a waiting schedule by a rate's change
// past rescaleBy, both ways, and only then: a first rate, a change within
// rescaleBy, a schedule not ahead of now.
func TestSetRatesEdges(t *testing.T) {
	now := epoch
	ms := float64(time.Millisecond)
	for _, tc := range []struct {
		name   string
		lane   Lane
		per    float64
		next   time.Time
		moved  time.Duration
		scaled float64
	}{
		{"a first rate", Lane{Next: now.Add(time.Second)}, ms, now.Add(time.Second), 0, ms},
		{"a rate of 0", Lane{Next: now.Add(time.Second), Scaled: ms}, 0, now.Add(time.Second), 0, 0},
		{"twice as slow: the wait doubles", Lane{Next: now.Add(time.Second), Scaled: ms}, 2 * ms, now.Add(2 * time.Second), time.Second, 2 * ms},
		{"twice as fast: it halves", Lane{Next: now.Add(time.Second), Scaled: ms}, ms / 2, now.Add(time.Second / 2), -time.Second / 2, ms / 2},
		{"within rescaleBy: no scaling", Lane{Next: now.Add(time.Second), Scaled: ms}, ms * 1.04, now.Add(time.Second), 0, ms},
		{"within it the other way", Lane{Next: now.Add(time.Second), Scaled: ms}, ms / 1.04, now.Add(time.Second), 0, ms},
		{"rescaleBy exactly: no scaling", Lane{Next: now.Add(time.Second), Scaled: ms}, ms * rescaleBy, now.Add(time.Second), 0, ms},
		{"rescaleBy exactly the other way", Lane{Next: now.Add(time.Second), Scaled: ms}, ms / rescaleBy, now.Add(time.Second), 0, ms},
		{"nothing waiting: scaled, nothing moved", Lane{Next: now, Scaled: ms}, 2 * ms, now, 0, 2 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.lane
			s.setRates(now, tc.per, 0, "r")
			assert.Equal(t, tc.next, s.Next, "Next")
			assert.Equal(t, tc.moved, s.Moved, "Moved")
			assert.Equal(t, tc.scaled, s.Scaled, "Scaled")
			assert.Equal(t, tc.per, s.Per, "Per")
			assert.Equal(t, uint64(1), s.Version, "Version")
		})
	}
}

// TestUsEdges: us rounds to whole µs and saturates at MaxAhead either way,
// at the bound exactly and past it; NaN is 0.
func TestUsEdges(t *testing.T) {
	top := float64(MaxAhead)
	for _, tc := range []struct {
		ns   float64
		want time.Duration
	}{
		{math.NaN(), 0},
		{top, MaxAhead},
		{math.Inf(1), MaxAhead},
		{-top, -MaxAhead},
		{math.Inf(-1), -MaxAhead},
		{1499, time.Microsecond},
		{1500, 2 * time.Microsecond},
		{-1501, -2 * time.Microsecond},
	} {
		assert.Equal(t, tc.want, us(tc.ns), "us(%v)", tc.ns)
	}
}
