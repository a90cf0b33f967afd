package retryhttp

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

// A ticket is a send's slot, as the Store gave it (on the Store's clock):
// per lane, the schedule's end after it (mark, for a correction or for
// giving it back), the lane's shifts then (see more), the charge, and the
// rate generation it was slotted at.
type ticket struct {
	costs    [numLanes]float64 // the send's units per lane
	charged  laneMask          // the lanes that charged it (paced)
	mark     [numLanes]time.Time
	shiftAt  [numLanes]time.Duration
	pushedAt [numLanes]time.Duration
	movedAt  [numLanes]time.Duration
	// due is when the lane covers the send, on the Cooldown's clock, with
	// the lane's schedule scaled to perAt (StoreLane.Scaled): a rate
	// changed since scales what is left of it.
	due    [numLanes]time.Time
	perAt  [numLanes]float64
	charge [numLanes]float64
	gen    [numLanes]uint32
	retry  bool // a retry's: the retries let in after it go after it
	// local: the slot was given by the process's own state, its Store
	// failing: its marks are on the process's clock, not the Store's
	// (a correction sent with one moved the fleet's schedule by
	// the clocks' skew).
	local bool
	// queued: the lanes on which the send waited behind another send at
	// least (a 429 to it says something of the rate it was paced at).
	queued laneMask
}

// take gives a send of e's key its slot at now (OpTake), with the news
// kept for the next take, if the wait for it is shorter than within. A
// Result that has not Took took nothing: the wait does not fit, a refusing
// hold is in the way (w is then what is left of it), or the key's circuit
// refuses it (Unavailable). Probe: the send is the circuit's probe.
func (c *Cooldown) take(ctx context.Context, e *watchedKey, now time.Time, costs [numLanes]float64, within time.Duration, retry bool) (w time.Duration, tk ticket, res store.Result) {
	// now is the Cooldown's clock at the take: a slot's due time is on it.
	e.mu.Lock()
	ops := append(e.takePending(now), store.Op{Kind: store.OpTake, Costs: costs[:], Within: within, Retry: retry, Circuit: c.circuit != nil})
	e.mu.Unlock()
	c.apply(ctx, e, ops, func(st *store.State, local bool) {
		res = st.Result
		if res.Took {
			tk = ticketOf(st, now, costs, retry, local)
		}
	})
	return res.Wait, tk, res
}

// ticketOf is the ticket of a send slotted at now (on the Cooldown's
// clock) by a take whose reply is st (on the clock of whoever gave it).
func ticketOf(st *store.State, now time.Time, costs [numLanes]float64, retry, local bool) ticket {
	tk := ticket{costs: costs, retry: retry, local: local}
	for l := range numLanes {
		s := st.Lane(l)
		if costs[l] <= 0 || s.Per <= 0 {
			continue
		}
		tk.charged |= 1 << l
		tk.mark[l], tk.shiftAt[l], tk.pushedAt[l], tk.movedAt[l] = s.Next, s.Shift, s.Pushed, s.Moved
		if retry || local {
			// A retry goes before the sends waiting, so the schedule's end
			// after it counts sends the provider has not seen when it
			// answers: its count may only move the schedule later. A slot
			// of the process's own state has no mark the Store knows.
			tk.mark[l] = time.Time{}
		}
		tk.charge[l], tk.gen[l] = s.Charge(costs[l]), pace.DecodeRates(s.Rates).Generation
		due := st.Wait
		if !retry {
			ready := addNs(s.Next, math.Min(tk.charge[l], s.Burst)-s.Burst-tk.charge[l])
			due = min(max(ready.Sub(st.Now), 0), st.Wait)
		}
		tk.due[l], tk.perAt[l] = now.Add(due), s.Scaled
		tk.queued |= laneMask(boolBit(due >= durNs(tk.charge[l]))) << l
	}
	return tk
}

// giveBack gives back the slot of tk, whose send did not go: after the
// caller's context ended too, so it does not end the Store's op.
func (c *Cooldown) giveBack(ctx context.Context, e *watchedKey, tk ticket) {
	var ops []store.Op
	for l := range numLanes {
		if tk.charged.Has(l) && !tk.mark[l].IsZero() {
			ops = append(ops, store.Op{Kind: store.OpUntake, Lane: l, Mark: tk.mark[l], Charge: tk.charge[l]})
		}
	}
	if len(ops) > 0 {
		c.apply(context.WithoutCancel(ctx), e, ops, nil)
	}
}

// heldByProvider reports whether a hold of a lane tk counts against is in the wait
// from now (the provider's word, logged as such: R17).
func (e *watchedKey) heldByProvider(now time.Time, tk *ticket) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for l := range numLanes {
		if tk.costs[l] > 0 && e.st.Lane(l).Until.After(now) {
			return true
		}
	}
	return false
}

// leftToWait is what a send holding tk must still wait at now: the rest of a hold
// armed since it took its slot, and of its slot on each lane, moved on by
// the holds and the retries let in before it since, and scaled to the
// lane's rate if it changed since; fromHold when a hold is in it. tk is
// brought up to date.
func (e *watchedKey) leftToWait(now time.Time, tk *ticket) (w time.Duration, fromHold bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for l := range numLanes {
		if tk.costs[l] <= 0 {
			continue
		}
		s := e.st.Lane(l)
		if hold := s.Until.Sub(now); hold > 0 {
			w, fromHold = max(w, hold), true
		}
		if !tk.charged.Has(l) {
			continue
		}
		moved := s.Shift - tk.shiftAt[l]
		fromHold = fromHold || moved > 0
		if !tk.retry {
			moved += s.Pushed - tk.pushedAt[l]
		}
		due := e.scaledDue(l, now, tk).Add(moved)
		tk.due[l], tk.perAt[l], tk.shiftAt[l], tk.pushedAt[l] = due, s.Scaled, s.Shift, s.Pushed
		w = max(w, due.Sub(now))
	}
	return w, fromHold
}

// scaledDue is tk's due on lane l scaled to the lane's rate, if it changed
// since: what was left of it when the schedule was scaled (scaledAt) is
// stretched or shrunk as the schedule's end was (store.Apply's OpRates),
// before the holds and retries since move it on. Scaled from now instead, a
// send that slept to its slot through a slower rate went at the old one
// (the start's queue, slotted at a guess, went at twice the rate of the cut
// that came while it slept, every other send refused). e.mu is held.
func (e *watchedKey) scaledDue(l laneID, now time.Time, tk *ticket) time.Time {
	due, scaled := tk.due[l], e.st.Lane(l).Scaled
	if scaled == tk.perAt[l] || tk.perAt[l] <= 0 {
		return due
	}
	at := e.scaledAt[l]
	if at.IsZero() || at.After(now) {
		at = now
	}
	if !due.After(at) {
		return due
	}
	return addNs(at, float64(due.Sub(at))*scaled/tk.perAt[l])
}

// noteScaled keeps when each lane's schedule was scaled to a new rate: the
// lanes of st whose Scaled differs from e's state's, at now. e.mu is held.
func (e *watchedKey) noteScaled(st *store.Record, now time.Time) {
	for l := range numLanes {
		if st.Lane(l).Scaled != e.st.Lane(l).Scaled {
			e.scaledAt[l] = now
		}
	}
}

// woken is what wakes the sends of e's key waiting for their slots: closed
// when a lane's rate grows enough that the schedule was scaled to it, so
// that they go sooner (StoreLane.setRates).
func (e *watchedKey) woken() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.wake == nil {
		e.wake = make(chan struct{})
	}
	return e.wake
}

// adopt makes st e's state when it is as new as e's (by its Seq), and
// wakes the sends waiting if a lane's schedule was scaled to a faster
// rate. e.mu is held.
func (e *watchedKey) adopt(st store.State) {
	if st.Seq < e.st.Seq {
		return
	}
	e.noteScaled(&st.Record, st.Now) // (st.Now: the Cooldown's clock, onClock)
	faster := false
	for l := range numLanes {
		if old := e.st.Lane(l).Scaled; st.Lane(l).Scaled < old && old > 0 {
			faster = true
		}
	}
	e.st = st
	if faster {
		e.wakeAll()
	}
}

// wakeAll wakes the sends of e's key waiting for their slots. e.mu is held.
func (e *watchedKey) wakeAll() {
	if e.wake != nil {
		close(e.wake)
		e.wake = nil
	}
}

// countsTokens reports whether a token lane of e's key is paced or held at
// now: a call then needs its cost in tokens (R23; else it is not estimated).
func (e *watchedKey) countsTokens(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for l := laneTokens; l < numLanes; l++ {
		if s := e.st.Lane(l); s.Per > 0 || s.Until.After(now) {
			return true
		}
	}
	return false
}

func boolBit(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
