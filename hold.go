package retryhttp

import (
	"time"
)

// The call's side of the Cooldown (R17), all in one place: the hold and the
// slot before a try, what the answer tells the Cooldown after it, and the
// hold a retry's wait must cover. The loop meets the Cooldown only through
// hold, settle and cooldownLeft.

// hold waits, before every try, for what the Cooldown imposes on the call's
// key: the send's slot, then what came up while it waited (a hold armed by
// another call's 429 or a pause after a cut, and a slot more for each retry
// let in before it). The first try that RoundTrip made was sent when the
// key was not watched, so it was not held. Each wait is a wait like any
// other: it must fit (R7) and is charged to the Budget (R8) before it
// starts, and the caller's context ends it. An error ends the call: a wait
// that does not fit sends nothing.
func (c *call) hold() error {
	cd := c.cfg.cooldown
	if cd == nil {
		return nil
	}
	r := &c.r
	if r.entry = cd.find(c.req); r.entry == nil || r.try == 1 && c.hasFirst {
		return nil
	}
	err := c.holdSlot()
	if err != nil {
		closeBody(c.send.Body) // R1: the caller's body, or a retry's fresh one, is closed unsent
	}
	return err
}

func (c *call) holdSlot() error {
	r := &c.r
	r.slotted = c.cfg.clock.Now()
	left, untilDeadline := c.left()
	charge := func(w time.Duration) bool { return c.budget == nil || c.budget.reserve(w, untilDeadline) }
	w, fromHold, tk, ok := r.entry.reserve(r.slotted, r.try > 1, left, charge)
	if !ok {
		return c.holdTooLong(w)
	}
	for {
		if err := c.holdFor(w, fromHold); err != nil {
			r.entry.release(tk)
			return err
		}
		// The hold only moves forward and retries are let in one at a
		// time, each round waiting all of what it found: this ends.
		now := c.cfg.clock.Now()
		if w, fromHold, tk = r.entry.more(now, tk); w == 0 {
			r.sent = now
			return nil
		}
		left, untilDeadline := c.left()
		if w >= left || c.budget != nil && !c.budget.reserve(w, untilDeadline) {
			r.entry.release(tk)
			return c.holdTooLong(w)
		}
	}
}

// holdTooLong ends a call whose hold does not fit: the provider asked for
// more than the call can give, and nothing is sent (R17).
func (c *call) holdTooLong(w time.Duration) error {
	c.p.retryAfter = w
	logGiveUp(c.cfg.logger, c.req, OutOfTime, c.p.tries, c.p.waited, c.p.status, ErrRateLimited)
	return c.rateLimited(c.p.fail(OutOfTime, ErrRateLimited))
}

// holdFor sleeps a wait of w already fitted and charged, and logs it when
// it is the provider's word or a pace slow enough to see (R14).
func (c *call) holdFor(w time.Duration, fromHold bool) error {
	if w == 0 {
		return nil
	}
	if fromHold || w >= time.Second {
		logHold(c.cfg.logger, c.req, w)
	}
	unused, ok := c.sleep(w)
	c.p.waited += w - unused
	if !ok {
		if c.budget != nil {
			c.budget.refund(unused)
		}
		logGiveUp(c.cfg.logger, c.req, Canceled, c.p.tries, c.p.waited, c.p.status, c.ctx.Err())
		return c.p.fail(Canceled, c.ctx.Err())
	}
	c.r.held += w
	return nil
}

// settle tells the Cooldown what the try said (R17, R18): a failed try
// always, any answer of a watched key. A success of a key nobody watches is
// not read (R16); a try in free flow that arms nothing takes no lock.
func (c *call) settle() {
	cd := c.cfg.cooldown
	r := &c.r
	if cd == nil || r.resp == nil || r.entry == nil && r.class == Permanent && r.status < 400 {
		return
	}
	h := heardOf(r.resp, r.class, r.ask, r.hasAsk, r.inBody, r.now)
	h.slotted, h.sent = r.slotted, r.sent
	cd.hear(c.req, r.entry, r.now, h)
	if r.entry == nil {
		r.entry = cd.find(c.req) // this answer may have armed the key
	}
}

// cooldownLeft is what remains of the key's hold, for the wait before a
// retry (R17): a retry never goes out before the hold ends. 0 when none.
func (c *call) cooldownLeft() time.Duration {
	if c.r.entry == nil {
		return 0
	}
	return c.r.entry.holdLeft(c.cfg.clock.Now())
}
