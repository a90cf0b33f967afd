package retryhttp

import (
	"context"
	"time"
)

// The Cooldown's side of its Store (R24): every op goes through apply, a
// shared Store's push through heardElsewhere, and what a shared Store lost
// goes back through restore.

// apply applies ops to e's key in the Store, and makes what it returns e's
// state. When the Store fails, the ops apply to e's own state: the call
// goes on with what the process knows (R24). It returns the Store's state,
// on the Store's clock, for the ticket of a take.
func (c *Cooldown) apply(ctx context.Context, e *cooling, ops []StoreOp) StoreState {
	st, err := c.store.Apply(ctx, e.key, ops)
	now := c.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		seq := e.st.Seq // the Store's, not ours: its next reply is newer
		e.st.apply(now, ops)
		e.st.Seq = seq
		return e.st
	}
	local := st
	if c.shared {
		local = onClock(st, now)
		e.restore(&local)
	}
	e.adopt(local)
	return st
}

// heardElsewhere is a shared Store's push: another process limited or held
// key (R24). A key this process does not watch is armed with it.
func (c *Cooldown) heardElsewhere(key string, st StoreState) {
	now := c.now()
	e := c.entry(key)
	if e == nil {
		if e = c.arm(key, now); e == nil {
			return
		}
	}
	local := onClock(st, now)
	e.mu.Lock()
	e.adopt(local)
	e.mu.Unlock()
}

// restore keeps what the process knows of a key that a shared Store lost
// (flushed, or back after failing): its rates and holds go back with the
// next op, so that the fleet converges again (R24). e.mu is held.
func (e *cooling) restore(st *StoreState) {
	for l := range st.Lanes {
		got, had := &st.Lanes[l], &e.st.Lanes[l]
		if got.Rates == "" && had.Rates != "" {
			e.pending = append(e.pending, pendingOp{StoreOp{Kind: StoreRates, Lane: l, Version: got.Version,
				Per: had.Per, Burst: had.Burst, Rates: had.Rates}, st.Now})
		}
		if d := had.Until.Sub(st.Now); d > 0 && had.Until.After(got.Until) {
			e.pending = append(e.pending, pendingOp{StoreOp{Kind: StoreHold, Lane: l, For: d, Refuse: had.Refuse}, st.Now})
		}
	}
}

// onClock returns st with its times moved from the Store's clock to the
// Cooldown's: now on the Cooldown's is st.Now on the Store's (R24: replicas
// whose clocks disagree pace the same; each converts a wait into its own).
func onClock(st StoreState, now time.Time) StoreState {
	d := now.Sub(st.Now)
	move := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.Add(d)
	}
	st.Now = now
	for l := range st.Lanes {
		s := &st.Lanes[l]
		s.Until, s.Next, s.RetryNext, s.Limited = move(s.Until), move(s.Next), move(s.RetryNext), move(s.Limited)
	}
	return st
}
