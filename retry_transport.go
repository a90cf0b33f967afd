package retryhttp

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"go.uber.org/zap"
)

// Transport is an http.RoundTripper that retries failed tries of a request
// over a base RoundTripper (see the package doc for the rules). Make one with
// New; the zero Transport is not usable. A Transport is safe for concurrent
// use by multiple goroutines.
type Transport struct {
	base  http.RoundTripper
	cfg   config
	calls callNumbers // numbers the calls that an Observer sees
}

type config struct {
	maxRetries     int
	backoff        Backoff
	clock          clock.Clock
	logger         *zap.Logger
	classify       Classifier
	observe        Observer
	tryTimeout     time.Duration
	idempotencyKey bool
	quota          *Quota
	cooldown       *Cooldown
	customClassify bool // WithClassifier gave one of the caller's own
	// lean is set by New when a first try needs nothing but the base and a
	// look at its status: no Observer, idempotency key or try timeout, and
	// the default Classifier (R16).
	lean bool
}

// An Option configures a Transport in New.
type Option func(*config)

// New returns a Transport that sends each try through base. A nil base means
// http.DefaultTransport, read when New is called. Nil options are ignored.
func New(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, cfg: config{
		maxRetries: 2,
		backoff:    DefaultBackoff,
		clock:      clock.New(),
		logger:     zap.NewNop(),
		classify:   Classify,
	}}
	for _, opt := range opts {
		if opt != nil {
			opt(&t.cfg)
		}
	}
	if t.cfg.cooldown != nil {
		t.cfg.cooldown.bind(t.cfg.clock)
	}
	t.cfg.lean = t.cfg.observe == nil && !t.cfg.idempotencyKey && t.cfg.tryTimeout == 0 && !t.cfg.customClassify
	return t
}

// WithMaxRetries sets how many times a request may be sent again after its
// first try: n+1 tries in all. The default is 2; 0 or a negative n means
// never retry; math.MaxInt means no limit but the deadline and the Budget.
func WithMaxRetries(n int) Option {
	return func(c *config) { c.maxRetries = max(n, 0) }
}

// WithBackoff sets the transport's own delay between tries. The default is
// DefaultBackoff. A server's longer Retry-After always wins (R4).
func WithBackoff(b Backoff) Option {
	return func(c *config) { c.backoff = b }
}

// WithClock sets the clock that every time read and every wait of the
// transport goes through. The default is clock.New(); nil keeps it.
//
// A request's context deadline is compared with this clock's now (R7), so a
// test clock must start near the real now when requests carry real deadlines
// (provider SDKs set their own). clock.NewMock starts in 1970: every real
// deadline then looks decades away and the deadline check is silently off.
// Use retryhttptest.NewClock, which starts at time.Now() and takes no time
// for any wait, or Set a mock to time.Now() first, or give requests
// deadlines on the test clock (retryhttptest.Clock.WithTimeout).
func WithClock(clk clock.Clock) Option {
	return func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	}
}

// WithLogger sets the logger that gets a Warn entry per retry and per
// give-up (R14). The default, and nil, is zap.NewNop().
func WithLogger(l *zap.Logger) Option {
	return func(c *config) {
		if l == nil {
			l = zap.NewNop()
		}
		c.logger = l
	}
}

// WithClassifier sets what decides whether a try is retried. The default,
// and nil, is Classify.
func WithClassifier(cl Classifier) Option {
	return func(c *config) {
		c.classify, c.customClassify = cl, cl != nil
		if cl == nil {
			c.classify = Classify
		}
	}
}

// WithObserver sets a function told of every try (R15). The default, and
// nil, is none. Given twice, the last wins: to feed several consumers
// (metrics and a UI, say), pass one function that calls each.
func WithObserver(o Observer) Option {
	return func(c *config) { c.observe = o }
}

// WithTryTimeout bounds each try until its response headers arrive, on the
// transport's clock; a try that runs out is Transient (R13). A response's body
// is never cut by it: the try's context lives until the body is closed. The
// default, and d <= 0, is no per-try limit.
func WithTryTimeout(d time.Duration) Option {
	return func(c *config) { c.tryTimeout = max(d, 0) }
}

// WithIdempotencyKey makes the transport give each call of a non-idempotent
// method (POST, PATCH, anything but GET, HEAD, OPTIONS, TRACE, PUT and DELETE)
// that has no Idempotency-Key header a random one, sent with every try of
// that call, so a server that de-duplicates by key applies it once (R11).
func WithIdempotencyKey() Option {
	return func(c *config) { c.idempotencyKey = true }
}

// WithQuota makes retries draw on q, which may be shared by many Transports
// (R12). The default, and nil, is no quota.
func WithQuota(q *Quota) Option {
	return func(c *config) { c.quota = q }
}

// CloseIdleConnections calls the base's CloseIdleConnections when it has one,
// so http.Client.CloseIdleConnections reaches through the Transport.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if ci, ok := t.base.(closeIdler); ok {
		ci.CloseIdleConnections()
	}
}

// RoundTrip sends req, and sends it again while its tries fail in a way worth
// repeating and the wait fits. It follows the http.RoundTripper contract: req
// is never modified, its body is always closed, and it returns a response or
// an error, never both.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := &t.cfg
	if !c.lean || req == nil || req.URL == nil {
		return t.roundTrip(req, nil)
	}
	if cd := c.cooldown; cd != nil && cd.find(req) != nil {
		return t.roundTrip(req, nil) // the key is watched: hold or pace first (R17)
	}
	// The happy path (R16): the floor (call the base, look at the status)
	// and a few branches. A success is Permanent under Classify; it is
	// handed back as the base gave it (a Cooldown reads only the answers
	// of a key it watches).
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp != nil && resp.StatusCode < 400 && resp.Body != nil {
		if q := c.quota; q != nil {
			q.succeeded()
		}
		return resp, nil
	}
	return t.roundTrip(req, &tried{resp: resp, err: err})
}

// tried is a first try that RoundTrip made before handing the call over.
type tried struct {
	resp *http.Response
	err  error
}

// roundTrip is the retry loop: hold, try, classify, decide, report, wait,
// rewind. first is the first try when RoundTrip already made it.
func (t *Transport) roundTrip(req *http.Request, first *tried) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("retryhttp: nil Request")
	}
	if req.URL == nil {
		closeBody(req.Body)
		return nil, errors.New("retryhttp: nil Request.URL")
	}
	c := &t.cfg
	send := req // R1: the first try may send the caller's request itself
	if c.idempotencyKey && needsIdempotencyKey(req) {
		send = withIdempotencyKey(req) // R11: on a clone, once for every try
	}
	clk := c.clock
	ctx := req.Context()
	budget := BudgetFrom(ctx)
	// R10: a body without GetBody can be sent once and never again.
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	var call uint64
	if c.observe != nil {
		call = t.calls.next()
	}
	cd := c.cooldown
	var (
		p        progress // what an *Error reports
		redacted string   // scheme://host/path for the Observer, made once
	)
	for try := 1; ; try++ {
		// Hold (R17): before every try, the first included, a call whose
		// key is watched waits for the hold and for its slot.
		var (
			entry   *cooling
			held    time.Duration
			slotted time.Time // when the Cooldown gave this try its slot
		)
		if cd != nil {
			entry = cd.find(req)
		}
		if entry != nil && (try > 1 || first == nil) {
			var err error
			if held, slotted, err = t.hold(ctx, req, entry, try > 1, budget, &p); err != nil {
				closeBody(send.Body) // R1: the caller's body, or a retry's fresh one, is closed unsent
				return nil, err
			}
		}

		// Try.
		p.tries = try
		var (
			resp    *http.Response
			err     error
			class   Class
			elapsed time.Duration
		)
		if try == 1 && first != nil {
			resp, err = checkResult(first.resp, first.err)
			class = c.classify(req, resp, err)
		} else {
			var start time.Time
			if c.observe != nil {
				start = clk.Now()
			}
			resp, err = t.send(send, try > 1)
			if c.observe != nil {
				elapsed = clk.Since(start)
			}
			// Classify, with the caller's request (R2).
			class = c.classify(req, resp, err)
		}
		status := 0
		if resp != nil {
			status = resp.StatusCode
			p.status = status
		}

		// What the provider says (R5, R18, R19). A response that is not
		// retried anyway is not read: its body is the caller's.
		var (
			now    time.Time
			ask    time.Duration
			hasAsk bool
			inBody bool       // the ask came from the body (R19)
			ahead  *readAhead // the failed body, read ahead: parsed, drained, or handed back whole
		)
		if resp != nil && (class != Permanent || cd != nil) {
			now = clk.Now() // (a Cooldown reads the time of every answer)
		}
		if resp != nil && class != Permanent {
			ask, hasAsk = ParseRetryAfter(resp.Header, now)
			if isJSON(resp.Header) && resp.ContentLength <= maxDrain {
				ahead = startReadAhead(resp.Body, true)
				resp.Body = ahead // a response handed back yields every byte (R19)
				ahead.wait(ctx, bodyTimeout)
				hint := ParseErrorBody(errorBody(resp.Header, ahead.bytes()))
				if hint.Exhausted {
					class = Permanent // a spent quota is not "busy, try again in a minute"
				} else if hint.RetryAfter > 0 && (!hasAsk || hint.RetryAfter > ask) {
					ask, hasAsk, inBody = hint.RetryAfter, true, true
				}
			}
			if hasAsk && class != Permanent {
				p.retryAfter = ask
			}
		}
		quotaOK := c.quota == nil || c.quota.record(class) // R12: every try counts
		if cd != nil && resp != nil && (entry != nil || class != Permanent || status >= 400) {
			// A success of a key nobody watches is not read (R16).
			h := heardOf(resp, class, ask, hasAsk, inBody, now)
			h.slotted = slotted
			cd.hear(req, entry, now, h)
			if entry == nil {
				entry = cd.find(req) // this answer may have armed it
			}
		}

		// Decide (R9): the first reason to stop wins.
		s := situation{
			class: class, try: try, maxRetries: c.maxRetries, replayable: replayable, quotaOK: quotaOK,
			ask: ask, hasAsk: hasAsk, left: maxDuration, budget: budget != nil,
		}
		var untilDeadline time.Duration
		if class != Permanent && try <= c.maxRetries && replayable && quotaOK {
			// What only a wait needs.
			s.backoff = c.backoff.Delay(try, rand.Float64())
			if entry != nil {
				s.cooldown = entry.holdLeft(clk.Now())
			}
			s.left, untilDeadline = t.left(ctx, budget)
		}
		d := decide(s)
		var body io.ReadCloser // the next try's body (R10)
		if d.outcome == Retrying && budget != nil && !budget.reserve(d.wait, untilDeadline) {
			s.left = d.wait // R8: a concurrent call took what was left
			d = decide(s)
		}
		if d.outcome == Retrying {
			var ok bool
			if body, ok = rewind(req); !ok {
				if budget != nil {
					budget.refund(d.wait)
				}
				s.replayable = false
				d = decide(s)
			}
		}
		// What the library writes about a try never holds a secret (R14).
		var safeErr error
		if err != nil {
			safeErr = scrub(err, req)
		}

		// Report (R15).
		if c.observe != nil {
			if redacted == "" {
				redacted = safeURL(req.URL)
			}
			t.report(ctx, Attempt{
				Call: call, Try: try, MaxTries: maxTries(c.maxRetries),
				Method: req.Method, URL: redacted,
				Status: status, Err: safeErr, Class: class,
				Elapsed: elapsed, Wait: d.wait, From: d.from, Outcome: d.outcome, Held: held,
			}, func() {
				// An Observer that panics leaks nothing.
				if resp != nil {
					_ = resp.Body.Close()
				}
				closeBody(body)
				if d.outcome == Retrying && budget != nil {
					budget.refund(d.wait)
				}
			})
		}

		switch d.outcome {
		case Done:
			if err == nil || try == 1 {
				return resp, err // R6: the body is the caller's now; R9: a first Permanent error unchanged
			}
			return nil, p.fail(Done, safeErr)
		case Retrying:
		default:
			logGiveUp(c.logger, req, d.outcome, try, p.waited, status, safeErr)
			if d.rateLimited {
				if resp != nil {
					discard(ctx, resp, bodyTimeout) // no wait follows (R10)
				}
				return nil, t.rateLimited(budget, p.fail(d.outcome, ErrRateLimited))
			}
			if err != nil {
				return nil, p.fail(d.outcome, safeErr)
			}
			return resp, nil // R9: the last response, untouched
		}

		// Wait, draining the failed body meanwhile (R10).
		logRetry(c.logger, req, try, c.maxRetries, status, d.wait, d.from, safeErr)
		var unused time.Duration
		ok := true
		if resp != nil {
			// The wait runs from the response; the drain overlaps it, and
			// is abandoned when it ends or after bodyTimeout, whichever
			// comes first. A wait shorter than reuseGrace (a zero backoff)
			// gives the drain reuseGrace all the same: an error page that
			// is a moment from whole keeps its connection, which costs a
			// provider's TLS handshake far more than a millisecond to redo.
			discard(ctx, resp, min(max(d.wait-clk.Since(now), reuseGrace), bodyTimeout))
			spent := min(clk.Since(now), d.wait)
			if ctx.Err() != nil {
				unused, ok = max(d.wait-spent, 0), false
			} else {
				unused, ok = t.sleep(ctx, d.wait-spent)
			}
		} else {
			unused, ok = t.sleep(ctx, d.wait)
		}
		if !ok {
			if budget != nil {
				budget.refund(unused)
			}
			p.waited += d.wait - unused
			closeBody(body)
			logGiveUp(c.logger, req, Canceled, try, p.waited, status, ctx.Err())
			return nil, p.fail(Canceled, ctx.Err())
		}
		p.waited += d.wait

		// Rewind: every retry is a clone with a fresh body (R1, R10), and a
		// context that tells the base how many tries went before it (R21).
		next := send.Clone(context.WithValue(ctx, resendKey{}, try))
		if body != nil {
			next.Body = body
		}
		send = next
	}
}

// maxTries is 1 + maxRetries, saturated: WithMaxRetries(math.MaxInt) is
// "no limit", not a negative count (R3).
func maxTries(maxRetries int) int {
	if maxRetries == math.MaxInt {
		return math.MaxInt
	}
	return maxRetries + 1
}

// rateLimited ends a call that carries a Budget with ErrRateLimited (R8),
// and lets the Budget remember it (R20).
func (t *Transport) rateLimited(b *Budget, e *Error) *Error {
	if b != nil {
		b.noteErr(e)
	}
	return e
}

// report calls the Observer. If it panics, cleanup releases what the try
// holds before the panic goes on up (R15).
func (t *Transport) report(ctx context.Context, a Attempt, cleanup func()) {
	defer func() {
		if v := recover(); v != nil {
			cleanup()
			panic(v)
		}
	}()
	t.cfg.observe(ctx, a)
}

// hold waits for what the Cooldown imposes on a try of req (R17): the
// send's slot, then what came up while it waited: a hold armed by another
// call's 429 or a pause after a cut, and a slot more for each retry let in
// before it. Each wait is a wait like any other: it must fit (R7) and is
// charged to the Budget (R8) before it starts, and the caller's context ends
// it. It returns what was waited and when the slot was given; an error ends
// the call: a wait that does not fit sends nothing.
func (t *Transport) hold(ctx context.Context, req *http.Request, e *cooling, retry bool, budget *Budget, p *progress) (held time.Duration, slotted time.Time, err error) {
	clk := t.cfg.clock
	slotted = clk.Now()
	left, untilDeadline := t.left(ctx, budget)
	charge := func(w time.Duration) bool { return budget == nil || budget.reserve(w, untilDeadline) }
	w, fromHold, tk, ok := e.reserve(slotted, retry, left, charge)
	if !ok {
		return 0, slotted, t.holdTooLong(req, w, budget, p)
	}
	for {
		if err := t.holdFor(ctx, req, w, fromHold, budget, p); err != nil {
			e.release(tk)
			return 0, slotted, err
		}
		held += w
		// The hold only moves forward and retries are let in one at a
		// time, each round waiting all of what it found: this ends.
		if w, fromHold, tk = e.more(clk.Now(), tk); w == 0 {
			return held, slotted, nil
		}
		left, untilDeadline := t.left(ctx, budget)
		if w >= left || budget != nil && !budget.reserve(w, untilDeadline) {
			e.release(tk)
			return 0, slotted, t.holdTooLong(req, w, budget, p)
		}
	}
}

// holdTooLong ends a call whose hold does not fit: nothing is sent (R17).
func (t *Transport) holdTooLong(req *http.Request, w time.Duration, budget *Budget, p *progress) error {
	p.retryAfter = w
	logGiveUp(t.cfg.logger, req, OutOfTime, p.tries, p.waited, p.status, ErrRateLimited)
	return t.rateLimited(budget, p.fail(OutOfTime, ErrRateLimited))
}

// holdFor sleeps a hold of w already fitted and charged, and logs it when
// it is the provider's word or a pace slow enough to see (R14).
func (t *Transport) holdFor(ctx context.Context, req *http.Request, w time.Duration, fromHold bool, budget *Budget, p *progress) error {
	if w == 0 {
		return nil
	}
	if fromHold || w >= time.Second {
		logHold(t.cfg.logger, req, w)
	}
	unused, ok := t.sleep(ctx, w)
	p.waited += w - unused
	if !ok {
		if budget != nil {
			budget.refund(unused)
		}
		logGiveUp(t.cfg.logger, req, Canceled, p.tries, p.waited, p.status, ctx.Err())
		return p.fail(Canceled, ctx.Err())
	}
	return nil
}

// callNumbers hands out Attempt.Call numbers, unique per Transport, without
// one counter that every call writes (R16): a call draws one of the shards
// at random, and shard i hands out i+1, i+1+callShards, i+1+2*callShards...
// so no two shards ever give the same number.
type callNumbers struct {
	shards [callShards]struct {
		n atomic.Uint64
		_ [56]byte // a cache line each
	}
}

const callShards = 16

func (c *callNumbers) next() uint64 {
	i := rand.Uint32() % callShards
	return (c.shards[i].n.Add(1)-1)*callShards + uint64(i) + 1
}

// resendKey is the context key of a retry's resend count (R21).
type resendKey struct{}

// ResendCount returns how many tries of this call were sent before the one
// whose context is ctx (R21): 0 on the first try, 1 on the first retry, and
// 0 for a context that did not come from a Transport (or a nil one). A base
// RoundTripper below the retries (a tracer, a logger) reads it from its
// request's context; it is OpenTelemetry's http.request.resend_count. The
// first try carries nothing, so it costs nothing.
func ResendCount(ctx context.Context) int {
	if ctx == nil {
		return 0
	}
	n, _ := ctx.Value(resendKey{}).(int)
	return n
}

// progress is what a call has come to so far, for the *Error that ends it (R9).
type progress struct {
	tries      int           // sent
	waited     time.Duration // charged, less what was given back
	status     int           // of the last response received
	retryAfter time.Duration // the last ask of the server
}

func (f *progress) fail(reason Outcome, cause error) *Error {
	return &Error{Tries: f.tries, Waited: f.waited, Status: f.status, RetryAfter: f.retryAfter, Reason: reason, Err: cause}
}

// send makes one try. A retry, and every try with a try timeout (R13), runs
// under its own context, cancelled when the returned body is closed or
// abandoned (readAhead: that ends a stalled read without closing the body
// under it), and with a try timeout by a timer on the injected clock if the
// headers are late: a stream outlives the timeout.
func (t *Transport) send(r *http.Request, retry bool) (*http.Response, error) {
	d := t.cfg.tryTimeout
	if d <= 0 && !retry {
		return checkResult(t.base.RoundTrip(r)) // the first try: the caller's context (R16)
	}
	ctx := r.Context()
	tryCtx, cancel := context.WithCancelCause(ctx)
	var timer *clock.Timer
	if d > 0 {
		timer = t.cfg.clock.AfterFunc(d, func() { cancel(errTryTimedOut) })
	}
	resp, err := checkResult(t.base.RoundTrip(r.WithContext(tryCtx)))
	if timer != nil && !timer.Stop() {
		// The timer fired, even if the headers came in the same instant:
		// the try's context is gone, and with it the body.
		cancel(errTryTimedOut)
		if resp != nil {
			_ = resp.Body.Close()
		}
		if ctx.Err() != nil {
			if err == nil {
				err = ctx.Err()
			}
			return nil, err // the caller's own end, not ours (R2)
		}
		return nil, &tryTimeoutError{d: d}
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = cancelOnClose(resp.Body, cancel)
	return resp, nil
}

// checkResult enforces the RoundTripper contract on the base: exactly one of
// a response and an error (net/http's client does the same).
func checkResult(resp *http.Response, err error) (*http.Response, error) {
	switch {
	case resp != nil && err != nil:
		closeBody(resp.Body)
		return nil, err
	case resp == nil && err == nil:
		return nil, errNilResponse
	case resp != nil && resp.Body == nil:
		resp.Body = http.NoBody // callers may always Close a response's body
	}
	return resp, err
}

var (
	errNilResponse = errors.New("retryhttp: base RoundTripper returned a nil response and a nil error")
	errTryTimedOut = errors.New("retryhttp: try timed out")
)

// tryTimeoutError is a try that ran out of WithTryTimeout. It is a net.Error
// with Timeout() true; it does not match context.DeadlineExceeded, which
// would say the caller's own deadline had passed.
type tryTimeoutError struct{ d time.Duration }

func (e *tryTimeoutError) Error() string {
	return "retryhttp: try timed out after " + e.d.String() + " waiting for response headers"
}
func (e *tryTimeoutError) Timeout() bool   { return true }
func (e *tryTimeoutError) Temporary() bool { return true }

// left returns what the request may still wait (the smaller of its deadline
// on the injected clock and its Budget) and, apart, the deadline's share.
func (t *Transport) left(ctx context.Context, b *Budget) (left, untilDeadline time.Duration) {
	untilDeadline = maxDuration
	if d, ok := ctx.Deadline(); ok {
		untilDeadline = d.Sub(t.cfg.clock.Now())
	}
	left = untilDeadline
	if b != nil {
		left = min(left, b.Left())
	}
	return left, untilDeadline
}

// sleep waits d on the injected clock unless ctx ends first; then it reports
// how much of d was not slept.
func (t *Transport) sleep(ctx context.Context, d time.Duration) (unused time.Duration, ok bool) {
	if ctx.Err() != nil {
		return d, false
	}
	if d <= 0 {
		return 0, true
	}
	clk := t.cfg.clock
	start := clk.Now()
	timer := clk.Timer(d)
	select {
	case <-timer.C:
		if ctx.Err() != nil {
			// Both were ready: the caller's end wins, so a canceled call
			// never sends another try (R9).
			return max(d-clk.Since(start), 0), false
		}
		return 0, true
	case <-ctx.Done():
		timer.Stop()
		return max(d-clk.Since(start), 0), false
	}
}

// rewind returns a fresh copy of req's body for a retry (R10): nil when req
// has no body, ok false when there is none to be had.
func rewind(req *http.Request) (body io.ReadCloser, ok bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil || body == nil {
		return nil, false // never send an empty or partial body
	}
	return body, true
}

// discard drains a failed response the caller will not get (at most
// maxDrain) and closes it, so that its connection can be reused (R10). It
// waits for the drain at most bound, in real time, then abandons a body
// that stalls (readAhead.Close: never closed under its read).
func discard(ctx context.Context, resp *http.Response, bound time.Duration) {
	ra, ok := resp.Body.(*readAhead)
	switch {
	case ok:
		bound = 0 // read ahead before the decision, it has had its bodyTimeout
	case resp.Body == http.NoBody || resp.ContentLength == 0:
		_ = resp.Body.Close() // nothing to drain: no goroutine for it
		return
	case resp.ContentLength > maxDrain:
		_ = resp.Body.Close() // too long to drain: the connection goes
		return
	default:
		ra = startReadAhead(resp.Body, false)
	}
	ra.wait(ctx, bound)
	_ = ra.Close()
}

func closeBody(b io.ReadCloser) {
	if b != nil {
		_ = b.Close()
	}
}

// needsIdempotencyKey reports whether R11 gives req a key: a method that is
// not idempotent by definition, and no key of the caller's own.
func needsIdempotencyKey(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return false
	}
	for name, values := range req.Header {
		// Any spelling: a key set as header["idempotency-key"] is still the caller's.
		if len(values) > 0 && strings.EqualFold(name, "Idempotency-Key") {
			return false
		}
	}
	return true
}

func withIdempotencyKey(req *http.Request) *http.Request {
	r := req.Clone(req.Context())
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	var key [16]byte
	_, _ = crand.Read(key[:]) // never fails on supported platforms (Go 1.24+ crashes instead)
	r.Header.Set("Idempotency-Key", hex.EncodeToString(key[:]))
	return r
}

// cancelOnClose wraps a response body so that closing it also ends the try's
// context (R13). A body that is also an io.Writer (101 Switching Protocols)
// stays one.
func cancelOnClose(body io.ReadCloser, cancel context.CancelCauseFunc) io.ReadCloser {
	if rwc, ok := body.(io.ReadWriteCloser); ok {
		return &cancelReadWriteCloser{ReadWriteCloser: rwc, cancel: cancel}
	}
	return &cancelReadCloser{ReadCloser: body, cancel: cancel}
}

type cancelReadCloser struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelReadCloser) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

type cancelReadWriteCloser struct {
	io.ReadWriteCloser
	cancel context.CancelCauseFunc
}

func (b *cancelReadWriteCloser) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel(nil)
	return err
}
