package retryhttp

import (
	"context"
	"math"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// The call's side of the Cooldown (R17, R23), all in one place: the hold
// and the slot before a try, what the answer tells the Cooldown after it,
// and the hold a retry's wait must cover. The loop meets the Cooldown only
// through hold, settle and cooldownLeft.

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
	// (issue 29: a correction sent with one moved the fleet's schedule by
	// the clocks' skew).
	local bool
	// queued: the lanes on which the send waited behind another send at
	// least (a 429 to it says something of the rate it was paced at).
	queued laneMask
}

// hold waits, before every try, for what the Cooldown imposes on the call's
// key: the send's slot, then what came up while it waited (a hold armed by
// another call's 429 or a pause after a cut, and a slot more for each retry
// let in before it). The first try that RoundTrip made was sent when the
// key was not watched, so it was not held. Each wait is a wait like any
// other: it must fit (R7), is no longer than the longest wait (WithMaxWait),
// and is charged to the Budget (R8) before it starts, and the caller's
// context ends it. An error ends the call: a wait that does not fit sends
// nothing.
func (c *call) hold() error {
	cd := c.cfg.cooldown
	if cd == nil {
		return nil
	}
	r := &c.r
	if r.entry = cd.find(c.req, c.send.Body); r.entry == nil || r.try == 1 && c.hasFirst {
		return nil
	}
	err := c.holdSlot()
	if err != nil {
		closeBody(c.send.Body) // R1: the caller's body, or a retry's fresh one, is closed unsent
		if r.probe || r.ownProbe {
			cd.heardCircuit(c.ctx, r.entry, c.cfg.clock.Now(), false, false, r.probe, r.ownProbe) // sent nothing: the next try probes
			r.probe, r.ownProbe = false, false
		}
	}
	return err
}

func (c *call) holdSlot() error {
	r, cd := &c.r, c.cfg.cooldown
	r.slotted = c.cfg.clock.Now()
	if cd.circuit != nil {
		r.entry.mu.Lock()
		refuse, own := r.entry.admit(r.slotted, cd.store != nil)
		r.entry.mu.Unlock()
		if refuse {
			return c.unavailable()
		}
		r.ownProbe = own
	}
	left, untilDeadline := c.left()
	w, tk, res := cd.take(c.ctx, r.entry, r.slotted, c.costs(r.entry), min(left, c.cfg.maxWait, store.MaxAhead), r.try > 1)
	r.probe = res.Probe
	if !res.Took {
		if res.Unavailable {
			return c.unavailable()
		}
		return c.holdTooLong(w)
	}
	if w > 0 && c.budget != nil && !c.budget.reserve(w, untilDeadline) {
		cd.untake(c.ctx, r.entry, tk)
		return c.holdTooLong(w)
	}
	fromHold := r.entry.held(r.slotted, &tk)
	for {
		if err := c.holdFor(w, fromHold); err != nil {
			cd.untake(c.ctx, r.entry, tk)
			return err
		}
		// The hold only moves forward and retries are let in one at a
		// time, each round waiting all of what it found: this ends.
		now := c.cfg.clock.Now()
		if w, fromHold = r.entry.more(now, &tk); w == 0 {
			r.sent, r.tk, r.paced = now, tk, true
			return nil
		}
		left, untilDeadline := c.left()
		if w >= min(left, c.cfg.maxWait) || c.budget != nil && !c.budget.reserve(w, untilDeadline) {
			cd.untake(c.ctx, r.entry, tk)
			return c.holdTooLong(w)
		}
	}
}

// costs is what the call costs on each lane of e's key (R23): estimated
// once, and only when a token lane of the key is paced or held.
func (c *call) costs(e *cooling) [numLanes]float64 {
	if !c.hasCosts && (e == nil || e.countsTokens(c.cfg.clock.Now())) {
		c.cost, c.hasCosts = callCosts(c.req), true
	}
	if !c.hasCosts {
		return [numLanes]float64{1}
	}
	return c.cost
}

// unavailable ends a call the circuit refuses (R25): sending nothing,
// sleeping nothing, charged nothing, and logging nothing (a refused call is
// not worth a line; the circuit's opening was one). A retry refused keeps
// the last try's error as its cause.
func (c *call) unavailable() error {
	cause := error(ErrUnavailable)
	if c.r.try > 1 && c.p.lastErr != nil {
		cause = c.p.lastErr
	}
	return c.noted(c.p.fail(Unavailable, cause))
}

// holdTooLong ends a call whose hold does not fit: the provider asked for
// more than the call can give, and nothing is sent (R17).
func (c *call) holdTooLong(w time.Duration) error {
	c.p.retryAfter = w
	logGiveUp(c.cfg.logger, c.req, OutOfTime, c.p.tries, c.p.waited, c.p.status, ErrRateLimited)
	return c.noted(c.p.fail(OutOfTime, ErrRateLimited))
}

// holdFor sleeps a wait of w already fitted and charged, and logs it when
// it is the provider's word or a pace slow enough to see (R14). A rate that
// grows meanwhile wakes it early: what it did not wait goes back to the
// Budget, and more says what is left.
func (c *call) holdFor(w time.Duration, fromHold bool) error {
	if w == 0 {
		return nil
	}
	if fromHold || w >= time.Second {
		logHold(c.cfg.logger, c.req, w)
	}
	unused, ok := c.sleepOr(w, c.r.entry.woken())
	c.p.waited += w - unused
	if c.budget != nil {
		c.budget.refund(unused)
	}
	if !ok {
		logGiveUp(c.cfg.logger, c.req, Canceled, c.p.tries, c.p.waited, c.p.status, c.ctx.Err())
		return c.p.fail(Canceled, c.ctx.Err())
	}
	c.r.held += w - unused
	return nil
}

// settle tells the Cooldown what the try said (R17, R18, R23): a failed try
// always, any answer of a watched key. A success of a key nobody watches is
// not read (R16); a try in free flow that arms nothing takes no lock. A key
// function that panics has the try's response closed first (R15's rule for
// an Observer).
func (c *call) settle() {
	cd := c.cfg.cooldown
	if cd == nil {
		return
	}
	r := &c.r
	circuit := cd.circuit != nil && (r.probe || r.ownProbe || r.class == Transient || r.entry != nil && r.resp != nil)
	pacing := r.resp != nil && (r.entry != nil || r.class != Permanent || r.status >= 400)
	if !circuit && !pacing {
		return // a success of a key nobody watches: not read (R16)
	}
	defer func() {
		if v := recover(); v != nil {
			c.release() // (an io.Closer holding c would move every call to the heap)
			panic(v)
		}
	}()
	if circuit {
		c.settleCircuit()
	}
	if !pacing {
		return
	}
	h := heardOf(r.resp, r.class, r.ask, r.hasAsk, r.inBody, r.now)
	h.body, h.sent, h.tooLarge = r.limits, r.sent, r.tooLarge
	if r.paced {
		h.tk = &r.tk
	}
	cd.hear(c.ctx, c.req, r.entry, r.now, h, func() [numLanes]float64 { return c.costs(nil) }, nil)
	if r.entry == nil {
		r.entry = cd.find(c.req, nil) // this answer may have armed the key
	}
}

// settleCircuit tells the key's circuit what the try said (R25): a failure
// (a try the Classifier calls Transient), a sign of life (any other
// answer), or nothing (the caller's own cancel; for a probe, its end with
// no answer). A failure arms a key nobody watched.
func (c *call) settleCircuit() {
	r, cd := &c.r, c.cfg.cooldown
	news := c.ctx.Err() == nil
	fail := news && r.class == Transient
	alive := news && r.resp != nil && r.class != Transient
	if !fail && !alive && !r.probe && !r.ownProbe {
		return
	}
	now := c.cfg.clock.Now()
	if r.entry == nil {
		if !fail {
			return
		}
		key := cd.keyOf(c.req, nil)
		if key == "" {
			return
		}
		if r.entry = cd.arm(key, now); r.entry == nil {
			return // bounded memory: this key goes without a circuit
		}
	}
	cd.heardCircuit(c.ctx, r.entry, now, fail, alive, r.probe, r.ownProbe)
	r.probe, r.ownProbe = false, false
}

// down reports whether the call's key is down, as far as the process knows
// at now (R25): a retry would be refused, so the call ends before it.
func (c *call) down() bool {
	cd, e := c.cfg.cooldown, c.r.entry
	if cd == nil || cd.circuit == nil || e == nil {
		return false
	}
	now := c.cfg.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refuses(now)
}

// cooldownLeft is what remains of the hold of the key's lanes the call
// counts against, for the wait before a retry (R17): a retry never goes out
// before the hold ends. 0 when none.
func (c *call) cooldownLeft() time.Duration {
	e := c.r.entry
	if e == nil {
		return 0
	}
	now := c.cfg.clock.Now()
	costs := c.costs(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	var left time.Duration
	for l := range numLanes {
		if costs[l] > 0 {
			left = max(left, e.st.Lane(l).Until.Sub(now))
		}
	}
	return left
}

// take gives a send of e's key its slot at now (OpTake), with the news
// kept for the next take, if the wait for it is shorter than within. A
// Result that has not Took took nothing: the wait does not fit, a refusing
// hold is in the way (w is then what is left of it), or the key's circuit
// refuses it (Unavailable). Probe: the send is the circuit's probe.
func (c *Cooldown) take(ctx context.Context, e *cooling, now time.Time, costs [numLanes]float64, within time.Duration, retry bool) (w time.Duration, tk ticket, res store.Result) {
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
		tk.charge[l], tk.gen[l] = s.Charge(costs[l]), decodeRates(s.Rates).gen
		due := st.Wait
		if !retry {
			ready := addNs(s.Next, math.Min(tk.charge[l], s.Burst)-s.Burst-tk.charge[l])
			due = min(max(ready.Sub(st.Now), 0), st.Wait)
		}
		tk.due[l], tk.perAt[l] = now.Add(due), s.Scaled
		tk.queued |= laneMask(b2u(due >= durNs(tk.charge[l]))) << l
	}
	return tk
}

// untake gives back the slot of tk, whose send did not go: after the
// caller's context ended too, so it does not end the Store's op.
func (c *Cooldown) untake(ctx context.Context, e *cooling, tk ticket) {
	var ops []store.Op
	for l := range numLanes {
		if tk.charged.has(l) && !tk.mark[l].IsZero() {
			ops = append(ops, store.Op{Kind: store.OpUntake, Lane: l, Mark: tk.mark[l], Charge: tk.charge[l]})
		}
	}
	if len(ops) > 0 {
		c.apply(context.WithoutCancel(ctx), e, ops, nil)
	}
}

// held reports whether a hold of a lane tk counts against is in the wait
// from now (the provider's word, logged as such: R17).
func (e *cooling) held(now time.Time, tk *ticket) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for l := range numLanes {
		if tk.costs[l] > 0 && e.st.Lane(l).Until.After(now) {
			return true
		}
	}
	return false
}

// more is what a send holding tk must still wait at now: the rest of a hold
// armed since it took its slot, and of its slot on each lane, moved on by
// the holds and the retries let in before it since, and scaled to the
// lane's rate if it changed since; fromHold when a hold is in it. tk is
// brought up to date.
func (e *cooling) more(now time.Time, tk *ticket) (w time.Duration, fromHold bool) {
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
		if !tk.charged.has(l) {
			continue
		}
		moved := s.Shift - tk.shiftAt[l]
		fromHold = fromHold || moved > 0
		if !tk.retry {
			moved += s.Pushed - tk.pushedAt[l]
		}
		due := tk.due[l].Add(moved)
		if s.Scaled != tk.perAt[l] && tk.perAt[l] > 0 && due.After(now) {
			due = addNs(now, float64(due.Sub(now))*s.Scaled/tk.perAt[l])
		}
		tk.due[l], tk.perAt[l], tk.shiftAt[l], tk.pushedAt[l] = due, s.Scaled, s.Shift, s.Pushed
		w = max(w, due.Sub(now))
	}
	return w, fromHold
}

// woken is what wakes the sends of e's key waiting for their slots: closed
// when a lane's rate grows enough that the schedule was scaled to it, so
// that they go sooner (StoreLane.setRates).
func (e *cooling) woken() <-chan struct{} {
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
func (e *cooling) adopt(st store.State) {
	if st.Seq < e.st.Seq {
		return
	}
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
func (e *cooling) wakeAll() {
	if e.wake != nil {
		close(e.wake)
		e.wake = nil
	}
}

// countsTokens reports whether a token lane of e's key is paced or held at
// now: a call then needs its cost in tokens (R23; else it is not estimated).
func (e *cooling) countsTokens(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for l := laneTokens; l < numLanes; l++ {
		if s := e.st.Lane(l); s.Per > 0 || s.Until.After(now) {
			return true
		}
	}
	return false
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
