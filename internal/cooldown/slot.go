package cooldown

import (
	"context"
	"math"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/store"
)

// A send's slot (R17, R23): the ticket a take gives it, what is left of its
// wait as the schedule moves (holds, retries let in before it, a rate
// scaled), and the state of its key it reads them from.

// A ticket is a send's slot, as the Store gave it (on the Store's clock),
// and what the send costs: the slot's part (its place) moves to another
// send of the process when they trade (order.go); the costs stay.
type ticket struct {
	place
	costs   Costs    // the send's units per lane
	charged laneMask // the lanes that charged it (paced)
	charge  [numLanes]float64
	gen     [numLanes]uint32
	// here: the slot was given by the process's own state, its Store
	// failing: its marks are on the process's clock, not the Store's (a
	// correction sent with one moved the fleet's schedule by the clocks'
	// skew).
	here bool
	// queued: the lanes on which the send waited behind another send at
	// least (a 429 to it says something of the rate it was paced at).
	queued laneMask
}

// A place is a slot in a key's schedule: per lane, the schedule's end
// after it (mark, for a correction or for giving it back), the lane's
// shifts and pushes then (see more), and when it is due, on the engine's
// clock, with the lane's schedule scaled to perAt (store.Lane.Scaled): a
// rate changed since scales what is left of it.
type place struct {
	mark     [numLanes]time.Time
	shiftAt  [numLanes]time.Duration
	pushedAt [numLanes]time.Duration
	movedAt  [numLanes]time.Duration
	due      [numLanes]time.Time
	perAt    [numLanes]float64
	level    int // in the lanes' order (store.Op.Level): the sends of higher ones push it
	// fixed: the lanes on which the slot is the first of a lower priority
	// that a tenth jump let go (R27's floor): no push moves it any more.
	fixed laneMask
}

// goes is when the place's send goes: its latest due.
func (p *place) goes() time.Time {
	var t time.Time
	for _, d := range p.due {
		t = later(t, d)
	}
	return t
}

// take gives a send of k's key its slot at now (OpTake), with the ops
// deferred to it, if the wait for it is shorter than within. A Result that
// has not Took took nothing: the wait does not fit, a refusing hold is in
// the way (w is then what is left of it), or the key's circuit refuses it
// (Unavailable). Probe: the send is the circuit's probe.
func (e *Engine) take(ctx context.Context, k *KeyState, now time.Time, costs Costs, within time.Duration, o Order) (w time.Duration, tk ticket, res store.Result) {
	// now is the engine's clock at the take: a slot's due time is on it.
	if e.store == nil {
		return e.takeHere(k, now, costs, within, o)
	}
	return e.takeShared(ctx, k, now, costs, within, o)
}

// takeShared is take with a Store: the ops deferred to it go with it.
func (e *Engine) takeShared(ctx context.Context, k *KeyState, now time.Time, costs Costs, within time.Duration, o Order) (w time.Duration, tk ticket, res store.Result) {
	op := store.Op{Kind: store.OpTake, Costs: costs[:], Within: within, Priority: o.Priority, Retry: o.Retry, Circuit: e.circuit != nil}
	k.mu.Lock()
	ops := append(k.takeDeferred(now), op)
	k.mu.Unlock()
	e.apply(ctx, k, ops, func(st *store.State, here bool) {
		res = st.Result
		if res.Took {
			tk = ticketOf(st, now, costs, op.Level(), here)
		}
	})
	return res.Wait, tk, res
}

// takeHere is take on the process's own state (no Store): no round trip,
// no deferred ops (they wait only for a Store's next take), and no
// allocation (R16: a key whose limit was stated takes a slot for each
// send, R27). The slot is taken at the engine's clock's now, as apply's.
func (e *Engine) takeHere(k *KeyState, now time.Time, costs Costs, within time.Duration, o Order) (w time.Duration, tk ticket, res store.Result) {
	op := store.Op{Kind: store.OpTake, Costs: costs[:], Within: within, Priority: o.Priority, Retry: o.Retry, Circuit: e.circuit != nil}
	at := e.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	ops := [1]store.Op{op}
	k.applyHere(at, ops[:])
	e.logCircuit(k, at)
	res = k.state.Result
	if res.Took {
		tk = ticketOf(&k.state, now, costs, op.Level(), true)
	}
	return res.Wait, tk, res
}

// ticketOf is the ticket of a send slotted at now (on the engine's clock)
// by a take whose reply is st (on the clock of whoever gave it).
func ticketOf(st *store.State, now time.Time, costs Costs, level int, here bool) ticket {
	tk := ticket{costs: costs, here: here}
	tk.level = level
	for l := range numLanes {
		s := st.Lane(l)
		if costs[l] <= 0 || s.Per <= 0 {
			continue
		}
		tk.charged |= 1 << l
		tk.mark[l], tk.shiftAt[l], tk.pushedAt[l], tk.movedAt[l] = s.Next, s.Shift, s.Pushed(level), s.Moved
		jumped := s.Tail(level).Before(s.Next)
		if here || jumped {
			// A send that went before sends waiting (a retry, a higher
			// priority) leaves a schedule's end after it that counts sends
			// the provider has not seen when it answers: its count may
			// only move the schedule later. A slot of the process's own
			// state has no mark the Store knows.
			tk.mark[l] = time.Time{}
		}
		tk.charge[l], tk.gen[l] = s.Charge(costs[l]), pace.DecodeRates(s.Rates).Generation
		due := st.Wait
		if !jumped { // the send took the schedule's end (a retry too, none of its priority waiting): when the bucket covers it
			ready := addNs(s.Next, math.Min(tk.charge[l], s.Burst)-s.Burst-tk.charge[l])
			due = min(max(ready.Sub(st.Now), 0), st.Wait)
		}
		tk.due[l], tk.perAt[l] = now.Add(due), s.Scaled
		tk.queued |= laneMask(boolBit(due >= pace.DurNs(tk.charge[l]))) << l
	}
	return tk
}

// giveBack gives back the slot of tk, whose send did not go: after the
// caller's context ended too, so it does not end the Store's op.
func (e *Engine) giveBack(ctx context.Context, k *KeyState, tk ticket) {
	var ops []store.Op
	for l := range numLanes {
		if tk.charged.Has(l) && !tk.mark[l].IsZero() {
			ops = append(ops, store.Op{Kind: store.OpUntake, Lane: l, Mark: tk.mark[l], Charge: tk.charge[l]})
		}
	}
	if len(ops) > 0 {
		e.apply(context.WithoutCancel(ctx), k, ops, nil)
	}
}

// heldByProvider reports whether a hold of a lane tk counts against is in
// the wait from now (the provider's word, logged as such: R17).
func (k *KeyState) heldByProvider(now time.Time, tk *ticket) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for l := range numLanes {
		if tk.costs[l] > 0 && k.state.Lane(l).Until.After(now) {
			return true
		}
	}
	return false
}

// leftToWait is what a send holding tk must still wait at now: the rest of
// a hold armed since it took its slot, and of its slot on each lane, moved
// on by the holds and the sends let in before it since, and scaled to the
// lane's rate if it changed since; fromHold when a hold is in it. tk is
// brought up to date. k.mu is held.
func (k *KeyState) leftToWait(now time.Time, tk *ticket) (w time.Duration, fromHold bool) {
	for l := range numLanes {
		if tk.costs[l] <= 0 {
			continue
		}
		s := k.state.Lane(l)
		if hold := s.Until.Sub(now); hold > 0 {
			w, fromHold = max(w, hold), true
		}
		if !tk.charged.Has(l) {
			continue
		}
		due, shifted := k.refreshDue(l, now, tk, &s)
		fromHold = fromHold || shifted
		w = max(w, due.Sub(now))
	}
	return w, fromHold
}

// refreshDue brings tk's due on lane l (whose state is s) up to date at
// now: moved on by the holds (shifted) and the sends let in before it
// since, scaled to the lane's rate. k.mu is held.
func (k *KeyState) refreshDue(l laneID, now time.Time, tk *ticket, s *store.Lane) (due time.Time, shifted bool) {
	moved := s.Shift - tk.shiftAt[l]
	shifted = moved > 0
	moved += tk.pushes(l, s, k.scaledDue(l, now, tk).Add(moved))
	due = k.scaledDue(l, now, tk).Add(moved)
	tk.due[l], tk.perAt[l], tk.shiftAt[l] = due, s.Scaled, s.Shift
	return due, shifted
}

// pushes is how far the sends of higher levels let in before tk's since it
// last looked have moved it on lane s (R27), its due before them at due:
// none once it is the first of a lower priority that a tenth jump let go
// (Fixed: it is that one when its due was the fixed slot), which keeps its
// slot. tk's count of the lane's pushes is brought up to date.
func (tk *ticket) pushes(l laneID, s *store.Lane, due time.Time) time.Duration {
	if tk.fixed.Has(l) {
		return 0
	}
	pushed := s.Pushed(tk.level)
	if !s.Fixed.IsZero() && s.FixedLevel == tk.level {
		// The fixed head's slot is where its due was when the pushes stopped
		// for it (FixedPushed): within half a charge of it, that is tk.
		atFix := due.Add(s.FixedPushed - tk.pushedAt[l])
		if d := atFix.Sub(s.Fixed); d > -pace.DurNs(tk.charge[l]/2) && d < pace.DurNs(tk.charge[l]/2) {
			tk.fixed |= 1 << l
			pushed = s.FixedPushed
		}
	}
	moved := pushed - tk.pushedAt[l]
	tk.pushedAt[l] = pushed
	return moved
}

// scaledDue is tk's due on lane l scaled to the lane's rate, if it changed
// since: what was left of it when the schedule was scaled (scaledAt) is
// stretched or shrunk as the schedule's end was (store.Apply's OpRates),
// before the holds and retries since move it on. Scaled from now instead, a
// send that slept to its slot through a slower rate went at the old one
// (the start's queue, slotted at a guess, went at twice the rate of the cut
// that came while it slept, every other send refused). k.mu is held.
func (k *KeyState) scaledDue(l laneID, now time.Time, tk *ticket) time.Time {
	due, scaled := tk.due[l], k.state.Lane(l).Scaled
	if scaled == tk.perAt[l] || tk.perAt[l] <= 0 {
		return due
	}
	at := k.scaledAt[l]
	if at.IsZero() || at.After(now) {
		at = now
	}
	if !due.After(at) {
		return due
	}
	return addNs(at, float64(due.Sub(at))*scaled/tk.perAt[l])
}

// noteScaled keeps when each lane's schedule was scaled to a new rate: the
// lanes of r whose Scaled differs from k's state's, at now. k.mu is held.
func (k *KeyState) noteScaled(r *store.Record, now time.Time) {
	for l := range numLanes {
		if r.Lane(l).Scaled != k.state.Lane(l).Scaled {
			k.scaledAt[l] = now
		}
	}
}

// wokenAll is what wakes the sends of k's key waiting for their slots:
// closed when a lane's rate grows enough that the schedule was scaled to
// it (so that they go sooner), or when the key's circuit opens (so that
// they are refused). k.mu is held.
func (k *KeyState) wokenAll() <-chan struct{} {
	if k.wake == nil {
		k.wake = make(chan struct{})
	}
	return k.wake
}

// update makes st k's state when it is newer than k's (by its Seq), and
// wakes the sends waiting if a lane's schedule was scaled to a faster
// rate. A state of k's own Seq is no news: the same record, or, while the
// Store failed, one without what the process applied on its own since
// (k keeps the Store's Seq then): an echo of the process's own Apply that
// comes late must not undo a hold it heard meanwhile (R24). k.mu is held.
func (k *KeyState) update(st store.State) {
	if st.Seq <= k.state.Seq {
		return
	}
	k.noteScaled(&st.Record, st.Now) // (st.Now: the engine's clock, toLocalClock)
	faster := false
	for l := range numLanes {
		if old := k.state.Lane(l).Scaled; st.Lane(l).Scaled < old && old > 0 {
			faster = true
		}
	}
	was := pushesOf(&k.state.Record)
	k.state = st
	k.notePushes(&was)
	if faster {
		k.wakeAll()
	}
}

// wakeAll wakes the sends of k's key waiting for their slots. k.mu is held.
func (k *KeyState) wakeAll() {
	if k.wake != nil {
		close(k.wake)
		k.wake = nil
	}
	k.wakePushed()
}
