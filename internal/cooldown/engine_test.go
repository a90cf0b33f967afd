package cooldown

import (
	"context"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
)

// The engine's bookkeeping: who a Store says it is, when a key goes, and
// what waits for a key's next take.

// apart is a Store made apart, a pointer of its own; byValue is one that
// is no pointer.
type (
	apart   struct{ store.Store }
	byValue struct{ store.Store }
)

// TestProcessOf: engines given one Store are one process; Stores made
// apart (pointers of their own) are processes apart; a Store that is no
// pointer is this process; every Local is a process of its own.
func TestProcessOf(t *testing.T) {
	a, b := &apart{}, &apart{}
	assert.Equal(t, processOf(a), processOf(a), "one Store: one process")
	assert.NotEqual(t, processOf(a), processOf(b), "Stores made apart: processes apart")
	assert.NotEqual(t, processID, processOf(a))
	assert.Equal(t, processID, processOf(byValue{}), "no pointer: this process")
	local := store.NewLocal(nil)
	assert.NotEqual(t, processOf(local), processOf(local), "a Local: a process per engine")
}

// TestSweepAtIdleAfter: a key armed with nothing to say goes once it was
// armed pace.IdleAfter ago, not a nanosecond before.
func TestSweepAtIdleAfter(t *testing.T) {
	e, now := testEngine(t, nil)
	e.Watch("k", e.Now())
	now.Add(pace.IdleAfter - time.Nanosecond)
	e.Sweep()
	assert.Equal(t, 1, e.Len(), "a nanosecond before IdleAfter: kept")
	now.Add(time.Nanosecond)
	e.Sweep()
	assert.Zero(t, e.Len(), "IdleAfter: gone")
}

// TestTakeDeferredAges: a deferred correction and hold go with the next
// take for what is left of them (a clock stepped back adds nothing); no
// other op's For moves.
func TestTakeDeferredAges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration
		left  time.Duration
	}{{"3 s later", 3 * time.Second, 7 * time.Second}, {"at once", 0, 10 * time.Second}, {"a clock stepped back", -3 * time.Second, 10 * time.Second}} {
		k := &KeyState{}
		for _, kind := range []store.OpKind{store.OpCorrect, store.OpHold, store.OpRates, store.OpLimited} {
			k.deferred = append(k.deferred, deferredOp{store.Op{Kind: kind, Lane: laneTokens, For: 10 * time.Second}, epoch})
		}
		ops := k.takeDeferred(epoch.Add(tc.after))
		assert.Len(t, ops, 4, tc.name)
		for _, op := range ops {
			want := 10 * time.Second
			if op.Kind == store.OpCorrect || op.Kind == store.OpHold {
				want = tc.left
			}
			assert.Equal(t, want, op.For, "%s: %v", tc.name, op.Kind)
		}
		assert.Empty(t, k.deferred, "taken: forgotten")
	}
}

// TestDeferOpsOneRatesOpALane: a lane's rates deferred twice go as one op,
// the newest rates over the version the first was made from; another
// lane's, and the lane's other ops, go as they are.
func TestDeferOpsOneRatesOpALane(t *testing.T) {
	k := &KeyState{}
	correct := store.Op{Kind: store.OpCorrect, Lane: laneTokens, For: time.Second}
	k.deferOps([]store.Op{{Kind: store.OpRates, Lane: laneTokens, Version: 7, Per: 1, Rates: "a"}, correct}, epoch)
	k.deferOps([]store.Op{{Kind: store.OpRates, Lane: laneTokens, Version: 8, Per: 2, Rates: "b"},
		{Kind: store.OpRates, Lane: laneRequests, Version: 2, Per: 3, Rates: "c"}}, epoch)
	want := []store.Op{{Kind: store.OpRates, Lane: laneTokens, Version: 7, Per: 2, Rates: "b"}, correct,
		{Kind: store.OpRates, Lane: laneRequests, Version: 2, Per: 3, Rates: "c"}}
	assert.Equal(t, want, k.takeDeferred(epoch))
	assert.Equal(t, "b", k.state.Lane(laneTokens).Rates, "the key's rates are as they will be")
}

// TestDeferredBounded: an answer's ops wait for the next take while fewer
// than maxDeferred do; at maxDeferred they go to the Store at once.
func TestDeferredBounded(t *testing.T) {
	ctx := context.Background()
	counted := &countApplies{Store: store.NewLocal(nil)}
	e, now := testEngine(t, counted)
	k := e.Watch("k", now.Now())
	e.Take(ctx, k, now.Now(), Costs{1}, time.Minute) // the Store's Seq: its answers may wait
	a := Answer{OK: true}
	a.Counts[laneTokens] = signal.Counts{Limit: 30000, Remaining: 20000, Window: time.Minute, Res: time.Millisecond, OK: true}
	for _, tc := range []struct {
		waiting int
		applied bool
	}{{0, false}, {maxDeferred - 1, false}, {maxDeferred, true}} {
		k.mu.Lock()
		k.deferred = make([]deferredOp, tc.waiting)
		for i := range k.deferred {
			k.deferred[i] = deferredOp{store.Op{Kind: store.OpProbeEnd}, now.Now()}
		}
		k.mu.Unlock()
		before := counted.n
		e.HearAnswer(ctx, k, now.Now(), &a, Costs{1, 1000})
		assert.Equal(t, tc.applied, counted.n > before, "%d ops waiting", tc.waiting)
	}
}
