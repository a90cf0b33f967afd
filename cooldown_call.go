package retryhttp

import (
	"net/http"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/retryhttp/retryhttp/store"
)

// The call's side of the Cooldown (R17, R23, R25), all in one place: the
// wait for the send's slot before a try, what the answer tells the
// Cooldown after it, and what a retry's decision reads of it. The loop
// meets the Cooldown's engine only through the try's Pass (internal/cooldown).

// waitForCooldown waits, before every try, for what the Cooldown imposes
// on the call's key: the send's slot, then what came up while it waited (a
// hold armed by another call's 429 or a pause after a cut, and a slot more
// for each retry let in before it). The first try that RoundTrip made was
// sent when the key was not watched, so it was not held. Each wait is a
// wait like any other: it must fit (R7), is no longer than the longest
// wait (WithMaxWait), and is charged to the Budget (R8) before it starts,
// and the caller's context ends it. An error ends the call: a wait that
// does not fit sends nothing.
func (c *call) waitForCooldown() error {
	cd := c.cfg.cooldown
	if cd == nil {
		return nil
	}
	r := &c.cur
	r.pass = cd.eng.Pass(c.keyState(c.send.Body))
	if !r.pass.Watched() || r.try == 1 && c.hasFirst {
		return nil
	}
	err := c.takeSlot()
	if err != nil {
		closeBody(c.send.Body) // R1: the caller's body, or a retry's fresh one, is closed unsent
		r.pass.End(c.ctx)      // a probe that sent nothing: the next try probes
	}
	return err
}

// takeSlot asks the Pass for the send's slot, and waits for it.
func (c *call) takeSlot() error {
	r := &c.cur
	left, untilDeadline := c.left()
	o := cooldown.Order{Retry: r.try > 1, Priority: int8(c.priority())}
	if left < maxDuration {
		o.Left = max(left, time.Nanosecond) // a call with no time left still has an end
	}
	v, w := r.pass.Enter(c.ctx, c.costs(), min(left, c.cfg.maxWait, store.MaxAhead), o)
	switch {
	case v == cooldown.Down:
		return c.unavailable()
	case v == cooldown.Held:
		return c.cannotWait(w)
	case w > 0 && c.budget != nil && !c.budget.reserve(w, untilDeadline):
		r.pass.GiveBack(c.ctx)
		return c.cannotWait(w)
	}
	return c.waitSlot(w)
}

// waitSlot waits w for the send's slot, and what comes up while it waits:
// a hold armed meanwhile, a slot more per retry let in before it, and the
// key's circuit opening (the send is then refused: a provider known to be
// down is sent nothing, R25).
func (c *call) waitSlot(w time.Duration) error {
	r := &c.cur
	fromHold := r.pass.HeldByProvider()
	for {
		if err := c.sleepHeld(w, fromHold); err != nil {
			r.pass.GiveBack(c.ctx)
			return err
		}
		// The hold only moves forward and retries are let in one at a
		// time, each round waiting all of what it found: this ends.
		var down bool
		if w, fromHold, down = r.pass.Next(); down {
			r.pass.GiveBack(c.ctx)
			return c.unavailable()
		}
		if w == 0 {
			return nil
		}
		left, untilDeadline := c.left()
		if w >= min(left, c.cfg.maxWait) || c.budget != nil && !c.budget.reserve(w, untilDeadline) {
			r.pass.GiveBack(c.ctx)
			return c.cannotWait(w)
		}
	}
}

// costs is what the call costs on each lane of its key (R23): estimated
// once, and only when a token lane of the key is paced or held.
func (c *call) costs() cooldown.Costs {
	if !c.hasCosts && c.cur.pass.CountsTokens() {
		c.cost, c.hasCosts = callCosts(c.req), true
	}
	if !c.hasCosts {
		return cooldown.Costs{1}
	}
	return c.cost
}

// allCosts is the call's costs, estimated if they are not yet: an answer
// that says something of a token lane needs them.
func (c *call) allCosts() cooldown.Costs {
	if !c.hasCosts {
		c.cost, c.hasCosts = callCosts(c.req), true
	}
	return c.cost
}

// unavailable ends a call the circuit refuses (R25): sending nothing,
// sleeping nothing, charged nothing, and logging nothing (a refused call is
// not worth a line; the circuit's opening was one). A retry refused ends as
// when its retries run out: it writes the give-up entry of R14 and keeps
// the last try's error as its cause (or hands back its last response,
// drained whole).
func (c *call) unavailable() error {
	cause := error(ErrUnavailable)
	if c.cur.try > 1 {
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

// cannotWait ends a call whose wait for the Cooldown does not fit: the
// provider asked for more than the call can give, and nothing is sent
// (R17).
func (c *call) cannotWait(w time.Duration) error {
	c.p.retryAfter = w
	logGiveUp(c.cfg, c.req, c.logKey(), OutOfTime, c.p.tries, c.p.waited, c.p.status, ErrRateLimited)
	return c.noted(c.p.fail(OutOfTime, ErrRateLimited))
}

// sleepHeld sleeps a wait of w already fitted and charged, and logs it
// when it is the provider's word or a pace slow enough to see (R14). A
// wait the Pass ends early (a rate grown, the circuit opened) gives back
// to the Budget what it did not wait.
func (c *call) sleepHeld(w time.Duration, fromHold bool) error {
	if w == 0 {
		return nil
	}
	if fromHold || w >= time.Second {
		logHold(c.cfg, c.req, c.logKey(), w, fromHold, c.priority())
	}
	unused, ok := c.sleepOr(w, c.cur.pass.Woken())
	c.p.waited += w - unused
	if c.budget != nil {
		c.budget.refund(unused)
	}
	if !ok {
		logGiveUp(c.cfg, c.req, c.logKey(), Canceled, c.p.tries, c.p.waited, c.p.status, c.ctx.Err())
		return c.p.fail(Canceled, c.ctx.Err())
	}
	c.cur.held += w - unused
	return nil
}

// tellCooldown tells the Cooldown what the try said (R17, R18, R23, R25):
// a failed try always, any answer of a watched key. A success of a key
// nobody watches is not read (R16); a try in free flow that arms nothing
// takes no lock. A key function that panics has the try's response closed
// first (R15's rule for an Observer).
func (c *call) tellCooldown() {
	cd := c.cfg.cooldown
	if cd == nil {
		return
	}
	r := &c.cur
	circuit := cd.eng.HasCircuit() && (r.class == Transient || r.pass.Watched() && r.resp != nil || r.pass.Probing())
	paces := r.resp != nil && (r.pass.Watched() || r.class != Permanent || r.status >= 400 || signal.StatesLimits(r.resp.Header))
	if !circuit && !paces {
		return // a success of a key nobody watches, that states no limit: not read (R16, R27)
	}
	defer func() {
		if v := recover(); v != nil {
			c.release() // (an io.Closer holding c would move every call to the heap)
			panic(v)
		}
	}()
	a := c.answer()
	r.pass.Hear(c.ctx, &a, paces, c.allCosts, func() string { return c.keyOf(nil) })
}

// answer is what the try says for a Cooldown: what its response says of
// the pace (its ask, its counts, an exhausted limit's reset, the limit its
// error body names), and what it says to the circuit.
func (c *call) answer() cooldown.Answer {
	r := &c.cur
	a := cooldown.Answer{Body: r.limits, TooLarge: r.tooLarge}
	switch {
	case c.ctx.Err() != nil: // the caller's own cancel: no news
	case r.class == Transient:
		a.Circuit = cooldown.Failure
	case r.resp != nil:
		a.Circuit = cooldown.SignOfLife
	}
	if resp := r.resp; resp != nil {
		a.Limited = resp.StatusCode == http.StatusTooManyRequests || r.class == Throttled
		a.OK = resp.StatusCode < 400
		if r.class != Permanent && r.hasAsk {
			a.Ask, a.HasAsk = r.ask, true
			a.AskRes = askResolution(resp.Header, r.inBody)
		}
		a.Reset, a.ResetRes, a.HasReset = signal.LaneResets(resp.Header, r.now)
		a.Counts = signal.LaneCounts(resp.Header, r.now)
	}
	return a
}

// askResolution is how much shorter than it says the server's ask may truly
// be: an ask in a body (a protobuf duration) is exact, retry-after-ms and a
// decimal Retry-After are good to the millisecond, and whole seconds or an
// HTTP-date to the second.
func askResolution(h http.Header, inBody bool) time.Duration {
	switch {
	case inBody:
		return 0
	case h.Get("Retry-After-Ms") != "":
		return time.Millisecond
	case strings.Contains(h.Get("Retry-After"), "."):
		return time.Millisecond
	}
	return time.Second
}

// logKey is the call's Cooldown key as its log entries carry it, when it
// was made and says more than the url: a model (KeyByModel), or a caller's
// key, hashed. "" otherwise: the default key is the url's scheme://host.
func (c *call) logKey() string {
	cd := c.cfg.cooldown
	if cd == nil || cd.key == nil || !c.key.made || c.key.key == "" {
		return ""
	}
	return cd.eng.LogKey(c.key.key)
}
