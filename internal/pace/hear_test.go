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

// TestLimitGrowEdges: a 429 and a success, each rule on both sides of its
// bound: the first guess and the exact ask that betters it, a hold of
// MaxHold exactly (not refused) and past it (refused), a reset that ends
// now (no hold), a cut's pause in units of the mean cost, a slowed word
// that comes back, a success paced at GrowSpan exactly, a success on a
// lane not paced, and a slowdown bounded to MaxLearned a mean cost.
func TestLimitGrowEdges(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ms := float64(time.Millisecond)
	grown := Rates{Learned: ms}
	grown.bound()
	for _, tc := range []struct {
		name  string
		r     Rates
		quiet time.Duration
		n     News
		want  func(Effect) bool
		says  string
	}{
		{"a first 429: the guess", Rates{}, 0, News{Hit: true},
			func(e Effect) bool { return e.Rates.Learned == float64(FirstInterval) && e.Rates.Ramping }, "Learned FirstInterval, ramping"},
		{"a first 429 with an exact ask of 2 ms", Rates{}, 0, News{Hit: true, HasAsk: true, Ask: 2 * time.Millisecond, AskRes: time.Millisecond},
			func(e Effect) bool { return e.Rates.Learned == 2*ms }, "Learned 2 ms"},
		{"an ask of 0 betters nothing", Rates{}, 0, News{Hit: true, HasAsk: true, Ask: 0, AskRes: time.Millisecond},
			func(e Effect) bool { return e.Rates.Learned == float64(FirstInterval) }, "Learned FirstInterval"},
		{"a coarse ask betters nothing", Rates{}, 0, News{Hit: true, HasAsk: true, Ask: 2 * time.Millisecond, AskRes: time.Second},
			func(e Effect) bool { return e.Rates.Learned == float64(FirstInterval) }, "Learned FirstInterval"},
		{"an ask of MaxHold holds, not refused", Rates{}, 0, News{HasAsk: true, Ask: MaxHold, AskRes: time.Second},
			func(e Effect) bool { return e.Hold.Equal(now.Add(MaxHold)) && !e.Refuse }, "held MaxHold, not refused"},
		{"an ask past MaxHold is refused", Rates{}, 0, News{HasAsk: true, Ask: MaxHold + time.Second, AskRes: time.Second},
			func(e Effect) bool { return e.Hold.Equal(now.Add(MaxHold)) && e.Refuse }, "held MaxHold, refused"},
		{"a reset that ends now holds nothing", Rates{}, 0, News{HasReset: true, Reset: time.Second, ResetRes: time.Second},
			func(e Effect) bool { return e.Hold.IsZero() }, "no hold"},
		{"a cut pauses CutPause sends of the mean cost", Rates{Learned: ms, MeanCost: 100, Generation: 3}, 0,
			News{Hit: true, Paced: true, Generation: 3, Queued: true, Cost: 100},
			func(e Effect) bool {
				return e.Hold.Equal(now.Add(DurNs(CutPause * ms * CutBy * 100)))
			}, "a pause of 4 × Per × 100"},
		{"a success brings a slowed word back", Rates{Stated: ms, Slowdown: 2}, 0,
			News{OK: true, Paced: true, PacedPer: 2 * ms},
			func(e Effect) bool { return e.Rates.Slowdown == 2*SteadyGrow }, "Slowdown 2 × SteadyGrow"},
		{"a success paced at GrowSpan exactly grows", grown, 0,
			News{OK: true, Paced: true, PacedPer: grown.Per() * GrowSpan},
			func(e Effect) bool { return e.Rates.Learned == ms*SteadyGrow }, "Learned × SteadyGrow"},
		{"a success on a lane not paced says nothing", Rates{}, IdleAfter,
			News{OK: true, Paced: true},
			func(e Effect) bool { return e.Rates == Rates{} }, "no Rates"},
		{"a slowdown is bounded to MaxLearned a mean cost", Rates{Stated: ms, Slowdown: 5000, MeanCost: 100}, 0, News{},
			func(e Effect) bool { return e.Rates.Slowdown == float64(MaxLearned)/(ms*100) }, "Slowdown 10"},
		{"no slowdown stays none", Rates{Stated: ms}, 0, News{},
			func(e Effect) bool { return e.Rates.Slowdown == 0 }, "Slowdown 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Hear(tc.r, now, tc.quiet, tc.n)
			if !tc.want(e) {
				t.Errorf("Hear(%+v, %+v) = %+v, want %s", tc.r, tc.n, e, tc.says)
			}
		})
	}
}

// TestCountsExactEdge: a window of ExactRes resolutions exactly states
// the rate; one resolution less only bounds it.
func TestCountsExactEdge(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		window       time.Duration
		exact, bound bool
	}{
		{ExactRes * time.Millisecond, true, false},
		{(ExactRes - 1) * time.Millisecond, false, true},
	} {
		c := signal.Counts{Limit: 10, Remaining: 2, Window: tc.window, Res: time.Millisecond, OK: true}
		r := Hear(Rates{}, now, 0, News{Counts: c}).Rates
		if (r.Stated > 0) != tc.exact || (r.CoarseBound > 0) != tc.bound {
			t.Errorf("a window of %v: Stated %v, CoarseBound %v; want stated %v, bound %v", tc.window, r.Stated, r.CoarseBound, tc.exact, tc.bound)
		}
	}
}

// TestStatedFasterEdges: a count at least twice as fast as the word, from
// two units spent or more, is the provider's rate now; exactly twice as
// fast, or from one unit, only lets the word down by StatedDecay.
func TestStatedFasterEdges(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	counts := func(remaining int64, window time.Duration) signal.Counts {
		return signal.Counts{Limit: 10, Remaining: remaining, Window: window, Res: time.Millisecond, OK: true}
	}
	word := Hear(Rates{}, now, 0, News{Counts: counts(0, time.Second)}).Rates // 100 ms a unit, paced ExactSlack under
	decayed := word.Stated * StatedDecay
	for _, tc := range []struct {
		name string
		c    signal.Counts
		want float64
	}{
		{"twice as fast exactly, two spent", counts(8, 100*time.Millisecond), decayed},
		{"more than twice as fast, two spent", counts(8, 80*time.Millisecond), 40 * float64(time.Millisecond) * ExactSlack},
		{"more than twice as fast, one spent", counts(9, 40*time.Millisecond), decayed},
	} {
		got := Hear(word, now, 0, News{Counts: tc.c}).Rates.Stated
		if math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s: Stated %v, want %v", tc.name, got, tc.want)
		}
	}
}
