package pace

import (
	"math"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/signal"
)

// TestHearEdges: what one answer does to a lane's rates, each rule on both
// sides of its bound, so that a bound moved by one is caught: the mean
// cost (set by the first send that counts, then averaged 9 to 1), the
// limit a count states (only a limit above 0, and never on a spaced
// lane), and no rate from a full bucket or a window of nothing.
func TestHearEdges(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	counts := func(limit, remaining int64, window time.Duration) signal.Counts {
		return signal.Counts{Limit: limit, Remaining: remaining, Window: window, Res: time.Millisecond, OK: true}
	}
	for _, tc := range []struct {
		name string
		r    Rates
		n    News
		want func(Rates) bool
		says string
	}{
		{"a first send's cost is the mean", Rates{}, News{Cost: 100},
			func(r Rates) bool { return r.MeanCost == 100 }, "MeanCost 100"},
		{"a later one is averaged in, 9 to 1", Rates{MeanCost: 100}, News{Cost: 200},
			func(r Rates) bool { return math.Abs(r.MeanCost-110) < 1e-9 }, "MeanCost 110"},
		{"a send that costs nothing leaves the mean", Rates{MeanCost: 100}, News{Cost: 0},
			func(r Rates) bool { return r.MeanCost == 100 }, "MeanCost 100"},
		{"a limit of 0 is not a limit", Rates{Limit: 50}, News{Counts: counts(0, 0, time.Second)},
			func(r Rates) bool { return r.Limit == 50 }, "Limit 50"},
		{"a limit of 1 is", Rates{Limit: 50}, News{Counts: counts(1, 1, time.Second)},
			func(r Rates) bool { return r.Limit == 1 }, "Limit 1"},
		{"a spaced lane keeps no limit", Rates{}, News{Counts: counts(10, 5, time.Second), Spacing: true},
			func(r Rates) bool { return r.Limit == 0 }, "Limit 0"},
		{"a full bucket states no rate", Rates{}, News{Counts: counts(10, 10, time.Second)},
			func(r Rates) bool { return r.Stated == 0 }, "Stated 0"},
		{"one unit spent states one", Rates{}, News{Counts: counts(10, 9, time.Second)},
			func(r Rates) bool { return r.Stated > 0 }, "Stated > 0"},
		{"a window of nothing states no rate", Rates{}, News{Counts: counts(10, 5, 0)},
			func(r Rates) bool { return r.Stated == 0 && r.CoarseBound == 0 }, "Stated 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Hear(tc.r, now, 0, tc.n)
			if !tc.want(e.Rates) {
				t.Errorf("Hear(%+v, %+v).Rates = %+v, want %s", tc.r, tc.n, e.Rates, tc.says)
			}
		})
	}
}

// TestBoundEdges: a rate is bounded to MinInterval a unit, at the bound
// exactly and past it.
func TestBoundEdges(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Rates
		per  float64
	}{
		{"a learned rate faster than MinInterval", Rates{Learned: 1}, float64(MinInterval)},
		{"a stated one", Rates{Stated: 1}, float64(MinInterval)},
		{"one at MinInterval", Rates{Learned: float64(MinInterval)}, float64(MinInterval)},
		{"one slower", Rates{Learned: float64(time.Millisecond)}, float64(time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.bound()
			if got := r.Per(); got != tc.per {
				t.Errorf("bound(%+v).Per() = %v, want %v", tc.r, got, tc.per)
			}
		})
	}
}

// TestDurNsEdges: DurNs saturates at the largest Duration either way, at
// the bound exactly and past it, and rounds inside.
func TestDurNsEdges(t *testing.T) {
	for _, tc := range []struct {
		ns   float64
		want time.Duration
	}{
		{math.NaN(), 0},
		{maxDurationF, math.MaxInt64},
		{math.Inf(1), math.MaxInt64},
		{-maxDurationF, -math.MaxInt64},
		{math.Inf(-1), -math.MaxInt64},
		{1.4, 1},
		{1.6, 2},
		{-1.6, -2},
	} {
		if got := DurNs(tc.ns); got != tc.want {
			t.Errorf("DurNs(%v) = %d, want %d", tc.ns, got, tc.want)
		}
	}
}
