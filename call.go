package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/internal/signal"
)

// A call is one RoundTrip that left the happy path (R16): what lives from
// its first try to its last. roundTrip makes it on its own stack, and one
// goroutine runs it. Each step of the loop is a method, in the order run
// calls them, and the rules each one applies are cited where it applies them.
type call struct {
	t          *Transport
	cfg        *config
	req        *http.Request   // the caller's: classified (R2), logged, never modified (R1)
	send       *http.Request   // what the next try sends: req itself first (R1), else a clone
	ctx        context.Context // req's; every wait ends with it
	budget     *Budget         // the request's (R8); nil when none
	replayable bool            // the body can be sent again (R10)
	number     uint64          // Attempt.Call; 0 without an Observer
	first      tried           // the first try, when RoundTrip already made it (hasFirst)
	hasFirst   bool
	p          progress       // what an *Error reports
	last       *http.Response // the last try's response, drained whole, while a retry may be refused (R25)
	lastBody   []byte
	redacted   string         // scheme://host/path for the Observer, made once
	cur        tryState       // the try under way
	cost       cooldown.Costs // what the call costs on each lane of a Cooldown (R23), when hasCosts
	hasCosts   bool
	key        callKey  // the call's Cooldown key, once made (R17: its key function runs once)
	prio       Priority // the call's (R27), once read: hasPrio
	hasPrio    bool
}

// priority is the call's Priority (R27), read from its context once.
func (c *call) priority() Priority {
	if !c.hasPrio {
		c.prio, c.hasPrio = priorityOf(c.ctx, c.budget != nil), true
	}
	return c.prio
}

// tryState is one try: what it was sent after, what came back, what the
// provider said about it, and what was decided. run starts each try with a
// fresh one, so nothing of a try leaks into the next.
type tryState struct {
	try      int           // 1 for the first try
	pass     cooldown.Pass // the try's way through the Cooldown (R17, R25): its key's state, its slot
	held     time.Duration // waited for the Cooldown just before this try
	limits   signal.Lanes  // the limit a 429's error body names (R23)
	tooLarge bool          // OpenAI's "Request too large": the call's own mistake, not the provider's limit
	resp     *http.Response
	err      error
	class    Class
	elapsed  time.Duration // until headers or error, for the Observer
	status   int           // of resp; 0 without one
	now      time.Time     // when resp was heard; zero when nothing needed it
	ask      time.Duration // the server's: Retry-After, retry-after-ms or a body's retryDelay
	hasAsk   bool
	inBody   bool          // the ask came from the body (R19)
	quotaOK  bool          // the Quota allows a retry (R12)
	d        decision      // what the transport does next
	body     io.ReadCloser // the next try's body (R10)
	safeErr  error         // err with no secret of req in its text (R14)
	// R26, with WithStreamRetry: when the try was sent, when its stream's
	// first token came after that, and the error event its stream began with.
	started    time.Time
	firstToken time.Duration
	stream     signal.StreamVerdict
}

// run is the retry loop. It reads as the rules do: wait for the Cooldown,
// try, hear, decide, report, then stop, or wait and rewind for the next
// try. The try's response is kept in its state: stop hands it back, wait
// drains it, and release closes it if the Observer panics.
func (c *call) run() (*http.Response, error) {
	for try := 1; ; try++ {
		c.cur = tryState{try: try}
		if err := c.waitForCooldown(); err != nil {
			if errors.Is(err, errHandBack) {
				return c.handBack(), nil
			}
			return nil, err
		}
		c.cur.resp, c.cur.err = c.try()
		c.hear()
		c.decide()
		c.report()
		if c.cur.d.outcome != Retrying {
			return c.stop()
		}
		if err := c.wait(); err != nil {
			return nil, err
		}
		c.rewind()
	}
}

// try sends the request once, or takes the first try that RoundTrip already
// made (R16), and returns what came back: exactly one of a response and an
// error.
func (c *call) try() (*http.Response, error) {
	c.p.tries = c.cur.try
	if c.cur.try == 1 && c.hasFirst {
		c.cur.started = c.first.sent
		return checkResult(c.first.resp, c.first.err)
	}
	if c.cfg.observe == nil && !c.cfg.streamRetry {
		return c.t.send(c.send, c.cur.try > 1) // Elapsed is the Observer's, the send R26's: no clock read without them
	}
	c.cur.started = c.cfg.clock.Now()
	resp, err := c.t.send(c.send, c.cur.try > 1)
	c.cur.elapsed = c.cfg.clock.Since(c.cur.started)
	return resp, err
}

// hear makes out what the try says. It is classified with the caller's
// request (R2): the Classifier sees what the caller sent, not our clone.
// With WithStreamRetry, a response to hand back that is an event stream is
// read ahead to its first token, which may fail the try (R26). Then what
// the provider says is read (R5, R18, R19): its ask, and, for a Cooldown,
// its rate-limit headers. A response that is not retried anyway is not
// read: its body is the caller's. Every try counts against the Quota
// (R12).
func (c *call) hear() {
	r := &c.cur
	r.class = c.cfg.classify(c.req, r.resp, r.err)
	if r.class == Permanent && r.resp != nil && c.cfg.streamRetry {
		c.readStream()
	}
	if r.resp != nil {
		r.status = r.resp.StatusCode
		c.p.status = r.status
		if r.class != Permanent || c.cfg.cooldown != nil {
			r.now = c.cfg.clock.Now()
		}
		if r.class != Permanent {
			c.readAsk()
		}
	}
	r.quotaOK = c.cfg.quota == nil || c.cfg.quota.record(r.class)
	c.tellCooldownOfStream()
}

// readAsk reads how long the provider asks the client to wait: Retry-After
// or retry-after-ms (R5), or the retryDelay of an error (errorHint) when no
// header asks for more (R19): as long as the header's, the error's is the
// ask, exact where a whole-second header may mean less (R17). Two errors
// make the try Permanent, handed back as they are, even with a Budget: one
// that says the quota is spent (not "busy, try again in a minute"), and a
// 504 whose Google error says DEADLINE_EXCEEDED (the request overran
// Google's own deadline: Google's word is to raise the timeout, and sent
// again unchanged it spends another; a gateway's 504 says nothing of the
// kind and is still retried).
func (c *call) readAsk() {
	r := &c.cur
	r.ask, r.hasAsk = ParseRetryAfter(r.resp.Header, r.now)
	if hint, status, ok := c.errorHint(); ok {
		r.limits, r.tooLarge = hint.Limits, hint.TooLarge
		if hint.Exhausted || hint.DeadlineExceeded && status == http.StatusGatewayTimeout {
			r.class = Permanent
		} else if hint.RetryAfter > 0 && (!r.hasAsk || hint.RetryAfter >= r.ask) {
			r.ask, r.hasAsk, r.inBody = hint.RetryAfter, true, true
		}
	}
	if r.hasAsk && r.class != Permanent {
		c.p.retryAfter = r.ask
	}
}

// errorHint reads the provider's error, and the status it came with: a
// stream's error event (R26), or a JSON error body (R19). The body is
// read ahead, at most bodyTimeout, and takes the body's place: parsed
// here, drained by a wait, or handed back whole with the response. ok is
// false when there is no error to read.
func (c *call) errorHint() (hint signal.Hint, status int, ok bool) {
	r := &c.cur
	if r.stream.Kind == signal.StreamError {
		return signal.ErrorBody(r.stream.Payload), r.stream.Status, true
	}
	if !isJSON(r.resp.Header) || r.resp.ContentLength > maxDrain {
		return hint, 0, false
	}
	ahead := startReadAhead(r.resp.Body, true, c.sentTry())
	r.resp.Body = ahead
	ahead.wait(c.ctx, bodyTimeout)
	return signal.ErrorBody(errorBody(r.resp.Header, ahead.bytes())), r.status, true
}

// decide applies the policy (R9: the first reason to stop wins) to the try.
// What only a wait needs (a backoff drawn, the cooldown, the deadline) is
// read only when a retry is still possible. A wait the Budget cannot reserve
// (R8: a concurrent call took what was left) or a body that cannot be had
// again (R10) is decided again with that known, so the Observer is told
// what is really done.
func (c *call) decide() {
	r := &c.cur
	s := situation{
		class: r.class, try: r.try, maxRetries: c.cfg.maxRetries, replayable: c.replayable, quotaOK: r.quotaOK,
		ask: r.ask, hasAsk: r.hasAsk, left: maxDuration, budget: c.budget != nil, maxWait: c.cfg.maxWait,
	}
	var untilDeadline time.Duration
	if r.class != Permanent && r.try <= c.cfg.maxRetries && c.replayable && r.quotaOK {
		s.backoff = c.cfg.backoff.Delay(r.try, rand.Float64())
		if c.cfg.cooldown != nil {
			s.cooldown = r.pass.HoldLeft(c.costs())
			s.down = r.pass.Refuses()
		}
		s.left, untilDeadline = c.left()
	}
	d := decide(s)
	if d.outcome == Retrying && c.budget != nil && !c.budget.reserve(d.wait, untilDeadline) {
		s.left = d.wait
		d = decide(s)
	}
	if d.outcome == Retrying {
		var ok bool
		if r.body, ok = rewindBody(c.req); !ok {
			if c.budget != nil {
				c.budget.refund(d.wait)
			}
			s.replayable = false
			d = decide(s)
		}
	}
	r.d = d
}

// report tells the Observer of the try (R15). What the library writes about
// a try, here and in the logs that follow, never holds a secret (R14).
func (c *call) report() {
	r := &c.cur
	if r.err != nil {
		r.safeErr = scrub(r.err, c.req)
	}
	c.p.lastErr = r.safeErr
	if c.cfg.observe == nil {
		return
	}
	if c.redacted == "" {
		c.redacted = safeURL(c.req.URL)
	}
	c.observe(Attempt{
		Call: c.number, Try: r.try, MaxTries: maxTries(c.cfg.maxRetries),
		Method: c.req.Method, URL: c.redacted,
		Status: r.status, Err: r.safeErr, Class: r.class,
		Elapsed: r.elapsed, Wait: r.d.wait, From: r.d.from, Outcome: r.d.outcome, Held: r.held,
		FirstToken: r.firstToken, StreamError: r.streamError(), Priority: c.priority(),
	})
}

// observe calls the Observer. If it panics, what the try holds is released
// before the panic goes on up: an Observer that panics leaks nothing (R15).
func (c *call) observe(a Attempt) {
	defer func() {
		if v := recover(); v != nil {
			c.release()
			panic(v)
		}
	}()
	c.cfg.observe(c.ctx, a)
}

// release closes the try's response and the next try's body, and gives
// back the wait the Budget reserved for it (R8).
func (c *call) release() {
	r := &c.cur
	if r.resp != nil {
		_ = r.resp.Body.Close()
	}
	closeBody(r.body)
	if r.d.outcome == Retrying && c.budget != nil {
		c.budget.refund(r.d.wait)
	}
}

// stop ends the call after a try that is not retried. A Permanent try is
// returned as it is: the body is the caller's now (R6), and a first try's
// error unchanged (R9). Any other end is logged (R14); with a Budget, a rate
// limit fails fast with ErrRateLimited (R8); else the last response is
// handed back untouched, or the last error as an *Error (R9).
func (c *call) stop() (*http.Response, error) {
	r := &c.cur
	if r.d.outcome == Done {
		if r.err == nil || r.try == 1 {
			return r.resp, r.err
		}
		return nil, c.p.fail(Done, r.safeErr)
	}
	logGiveUpAfter(c.cfg, c.req, c.logKey(), r.d.outcome, r.try, c.p.waited, r.status, r.streamError(), askOf(r.hasAsk, r.inBody), r.safeErr)
	if r.d.rateLimited {
		if r.resp != nil {
			discard(c.ctx, r.resp, bodyTimeout, c.sentTry()) // no wait follows (R10)
		}
		return nil, c.noted(c.p.fail(r.d.outcome, ErrRateLimited))
	}
	if r.err != nil {
		return nil, c.noted(c.p.fail(r.d.outcome, r.safeErr))
	}
	return r.resp, nil
}

// wait logs the retry (R14) and waits the decided time on the clock,
// draining the failed body meanwhile (R10). The wait runs from the
// response; the drain overlaps it, and is abandoned when it ends or after
// bodyTimeout, whichever comes first. A wait shorter than reuseGrace (a zero
// backoff) gives the drain reuseGrace all the same: an error page that is a
// moment from whole keeps its connection, which costs a provider's TLS
// handshake far more than a millisecond to redo. A caller's context that
// ends first ends the call, and the Budget gets back what was not waited.
func (c *call) wait() error {
	r := &c.cur
	logRetry(c.cfg.logger, c.req, c.logKey(), r.try, c.cfg.maxRetries, r.status, r.streamError(), r.d.wait, r.d.from, askOf(r.hasAsk, r.inBody), r.safeErr)
	var unused time.Duration
	ok := true
	c.last, c.lastBody = nil, nil
	if r.resp != nil {
		clk := c.cfg.clock
		// With a circuit, the retry may yet be refused (R25), and then this
		// response is handed back: its bytes are kept, when they come whole.
		keep := c.cfg.cooldown != nil && c.cfg.cooldown.eng.HasCircuit()
		whole := drain(c.ctx, r.resp, min(max(r.d.wait-clk.Since(r.now), reuseGrace), bodyTimeout), c.sentTry(), keep)
		if whole != nil {
			c.last, c.lastBody = r.resp, whole
		}
		spent := min(clk.Since(r.now), r.d.wait)
		if c.ctx.Err() != nil {
			unused, ok = max(r.d.wait-spent, 0), false
		} else {
			unused, ok = c.sleep(r.d.wait - spent)
		}
	} else {
		unused, ok = c.sleep(r.d.wait)
	}
	if !ok {
		if c.budget != nil {
			c.budget.refund(unused)
		}
		c.p.waited += r.d.wait - unused
		closeBody(r.body)
		logGiveUpAfter(c.cfg, c.req, c.logKey(), Canceled, r.try, c.p.waited, r.status, r.streamError(), askOf(r.hasAsk, r.inBody), c.ctx.Err())
		return c.p.fail(Canceled, c.ctx.Err())
	}
	c.p.waited += r.d.wait
	return nil
}

// errHandBack is what hold returns when a retry the circuit refuses ends
// the call with its last response (unavailable).
var errHandBack = errors.New("retryhttp: hand back the last response")

// handBack returns the last try's response, its body the bytes drained
// from it, as when the call's retries run out (R25).
func (c *call) handBack() *http.Response {
	resp := c.last
	resp.Body = io.NopCloser(bytes.NewReader(c.lastBody))
	return resp
}

// rewind makes the next try's request: every retry is a clone with a fresh
// body (R1, R10), and a context that tells the base how many tries went
// before it (R21).
func (c *call) rewind() {
	next := c.send.Clone(context.WithValue(c.ctx, resendKey{}, c.cur.try))
	if c.cur.body != nil {
		next.Body = c.cur.body
	}
	c.send = next
}

// sentTry is the try under way, as the request it sent and the base it went
// to: a first try's body is ended through them when it is abandoned (R10).
func (c *call) sentTry() sentTry { return sentTry{req: c.send, base: c.t.base} }

// noted lets the call's Budget remember e when it says "busy" or "down"
// (R20): its cause is ErrRateLimited (R8), or its Reason Unavailable (R25).
func (c *call) noted(e *Error) *Error {
	if c.budget != nil && (e.Reason == Unavailable || errors.Is(e.Err, ErrRateLimited)) {
		c.budget.noteErr(e)
	}
	return e
}

// progress is what a call has come to so far, for the *Error that ends it (R9).
type progress struct {
	lastErr    error         // the last try's, as written (R14); nil after a response
	tries      int           // sent
	waited     time.Duration // charged, less what was given back
	status     int           // of the last response received
	retryAfter time.Duration // the last ask of the server
}

func (f *progress) fail(reason Outcome, cause error) *Error {
	return &Error{Tries: f.tries, Waited: f.waited, Status: f.status, RetryAfter: f.retryAfter, Reason: reason, Err: cause}
}

// maxTries is 1 + maxRetries, saturated: WithMaxRetries(math.MaxInt) is
// "no limit", not a negative count (R3).
func maxTries(maxRetries int) int {
	if maxRetries == math.MaxInt {
		return math.MaxInt
	}
	return maxRetries + 1
}
