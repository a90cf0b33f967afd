package retryredis

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The conformance of apply.lua to store.go's apply, the reference: each
// case's ops go to retryhttp.NewLocalStore and to a Store on a real Redis,
// step by step, each store's ops made from its own earlier replies (a Mark
// is a time the store gave out), and every reply must agree with the
// reference's, times relative to each store's Now, within what elapses
// between the two (tol).

const tol = 5 * time.Millisecond

type opsOf func(h []retryhttp.StoreState) []retryhttp.StoreOp

func these(ops ...retryhttp.StoreOp) opsOf {
	return func([]retryhttp.StoreState) []retryhttp.StoreOp { return ops }
}

func last(h []retryhttp.StoreState) retryhttp.StoreState {
	if len(h) == 0 {
		return retryhttp.StoreState{}
	}
	return h[len(h)-1]
}

func take(within time.Duration, retry bool, costs ...float64) opsOf {
	var c [4]float64
	copy(c[:], costs)
	return these(retryhttp.StoreOp{Kind: retryhttp.StoreTake, Costs: c, Within: within, Retry: retry})
}

// setRates sets lane's rates over the version it has now.
func setRates(lane int, per, burst time.Duration, r string) opsOf {
	return func(h []retryhttp.StoreState) []retryhttp.StoreOp {
		return []retryhttp.StoreOp{{Kind: retryhttp.StoreRates, Lane: lane, Version: last(h).Lanes[lane].Version,
			Per: float64(per), Burst: float64(burst), Rates: r}}
	}
}

func hold(lane int, d time.Duration, refuse bool) opsOf {
	return these(retryhttp.StoreOp{Kind: retryhttp.StoreHold, Lane: lane, For: d, Refuse: refuse})
}

// untakeOf gives back charge on lane as of the reply back steps ago.
func untakeOf(lane, back int, charge time.Duration) opsOf {
	return func(h []retryhttp.StoreState) []retryhttp.StoreOp {
		return []retryhttp.StoreOp{{Kind: retryhttp.StoreUntake, Lane: lane, Mark: h[len(h)-back].Lanes[lane].Next, Charge: float64(charge)}}
	}
}

// correctOf corrects lane to full in d, as of the last reply's take (or
// as a send not paced when unpaced).
func correctOf(lane int, d time.Duration, unpaced bool) opsOf {
	return func(h []retryhttp.StoreState) []retryhttp.StoreOp {
		op := retryhttp.StoreOp{Kind: retryhttp.StoreCorrect, Lane: lane, For: d}
		if !unpaced {
			op.Mark, op.Moved = last(h).Lanes[lane].Next, last(h).Lanes[lane].Moved
		}
		return []retryhttp.StoreOp{op}
	}
}

// binaryRates is 53 bytes as the policy's rates are, with every byte the
// scripts' formats could trip on.
var binaryRates = func() string {
	b := make([]byte, 53)
	for i := range b {
		b[i] = byte(i * 5)
	}
	b[3], b[4], b[5], b[6] = ' ', ':', '\n', 0
	return string(b)
}()

var conformance = []struct {
	name  string
	steps []opsOf
}{
	{"read of nothing", []opsOf{these()}},
	{"a take on a lane not paced", []opsOf{take(0, false, 1), take(0, false, 1, 1)}},
	{"pace by the bucket", []opsOf{setRates(0, 100*time.Millisecond, 200*time.Millisecond, "r"),
		take(time.Second, false, 1), take(time.Second, false, 1), take(time.Second, false, 1)}},
	{"a wait that does not fit Within", []opsOf{setRates(0, 100*time.Millisecond, 0, "r"),
		take(time.Second, false, 1), take(50*time.Millisecond, false, 1), take(0, false, 1), these()}},
	{"a hold moves the queue on", []opsOf{setRates(0, 100*time.Millisecond, 0, "r"),
		take(time.Second, false, 1), take(time.Second, false, 1), hold(0, time.Second, false),
		take(3*time.Second, false, 1), hold(0, 500*time.Millisecond, false)}},
	{"a refusing hold", []opsOf{hold(0, time.Second, true), take(time.Minute, false, 1),
		take(time.Minute, false, 0, 1), hold(0, 2*time.Second, false), take(time.Minute, false, 1)}},
	{"a stale version", []opsOf{setRates(0, 100*time.Millisecond, 0, "a"),
		these(retryhttp.StoreOp{Kind: retryhttp.StoreRates, Lane: 0, Version: 7, Per: 1, Rates: "b"})}},
	{"a cut stretches the queue", []opsOf{setRates(0, 100*time.Millisecond, 0, "a"),
		take(time.Second, false, 1), take(time.Second, false, 1), take(time.Second, false, 1),
		setRates(0, 200*time.Millisecond, 0, "b"), setRates(0, 50*time.Millisecond, 0, "c")}},
	{"a change under 5% scales nothing; past it, the queue", []opsOf{setRates(0, 100*time.Millisecond, 0, "a"),
		take(time.Second, false, 1), take(time.Second, false, 1), setRates(0, 103*time.Millisecond, 0, "b"),
		setRates(0, 106*time.Millisecond, 0, "c"), take(time.Second, false, 1)}},
	{"a retry never takes the slot due now", []opsOf{setRates(0, 100*time.Millisecond, 0, "a"),
		take(time.Second, false, 1), take(time.Second, true, 1)}},
	{"untake of the last slot", []opsOf{setRates(0, 100*time.Millisecond, 0, "a"),
		take(time.Second, false, 1), take(time.Second, false, 1), untakeOf(0, 1, 100*time.Millisecond)}},
	{"untake of a slot not the last", []opsOf{setRates(0, 100*time.Millisecond, 0, "a"),
		take(time.Second, false, 1), take(time.Second, false, 1), untakeOf(0, 2, 100*time.Millisecond),
		untakeOf(0, 4, 100*time.Millisecond)}},
	{"a retry goes first", []opsOf{setRates(0, 100*time.Millisecond, 0, "a"),
		take(time.Second, false, 1), take(time.Second, false, 1), take(time.Second, false, 1), take(time.Second, false, 1),
		take(time.Second, true, 1), take(time.Second, true, 1), take(time.Second, false, 1)}},
	{"corrections", []opsOf{setRates(0, 100*time.Millisecond, 0, "a"),
		take(time.Second, false, 1), correctOf(0, 50*time.Millisecond, false), take(time.Second, false, 1),
		correctOf(0, 400*time.Millisecond, false), correctOf(0, 2*time.Second, true), correctOf(0, time.Second, true)}},
	{"a correction of a lane never taken", []opsOf{setRates(1, time.Millisecond, 0, "a"),
		correctOf(1, time.Second, true), take(3*time.Second, false, 1, 10)}},
	{"limited", []opsOf{these(retryhttp.StoreOp{Kind: retryhttp.StoreLimited, Lane: 1}), take(0, false, 1)}},
	{"two lanes at once", []opsOf{setRates(0, 100*time.Millisecond, 200*time.Millisecond, "a"),
		setRates(1, time.Millisecond, 100*time.Millisecond, "b"),
		take(time.Second, false, 1, 150), take(time.Second, false, 1, 150), take(time.Second, false, 1, 300)}},
	{"ops out of range", []opsOf{
		these(retryhttp.StoreOp{Kind: retryhttp.StoreHold, Lane: 9, For: time.Second},
			retryhttp.StoreOp{Kind: retryhttp.StoreLimited, Lane: -1},
			retryhttp.StoreOp{Kind: 99, Lane: 0},
			retryhttp.StoreOp{Kind: retryhttp.StoreRates, Lane: 0, Per: math.NaN(), Burst: -1, Rates: "x"}),
		take(time.Second, false, math.NaN(), -3, math.Inf(1)), these(retryhttp.StoreOp{Kind: 0})}},
	{"binary rates", []opsOf{setRates(2, 3*time.Millisecond, time.Second, binaryRates),
		setRates(3, time.Millisecond/3, 0, binaryRates[:17]), these()}},
	{"a long hold and a huge rate", []opsOf{hold(0, 200*24*time.Hour, false), setRates(1, 1e17, 1e18, "a"),
		take(time.Hour, false, 0, 1), take(time.Duration(math.MaxInt64), false, 0, 1e6)}},
}

func TestConformance(t *testing.T) {
	srv := sharedRedis(t)
	rs := newStore(t, srv.client(t), WithPrefix(testPrefix(t)), WithTimeout(2*time.Second))
	ctx := context.Background()
	for _, tc := range conformance {
		t.Run(tc.name, func(t *testing.T) {
			ref := retryhttp.NewLocalStore(nil)
			var lh, rh []retryhttp.StoreState
			for i, ops := range tc.steps {
				want, err := ref.Apply(ctx, tc.name, ops(lh))
				require.NoError(t, err)
				got, err := rs.Apply(ctx, tc.name, ops(rh))
				require.NoError(t, err, "step %d", i)
				agree(t, i, want, got, last(lh), last(rh))
				lh, rh = append(lh, want), append(rh, got)
			}
		})
	}
}

// agree checks that got (retryredis's) says what want (the reference's)
// does, at step i.
func agree(t *testing.T, i int, want, got, wantBefore, gotBefore retryhttp.StoreState) {
	t.Helper()
	assert.False(t, got.Now.IsZero(), "step %d: Now", i)
	assert.Equal(t, want.Seq == 0, got.Seq == 0, "step %d: Seq 0", i)
	assert.Equal(t, want.Seq > wantBefore.Seq, got.Seq > gotBefore.Seq, "step %d: Seq grows", i)
	assert.Equal(t, want.Took, got.Took, "step %d: Took", i)
	assert.Equal(t, want.Refused, got.Refused, "step %d: Refused", i)
	assert.Equal(t, want.Stale, got.Stale, "step %d: Stale", i)
	near(t, want.Wait, got.Wait, "step %d: Wait", i)
	for l := range want.Lanes {
		w, g := &want.Lanes[l], &got.Lanes[l]
		at(t, want.Now, got.Now, w.Until, g.Until, "step %d lane %d: Until", i, l)
		at(t, want.Now, got.Now, w.Next, g.Next, "step %d lane %d: Next", i, l)
		at(t, want.Now, got.Now, w.RetryNext, g.RetryNext, "step %d lane %d: RetryNext", i, l)
		at(t, want.Now, got.Now, w.Limited, g.Limited, "step %d lane %d: Limited", i, l)
		assert.Equal(t, w.Refuse, g.Refuse, "step %d lane %d: Refuse", i, l)
		near(t, w.Shift, g.Shift, "step %d lane %d: Shift", i, l)
		near(t, w.Pushed, g.Pushed, "step %d lane %d: Pushed", i, l)
		near(t, w.Moved, g.Moved, "step %d lane %d: Moved", i, l) // (a Next never set moves no mark)
		assert.Equal(t, w.Per, g.Per, "step %d lane %d: Per", i, l)
		assert.Equal(t, w.Burst, g.Burst, "step %d lane %d: Burst", i, l)
		assert.Equal(t, w.Scaled, g.Scaled, "step %d lane %d: Scaled", i, l)
		assert.Equal(t, w.Version, g.Version, "step %d lane %d: Version", i, l)
		assert.Equal(t, w.Rates, g.Rates, "step %d lane %d: Rates", i, l)
	}
}

func near(t *testing.T, want, got time.Duration, msg string, args ...any) {
	t.Helper()
	assert.InDelta(t, float64(want), float64(got), float64(tol), append([]any{msg + ": got %v, want %v"}, append(args, got, want)...)...)
}

// at checks that got, on its store's clock (gotNow), is where want is on
// the reference's: both zero, or as far from their Now.
func at(t *testing.T, wantNow, gotNow, want, got time.Time, msg string, args ...any) {
	t.Helper()
	if want.IsZero() || got.IsZero() {
		assert.Equal(t, want.IsZero(), got.IsZero(), append([]any{msg + ": got %v, want %v"}, append(args, got, want)...)...)
		return
	}
	near(t, want.Sub(wantNow), got.Sub(gotNow), msg, args...)
}
