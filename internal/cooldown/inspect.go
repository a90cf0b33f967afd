package cooldown

import (
	"context"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// What the retry loop's tests read of an engine beyond the seam, and what
// they do to set one up: a key's state, a push, an op or an answer
// applied as a call's would be. Nothing here is on a call's path.

// State returns a copy of k's state, on the engine's clock.
func (k *KeyState) State() store.State {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.state
	st.Record = st.Clone()
	return st
}

// SetProcess names e's failures in the fleet's rows as process id's: a
// test's replicas of one process, each a process of its own (processOf).
func (e *Engine) SetProcess(id uint64) { e.id = id }

// On is t, an instant of the clock e was bound to, on e's anchored clock.
func (e *Engine) On(t time.Time) time.Time { return e.clock.Load().On(t) }

// Apply applies ops to k's key as a call's op does: on the Store, when e
// has one, else on the process's own state.
func (e *Engine) Apply(ctx context.Context, k *KeyState, ops []store.Op) { e.apply(ctx, k, ops, nil) }

// HearAnswer applies what an answer at now said of the pace of k's key,
// as a call not paced would (its cost on each lane: cost).
func (e *Engine) HearAnswer(ctx context.Context, k *KeyState, now time.Time, a *Answer, cost Costs) {
	e.applyAnswer(ctx, k, now, a, time.Time{}, nil, cost)
}

// Push is a Store's push of key's state, as Listen delivers it.
func (e *Engine) Push(key string, st store.State) { e.onPush(key, st) }

// Take asks for a slot for a send of cost at now, as Enter does past what
// the process knows: the Store's Result.
func (e *Engine) Take(ctx context.Context, k *KeyState, now time.Time, cost Costs, within time.Duration) store.Result {
	_, _, res := e.take(ctx, k, now, cost, within, Order{})
	return res
}

// Store is e's Store, nil when it has none.
func (e *Engine) Store() store.Store { return e.store }

// MaxKeys is how many keys an engine watches at most.
const MaxKeys = maxKeys

// SweepEvery is how often, in real time, an engine looks over its keys.
const SweepEvery = sweepEvery

// StoreSettle is how long a Store that failed must work before it is
// logged as working again.
const StoreSettle = storeSettle

// ErrBadReply is a Store's reply that cannot be true.
var ErrBadReply = errBadReply

// Keys is the keys ws holds, in no order.
func (ws *WatchSet) Keys() []string {
	out := make([]string, 0, len(ws.m))
	for k := range ws.m {
		out = append(out, k)
	}
	return out
}
