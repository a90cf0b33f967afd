package retryhttp

import (
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// The call's side of the Cooldown (R17, R23, R25), all in one place: the
// hold and the slot before a try, what the answer tells the Cooldown and
// its circuit after it, and the hold a retry's wait must cover. The loop
// meets the Cooldown only through hold, tellCooldown, down and cooldownLeft.

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
	if r.entry = c.entryOf(c.send.Body); r.entry == nil || r.try == 1 && c.hasFirst {
		return nil
	}
	err := c.holdSlot()
	if err != nil {
		closeBody(c.send.Body) // R1: the caller's body, or a retry's fresh one, is closed unsent
		if r.probe || r.ownProbe {
			cd.circuitHeard(c.ctx, r.entry, cd.now(), false, false, r.probe, r.ownProbe) // sent nothing: the next try probes
			r.probe, r.ownProbe = false, false
		}
	}
	return err
}

func (c *call) holdSlot() error {
	r, cd := &c.r, c.cfg.cooldown
	r.slotted = cd.now()
	costs := c.costs(r.entry)
	left, untilDeadline := c.left()
	within := min(left, c.cfg.maxWait, store.MaxAhead)
	r.entry.mu.Lock()
	seen, w := r.entry.seeBefore(r.slotted, &costs, within, cd.circuit != nil, cd.store != nil)
	r.entry.mu.Unlock()
	switch seen {
	case seenDown:
		return c.unavailable()
	case seenHeld:
		return c.holdTooLong(w)
	case seenFree:
		return nil
	case seenOwnProbe:
		r.ownProbe = true
	}
	w, tk, res := cd.take(c.ctx, r.entry, r.slotted, costs, within, r.try > 1)
	if r.probe = res.Probe; r.probe || r.ownProbe {
		r.entry.probeOut()
	}
	if !res.Took {
		if res.Unavailable {
			return c.unavailable()
		}
		return c.holdTooLong(w)
	}
	if w > 0 && c.budget != nil && !c.budget.reserve(w, untilDeadline) {
		cd.giveBack(c.ctx, r.entry, tk)
		return c.holdTooLong(w)
	}
	return c.waitSlot(w, tk)
}

// waitSlot waits for the slot tk, w from now, and what comes up while it
// waits: a hold armed meanwhile, a slot more per retry let in before it,
// and the key's circuit opening (the send is then refused: a provider
// known to be down is sent nothing, R25).
func (c *call) waitSlot(w time.Duration, tk ticket) error {
	r, cd := &c.r, c.cfg.cooldown
	fromHold := r.entry.heldByProvider(r.slotted, &tk)
	for {
		if err := c.holdFor(w, fromHold); err != nil {
			cd.giveBack(c.ctx, r.entry, tk)
			return err
		}
		// The hold only moves forward and retries are let in one at a
		// time, each round waiting all of what it found: this ends.
		now := cd.now()
		if !r.probe && !r.ownProbe && r.entry.refusesNow(now) {
			cd.giveBack(c.ctx, r.entry, tk)
			return c.unavailable()
		}
		if w, fromHold = r.entry.leftToWait(now, &tk); w == 0 {
			r.sent, r.tk, r.paced = now, tk, true
			return nil
		}
		left, untilDeadline := c.left()
		if w >= min(left, c.cfg.maxWait) || c.budget != nil && !c.budget.reserve(w, untilDeadline) {
			cd.giveBack(c.ctx, r.entry, tk)
			return c.holdTooLong(w)
		}
	}
}

// costs is what the call costs on each lane of e's key (R23): estimated
// once, and only when a token lane of the key is paced or held.
func (c *call) costs(e *watchedKey) [numLanes]float64 {
	if !c.hasCosts && (e == nil || e.countsTokens(c.cfg.cooldown.now())) {
		c.cost, c.hasCosts = callCosts(c.req), true
	}
	if !c.hasCosts {
		return [numLanes]float64{1}
	}
	return c.cost
}

// unavailable ends a call the circuit refuses (R25): sending nothing,
// sleeping nothing, charged nothing, and logging nothing (a refused call is
// not worth a line; the circuit's opening was one). A retry refused ends as
// when its retries run out: it writes the give-up entry of R14 and keeps
// the last try's error as its cause (or hands back its last response,
// refused).
func (c *call) unavailable() error {
	cause := error(ErrUnavailable)
	if c.r.try > 1 {
		if c.p.lastErr != nil {
			cause = c.p.lastErr
		}
		logGiveUp(c.cfg, c.req, c.logKey(), Unavailable, c.p.tries, c.p.waited, c.p.status, cause)
		if c.last != nil {
			return errHandBack
		}
	}
	return c.noted(c.p.fail(Unavailable, cause))
}

// holdTooLong ends a call whose hold does not fit: the provider asked for
// more than the call can give, and nothing is sent (R17).
func (c *call) holdTooLong(w time.Duration) error {
	c.p.retryAfter = w
	logGiveUp(c.cfg, c.req, c.logKey(), OutOfTime, c.p.tries, c.p.waited, c.p.status, ErrRateLimited)
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
		logHold(c.cfg, c.req, c.logKey(), w, fromHold)
	}
	unused, ok := c.sleepOr(w, c.r.entry.woken())
	c.p.waited += w - unused
	if c.budget != nil {
		c.budget.refund(unused)
	}
	if !ok {
		logGiveUp(c.cfg, c.req, c.logKey(), Canceled, c.p.tries, c.p.waited, c.p.status, c.ctx.Err())
		return c.p.fail(Canceled, c.ctx.Err())
	}
	c.r.held += w - unused
	return nil
}

// tellCooldown tells the Cooldown what the try said (R17, R18, R23): a failed try
// always, any answer of a watched key. A success of a key nobody watches is
// not read (R16); a try in free flow that arms nothing takes no lock. A key
// function that panics has the try's response closed first (R15's rule for
// an Observer).
func (c *call) tellCooldown() {
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
		c.tellCircuit()
	}
	if !pacing {
		return
	}
	h := heardOf(r.resp, r.class, r.ask, r.hasAsk, r.inBody, r.now)
	h.body, h.sent, h.tooLarge = r.limits, r.sent, r.tooLarge
	if r.paced {
		h.tk = &r.tk
	}
	cd.hear(c.ctx, r.entry, cd.now(), h, func() [numLanes]float64 { return c.costs(nil) }, func() string { return c.keyOf(nil) })
	if r.entry == nil {
		r.entry = c.entryOf(nil) // this answer may have armed the key
	}
}

// tellCircuit tells the key's circuit what the try said (R25): a failure
// (a try the Classifier calls Transient), a sign of life (any other
// answer), or nothing (the caller's own cancel; for a probe, its end with
// no answer). A failure arms a key nobody watched.
func (c *call) tellCircuit() {
	r, cd := &c.r, c.cfg.cooldown
	news := c.ctx.Err() == nil
	fail := news && r.class == Transient
	alive := news && r.resp != nil && r.class != Transient
	if !fail && !alive && !r.probe && !r.ownProbe {
		return
	}
	now := cd.now()
	if r.entry == nil {
		if !fail {
			return
		}
		key := c.keyOf(nil)
		if key == "" {
			return
		}
		if r.entry = cd.watch(key, now); r.entry == nil {
			return // bounded memory: this key goes without a circuit
		}
	}
	cd.circuitHeard(c.ctx, r.entry, now, fail, alive, r.probe, r.ownProbe)
	r.probe, r.ownProbe = false, false
}

// down reports whether the call's key is down, as far as the process knows
// at now (R25): a retry would be refused, so the call ends before it.
func (c *call) down() bool {
	cd, e := c.cfg.cooldown, c.r.entry
	if cd == nil || cd.circuit == nil || e == nil {
		return false
	}
	now := cd.now()
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
	now := c.cfg.cooldown.now()
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

// logKey is the call's Cooldown key as its log entries carry it, when it
// was made and says more than the url: a model (KeyByModel), or a caller's
// key, hashed (Cooldown.logKey). "" otherwise: the default key is the
// url's scheme://host.
func (c *call) logKey() string {
	cd := c.cfg.cooldown
	if cd == nil || cd.key == nil || !c.key.made || c.key.key == "" {
		return ""
	}
	return cd.logKey(c.key.key)
}
