package cooldown

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The engine's side of its Store: what it logs of a Store failing and
// back, what it keeps of what the Store did not apply, and what a reply
// it cannot believe is.

// TestStoreBackAfterSettle: a Store that failed is logged back when an
// Apply succeeds storeSettle after the last that failed, not a nanosecond
// sooner.
func TestStoreBackAfterSettle(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		after time.Duration
		back  bool
	}{{storeSettle - time.Nanosecond, false}, {storeSettle, true}} {
		clk := &testClock{now: epoch}
		fs := &failingStore{Store: store.NewLocal(clk.Now), fail: true}
		core, logs := observer.New(zapcore.InfoLevel)
		e := New(Config{Store: fs})
		e.Bind(clk.Now, zap.New(core))
		t.Cleanup(e.Close)
		k := e.Watch("k", clk.Now())
		e.Apply(ctx, k, []store.Op{{Kind: store.OpLimited}})
		assert.Equal(t, 1, logs.FilterMessage(MsgStoreFailing).Len())
		fs.fail = false
		clk.Add(tc.after)
		e.Apply(ctx, k, []store.Op{{Kind: store.OpLimited}})
		assert.Equal(t, tc.back, logs.FilterMessage(MsgStoreBack).Len() == 1, "%v after", tc.after)
	}
}

// TestApplyHereScales: applied on the process's own state, an op that
// scales a lane's schedule to a new rate notes when, and wakes the sends
// waiting when the rate is faster; an op that scales nothing does neither.
func TestApplyHereScales(t *testing.T) {
	k := &KeyState{}
	k.state.Lanes = []store.Lane{{Per: 1e6, Scaled: 1e6, Next: epoch.Add(time.Second)}}
	k.mu.Lock()
	woken := k.wokenAll()
	k.mu.Unlock()
	t1, t2 := epoch.Add(time.Second), epoch.Add(2*time.Second)
	for _, tc := range []struct {
		name     string
		at       time.Time
		op       store.Op
		scaledAt time.Time
		woken    bool
	}{
		{"nothing scaled", epoch, store.Op{Kind: store.OpLimited}, time.Time{}, false},
		{"a rate 1% slower: not scaled", epoch, store.Op{Kind: store.OpRates, Version: 0, Per: 1.01e6}, time.Time{}, false},
		{"half the rate", t1, store.Op{Kind: store.OpRates, Version: 1, Per: 2e6}, t1, false},
		{"twice the rate", t2, store.Op{Kind: store.OpRates, Version: 2, Per: 1e6}, t2, true},
	} {
		k.applyHere(tc.at, []store.Op{tc.op})
		assert.Equal(t, tc.scaledAt, k.scaledAt[laneRequests], tc.name)
		select {
		case <-woken:
			assert.True(t, tc.woken, "%s: woken", tc.name)
			woken = k.wokenAll()
		default:
			assert.False(t, tc.woken, "%s: not woken", tc.name)
		}
	}
}

// TestKeepCircuitNews: of ops a Store did not apply, the key keeps for its
// next op what the fleet's circuit waits for (a sign of life, a probe's
// end, a probe's failure), and nothing else, while fewer than maxDeferred
// wait.
func TestKeepCircuitNews(t *testing.T) {
	ops := []store.Op{{Kind: store.OpFail}, {Kind: store.OpFail, Probe: true}, {Kind: store.OpAlive},
		{Kind: store.OpProbeEnd}, {Kind: store.OpLimited}, {Kind: store.OpTake, Circuit: true}}
	k := &KeyState{}
	k.keepCircuitNews(ops, epoch)
	assert.Equal(t, []store.Op{ops[1], ops[2], ops[3]}, k.takeDeferred(epoch))
	for _, tc := range []struct{ waiting, kept int }{{maxDeferred - 1, 1}, {maxDeferred, 0}} {
		k.deferred = make([]deferredOp, tc.waiting)
		k.keepCircuitNews(ops[2:3], epoch)
		assert.Len(t, k.deferred, tc.waiting+tc.kept, "%d waiting", tc.waiting)
	}
}

// TestCheckReply: a reply is believed unless it cannot be true: a zero
// now, a wait below zero, or a take it took whose wait does not fit (not
// shorter than within); a wait of 0 fits any within.
func TestCheckReply(t *testing.T) {
	take := func(within time.Duration) []store.Op { return []store.Op{{Kind: store.OpTake, Within: within}} }
	for _, tc := range []struct {
		name string
		st   store.State
		ops  []store.Op
		ok   bool
	}{
		{"took at once", store.State{Now: epoch, Result: store.Result{Took: true}}, take(time.Second), true},
		{"took at once, within 0", store.State{Now: epoch, Result: store.Result{Took: true}}, take(0), true},
		{"took, a wait that fits", store.State{Now: epoch, Result: store.Result{Took: true, Wait: time.Second - time.Microsecond}}, take(time.Second), true},
		{"took, a wait of within", store.State{Now: epoch, Result: store.Result{Took: true, Wait: time.Second}}, take(time.Second), false},
		{"did not take a wait of within", store.State{Now: epoch, Result: store.Result{Wait: time.Second}}, take(time.Second), true},
		{"a wait below zero", store.State{Now: epoch, Result: store.Result{Wait: -time.Microsecond}}, nil, false},
		{"no now", store.State{}, nil, false},
	} {
		assert.Equal(t, tc.ok, checkReply(&tc.st, tc.ops) == nil, tc.name)
	}
}

// TestRestoreAppliesToTheState: what a process puts back of a key its
// Store lost (its rates, a hold it armed) applies to the state the Store
// replied too, so that the call that found the loss waits for it; the
// state keeps the Store's Seq.
func TestRestoreAppliesToTheState(t *testing.T) {
	rates := pace.Rates{Learned: 1e6}.Encode()
	k := &KeyState{}
	k.state.Lanes = []store.Lane{{Per: 1e6, Rates: rates}}
	k.armed[laneRequests] = armedHold{until: epoch.Add(20 * time.Second)}
	st := store.State{Now: epoch, Record: store.Record{Seq: 42}}
	assert.True(t, k.restore(&st, epoch, epoch), "a hold put back")
	assert.True(t, st.Lane(laneRequests).Rates == rates, "the rates put back") // (an opaque string, not printed)
	assert.Equal(t, epoch.Add(20*time.Second), st.Lane(laneRequests).Until)
	assert.Equal(t, uint64(42), st.Seq, "the Store's Seq")
}

// failingStore is a Store that fails every Apply while fail is set.
// TestEchoWhileStoreFails: a push of the Seq the process already has (its
// own Apply's echo, come late) is no news: it does not undo what the
// process applied on its own while its Store failed (R24: a faltering
// Store never lets a call through a hold the process knew of).
func TestEchoWhileStoreFails(t *testing.T) {
	ctx := context.Background()
	fs := &failingStore{Store: store.NewLocal(nil)}
	e, now := testEngine(t, fs)
	k := e.Watch("k", now.Now())
	e.Take(ctx, k, now.Now(), Costs{1}, time.Minute)
	echo, err := fs.Store.Apply(ctx, "k", nil) // the take's state, as the Store publishes it
	require.NoError(t, err)
	require.Equal(t, echo.Seq, k.State().Seq)
	fs.fail = true
	e.HearAnswer(ctx, k, now.Now(), &Answer{Limited: true, HasAsk: true, Ask: 20 * time.Second, AskRes: time.Millisecond}, Costs{1})
	require.WithinDuration(t, now.Now().Add(20*time.Second), k.State().Lane(laneRequests).Until, 0, "held on the process's own state")
	e.Push("k", echo)
	assert.WithinDuration(t, now.Now().Add(20*time.Second), k.State().Lane(laneRequests).Until, 0, "the echo undid the hold")
}

type failingStore struct {
	store.Store
	fail bool
}

func (s *failingStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	if s.fail {
		return store.State{}, errors.New("down")
	}
	return s.Store.Apply(ctx, key, ops)
}
