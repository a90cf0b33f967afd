package cooldown

import (
	"context"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What an answer says, lane by lane: which lanes need the call's cost,
// which a limit hits, when its counts explain it, what a paced success
// grows, and what waits for the next take.

// TestNeedsCosts: a count, a reset or the error body of a token lane needs
// the call's cost in tokens; the request lane's never does.
func TestNeedsCosts(t *testing.T) {
	counted := signal.Counts{Limit: 100, Remaining: 50, Window: time.Minute, OK: true}
	for l := range numLanes {
		for _, tc := range []struct {
			name string
			a    Answer
		}{
			{"a count", func() (a Answer) { a.Counts[l] = counted; return }()},
			{"a reset", func() (a Answer) { a.HasReset[l], a.Reset[l] = true, time.Second; return }()},
			{"the error body", Answer{Body: 1 << l}},
		} {
			assert.Equal(t, l != laneRequests, tc.a.needsCosts(), "%s of lane %v", tc.name, l)
		}
	}
	assert.False(t, (&Answer{Limited: true, OK: false}).needsCosts(), "nothing said of a lane")
}

// TestHitLanes: a 429 (or a failed try with an ask) hits the lanes its
// error body names; else those its counts say could not take the send
// (remaining below its cost, not at it) or whose reset it gives; else the
// request lane. A failed try that asks for nothing hits none.
func TestHitLanes(t *testing.T) {
	count := func(l laneID, remaining int64) (a Answer) {
		a.Limited = true
		a.Counts[l] = signal.Counts{Limit: 30000, Remaining: remaining, Window: time.Minute, Res: time.Millisecond, OK: true}
		return a
	}
	reset := count(laneRequests, 5)
	reset.HasReset[laneOutput] = true
	body := count(laneTokens, 0)
	body.Body = 1 << laneInput
	cost := Costs{1, 1000, 1000}
	for _, tc := range []struct {
		name string
		a    Answer
		want laneMask
	}{
		{"tokens below the cost", count(laneTokens, 999), 1 << laneTokens},
		{"tokens at the cost", count(laneTokens, 1000), 1 << laneRequests},
		{"tokens above it", count(laneTokens, 1001), 1 << laneRequests},
		{"no request left", count(laneRequests, 0), 1 << laneRequests},
		{"a lane the send costs nothing on", count(laneOutput, 0), 1 << laneRequests},
		{"a reset", reset, 1 << laneOutput},
		{"the body's word", body, 1 << laneInput},
		{"not a limit", Answer{Counts: count(laneTokens, 0).Counts}, 0},
		{"a failed try's ask", Answer{HasAsk: true, Ask: time.Second}, 1 << laneRequests},
		{"a failed try's ask of 0", Answer{HasAsk: true}, 0},
	} {
		assert.Equal(t, tc.want, tc.a.hitLanes(cost), tc.name)
	}
}

// tokenLane is a state whose token lane has r, and a ticket of a send of
// 1000 tokens slotted on it at r, queued behind another.
func tokenLane(r pace.Rates) (store.State, *ticket, Costs) {
	st := store.State{Now: epoch, Record: store.Record{Lanes: make([]store.Lane, numLanes)}}
	st.Lanes[laneTokens] = store.Lane{Per: r.Per(), Burst: r.Burst(), Rates: r.Encode(), Version: 7}
	cost := Costs{1, 1000}
	tk := &ticket{costs: cost, charged: 1 << laneTokens, queued: 1 << laneTokens}
	tk.gen[laneTokens], tk.charge[laneTokens] = r.Generation, 1000*r.Per()
	return st, tk, cost
}

// ratesOp is the rates ops make of lane l; ok false when they make none.
func ratesOp(ops []store.Op, l laneID) (r pace.Rates, ok bool) {
	for _, op := range ops {
		if op.Kind == store.OpRates && op.Lane == l {
			return pace.DecodeRates(op.Rates), true
		}
	}
	return pace.Rates{}, false
}

// TestExplainedByCounts: a 429 to a send paced at the provider's word
// slows the word unless its counts explain it (remaining below the send's
// cost: the bucket was spent); remaining at the cost does not.
func TestExplainedByCounts(t *testing.T) {
	st, tk, cost := tokenLane(pace.Rates{Stated: 20e3, Limit: 30000, MeanCost: 1000, Generation: 3})
	for _, tc := range []struct {
		remaining int64
		slowed    bool
	}{{0, false}, {999, false}, {1000, true}, {1001, true}} {
		a := Answer{Limited: true, Body: 1 << laneTokens}
		a.Counts[laneTokens] = signal.Counts{Limit: 30000, Remaining: tc.remaining, Window: time.Second, Res: time.Millisecond, OK: true}
		ops, _ := answerOps(nil, &st, epoch, &a, time.Time{}, tk, cost)
		r, _ := ratesOp(ops, laneTokens)
		assert.Equal(t, tc.slowed, r.Slowdown > 1, "%d of 30000 left, a send of 1000", tc.remaining)
	}
}

// TestPacedSuccessGrows: a success of a send paced at a learned token
// lane's rate (its charge over its tokens, ns a token) grows the rate; one
// paced at a rate much slower says nothing of it.
func TestPacedSuccessGrows(t *testing.T) {
	r := pace.Rates{Learned: 20e3, MeanCost: 1000, Generation: 3}
	st, tk, cost := tokenLane(r)
	ops, _ := answerOps(nil, &st, epoch, &Answer{OK: true}, time.Time{}, tk, cost)
	got, ok := ratesOp(ops, laneTokens)
	require.True(t, ok, "a paced success grows the rate")
	assert.Less(t, got.Per(), r.Per())

	tk.charge[laneTokens] *= 2 // slotted at half the rate
	ops, _ = answerOps(nil, &st, epoch, &Answer{OK: true}, time.Time{}, tk, cost)
	_, ok = ratesOp(ops, laneTokens)
	assert.False(t, ok, "paced at half the rate: no growth")
}

// TestHoldArmedWhileStoreFails: a hold a process armed while its Store
// failed is its own: the Store, back with nothing of it, gets it back.
func TestHoldArmedWhileStoreFails(t *testing.T) {
	ctx := context.Background()
	fs := &failingStore{Store: store.NewLocal(nil), fail: true}
	e, now := testEngine(t, fs)
	k := e.Watch("k", now.Now())
	e.HearAnswer(ctx, k, now.Now(), &Answer{Limited: true, HasAsk: true, Ask: 20 * time.Second, AskRes: time.Millisecond}, Costs{1})
	require.WithinDuration(t, now.Now().Add(20*time.Second), k.State().Lane(laneRequests).Until, 0, "held on the process's own state")
	fs.fail = false
	now.Add(5 * time.Second)
	e.Take(ctx, k, now.Now(), Costs{1}, time.Minute)
	assert.WithinDuration(t, now.Now().Add(15*time.Second), k.State().Lane(laneRequests).Until, 0, "the Store lost it: put back, what is left of it")
	st, err := fs.Store.Apply(ctx, "k", nil)
	require.NoError(t, err)
	assert.Greater(t, st.Lane(laneRequests).Until.Sub(st.Now), 14*time.Second, "the Store has it again")
}

// TestArms: an answer arms a key nobody watches when it limits (not a call
// too large), asks for a wait, gives an exhausted limit's reset, or counts
// the request limit with something spent in a window (its rate); a count
// of a full bucket states no rate.
func TestArms(t *testing.T) {
	counts := func(limit, remaining int64, window time.Duration) (a Answer) {
		a.Counts[laneRequests] = signal.Counts{Limit: limit, Remaining: remaining, Window: window, Res: time.Second, OK: true}
		return a
	}
	reset := func(l laneID, d time.Duration) (a Answer) {
		a.HasReset[l], a.Reset[l] = true, d
		return a
	}
	for _, tc := range []struct {
		name string
		a    Answer
		arms bool
	}{
		{"nothing said", Answer{OK: true}, false},
		{"a 429", Answer{Limited: true}, true},
		{"a 429 to a call too large", Answer{Limited: true, TooLarge: true}, false},
		{"an ask", Answer{HasAsk: true, Ask: time.Second}, true},
		{"an ask of 0", Answer{HasAsk: true}, false},
		{"a count with half the requests spent", counts(100, 50, time.Minute), true},
		{"a count with one request spent", counts(100, 99, time.Minute), true},
		{"a count of a full bucket", counts(100, 100, time.Minute), false},
		{"a count over no window", counts(100, 50, 0), false},
		{"a token lane's reset", reset(laneTokens, time.Second), true},
		{"a reset of 0", reset(laneTokens, 0), false},
	} {
		assert.Equal(t, tc.arms, tc.a.arms(), tc.name)
	}
}

// TestSpacedWhileLimitedLately: the request lane's count keeps the
// provider's bucket (its limit) unless the provider limited the lane
// within pace.IdleAfter: then the lane is spaced, one send after the
// other, no bucket.
func TestSpacedWhileLimitedLately(t *testing.T) {
	now := epoch.Add(time.Hour)
	for _, tc := range []struct {
		name    string
		limited time.Time
		limit   float64
	}{
		{"never limited", time.Time{}, 100},
		{"limited a second ago", now.Add(-time.Second), 0},
		{"limited just within IdleAfter", now.Add(-pace.IdleAfter + time.Nanosecond), 0},
		{"limited IdleAfter ago", now.Add(-pace.IdleAfter), 100},
	} {
		st := store.State{Now: now, Record: store.Record{Lanes: make([]store.Lane, numLanes)}}
		st.Lanes[laneRequests].Limited = tc.limited
		a := Answer{OK: true}
		a.Counts[laneRequests] = signal.Counts{Limit: 100, Remaining: 50, Window: time.Minute, Res: time.Second, OK: true}
		ops, _ := answerOps(nil, &st, now, &a, time.Time{}, nil, Costs{1})
		r, ok := ratesOp(ops, laneRequests)
		require.True(t, ok, "%s: the count states a rate", tc.name)
		assert.Equal(t, tc.limit, r.Limit, tc.name)
	}
}

// TestHearAsksCostsOnce: an answer that needs the call's cost in tokens
// asks for it (its body read) only when the send's ticket has none.
func TestHearAsksCostsOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tk    *ticket
		asked bool
	}{
		{"no ticket", nil, true},
		{"a ticket of no tokens", &ticket{costs: Costs{1}}, true},
		{"a ticket of tokens, input and output", &ticket{costs: Costs{1, 10, 6, 4}}, false},
		{"a ticket of input tokens only", &ticket{costs: Costs{1, 5, 5, 0}}, false},
		{"a ticket of output tokens only", &ticket{costs: Costs{1, 5, 0, 5}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, clk := testEngine(t, nil)
			k := e.Watch("k", clk.Now())
			require.NotNil(t, k)
			a := &Answer{Limited: true}
			a.Counts[laneTokens] = signal.Counts{Limit: 30000, Remaining: 0, Window: time.Minute, Res: time.Millisecond, OK: true}
			asked := false
			costs := func() Costs { asked = true; return Costs{1, 10, 6, 4} }
			e.hearPace(context.Background(), k, clk.Now(), a, time.Time{}, tc.tk, costs, func() string { return "k" })
			assert.Equal(t, tc.asked, asked)
		})
	}
}
