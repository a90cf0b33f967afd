package retryhttp

import (
	"net/http"
	"time"
)

// The call's side of the Cooldown (R17), all in one place: the hold before a
// try, the answer settled after it, the cooldown a retry's wait must cover,
// and the membership a call gives up when it ends. The loop meets the
// Cooldown only through hold, settle, cooldownLeft and leave.

// keyOf returns the Cooldown's key for the caller's request, made once.
func (c *call) keyOf() string {
	if !c.keyed {
		c.key, c.keyed = c.cfg.cooldown.keyOf(c.req), true
	}
	return c.key
}

// hold waits, before every try, the first included, while the Cooldown
// holds the call's key (R17): the rest of a cooldown, and the wait for a
// probe's answer. The first try that RoundTrip made was sent when no key
// was cooling, so it was not held. An error ends the call: a hold that does
// not fit sends nothing.
func (c *call) hold() error {
	cd := c.cfg.cooldown
	if cd == nil || c.r.try == 1 && c.hasFirst || cd.active.Load() == 0 || c.keyOf() == "" {
		return nil
	}
	start := c.cfg.clock.Now()
	for {
		a := cd.admit(c.key, c.cfg.clock.Now(), &c.membership)
		var err error
		switch {
		case a.hold > 0:
			err = c.holdFor(a.hold)
		case a.wake != nil:
			err = c.await(a.wake, a.grace)
		default:
			c.r.entry, c.r.held = a.entry, max(c.r.held, c.cfg.clock.Since(start))
			return nil
		}
		if err != nil {
			closeBody(c.send.Body) // R1: the caller's body, or a retry's fresh one, is closed unsent
			return err
		}
	}
}

// holdFor waits out d of a cooldown. It is a wait like any other: it must
// fit the deadline and the Budget (R7), it is charged to the Budget (R8),
// and it ends when the caller's context does. One that does not fit fails
// with ErrRateLimited: the provider asked for more than the call can give.
func (c *call) holdFor(d time.Duration) error {
	left, untilDeadline := c.left()
	if d >= left || c.budget != nil && !c.budget.reserve(d, untilDeadline) {
		c.p.retryAfter = d
		logGiveUp(c.cfg.logger, c.req, OutOfTime, c.p.tries, c.p.waited, c.p.status, ErrRateLimited)
		return c.rateLimited(c.p.fail(OutOfTime, ErrRateLimited))
	}
	logHold(c.cfg.logger, c.req, d)
	unused, ok := c.sleep(d)
	c.p.waited += d - unused
	if !ok {
		if c.budget != nil {
			c.budget.refund(unused)
		}
		logGiveUp(c.cfg.logger, c.req, Canceled, c.p.tries, c.p.waited, c.p.status, c.ctx.Err())
		return c.p.fail(Canceled, c.ctx.Err())
	}
	c.r.held += d
	return nil
}

// await waits for another call's answer to a probe (R17): until wake is
// closed, or grace has passed on the clock (then one more call goes), or the
// caller's context ends, which ends the call.
func (c *call) await(wake <-chan struct{}, grace time.Duration) error {
	late := make(chan struct{})
	timer := c.cfg.clock.AfterFunc(grace, func() { close(late) })
	ok := true
	select {
	case <-wake:
	case <-late:
	case <-c.ctx.Done():
		ok = false
	}
	timer.Stop()
	c.cfg.cooldown.unwait(c.key)
	if !ok {
		logGiveUp(c.cfg.logger, c.req, Canceled, c.p.tries, c.p.waited, c.p.status, c.ctx.Err())
		return c.p.fail(Canceled, c.ctx.Err())
	}
	return nil
}

// settle tells the Cooldown what the try said (R17, R18): the answer to the
// send it admitted, and whatever arms the key. A try in free flow that arms
// nothing takes no lock and makes no key.
func (c *call) settle() {
	cd := c.cfg.cooldown
	if cd == nil {
		return
	}
	r := &c.r
	if s := signalOf(r.resp, r.class, r.ask, r.hasAsk, r.now); r.entry != nil || !s.until.IsZero() {
		if c.keyOf() != "" {
			cd.settle(c.key, r.entry, r.now, s, &c.membership)
		}
	}
}

// cooldownLeft is what remains of the key's cooldown, for the wait before a
// retry (R17): a retry never goes out before the cooldown ends. 0 when none.
func (c *call) cooldownLeft() time.Duration {
	cd := c.cfg.cooldown
	if cd == nil || c.keyOf() == "" {
		return 0
	}
	if until := cd.Until(c.key); !until.IsZero() {
		return max(until.Sub(c.cfg.clock.Now()), 0)
	}
	return 0
}

// leave ends the call's membership of its key's entry, when the call ends:
// a key goes free only when the provider has room for every call in
// progress (R17).
func (c *call) leave() {
	if cd := c.cfg.cooldown; cd != nil {
		cd.leave(&c.membership)
	}
}

// signalOf is what one try tells a Cooldown (R17, R18): the server's ask on
// a failed try, an exhausted rate limit on any response.
func signalOf(resp *http.Response, class Class, ask time.Duration, hasAsk bool, now time.Time) signal {
	var s signal
	if resp == nil {
		return s
	}
	s.ok = resp.StatusCode != http.StatusTooManyRequests && class != Throttled
	if class != Permanent && hasAsk && ask > 0 {
		s.until = now.Add(ask)
	}
	if d, ok := ParseRateLimitReset(resp.Header, now); ok && d > 0 {
		if u := now.Add(d); u.After(s.until) {
			s.until = u
		}
	}
	s.remaining, s.counted = rateLimitRemaining(resp.Header)
	return s
}
