package retryhttp

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
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
	cd := c.cooldown
	if cd != nil && cd.active.Load() > 0 {
		return t.roundTrip(req, nil) // a key may be cooling: hold first (R17)
	}
	// The happy path (R16): the floor (call the base, look at the status)
	// and a few branches. A success is Permanent under Classify; it is
	// handed back as the base gave it, unless it could arm the Cooldown.
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp != nil && resp.StatusCode < 400 && resp.Body != nil && (cd == nil || len(resp.Header) == 0) {
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
	var membership member // of the Cooldown's entry for req
	if cd != nil {
		defer cd.leave(&membership)
	}
	key, keyed := "", false // the Cooldown's key for req, made when first needed
	keyOf := func() string {
		if !keyed {
			key, keyed = cd.keyOf(req), true
		}
		return key
	}
	var (
		p        progress // what an *Error reports
		redacted string   // scheme://host/path for the Observer, made once
	)
	for try := 1; ; try++ {
		// Hold (R17): before every try, the first included, a call whose
		// key is cooling waits for the rest of the cooldown.
		var (
			entry *cooling
			held  time.Duration
		)
		if cd != nil && (try > 1 || first == nil) && cd.active.Load() > 0 && keyOf() != "" {
			var err error
			if entry, held, err = t.hold(ctx, req, key, budget, &p, &membership); err != nil {
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
			resp, err = t.send(send)
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
			ahead  *readAhead // the failed body, read ahead: parsed, drained, or handed back whole
		)
		if resp != nil && (class != Permanent || cd != nil) {
			now = clk.Now()
		}
		if resp != nil && class != Permanent {
			ask, hasAsk = ParseRetryAfter(resp.Header, now)
			if isJSON(resp.Header) && resp.ContentLength <= maxDrain {
				ahead = startReadAhead(resp.Body, true)
				resp.Body = ahead // a response handed back yields every byte (R19)
				ahead.wait(ctx, bodyTimeout)
				hint := ParseErrorBody(ahead.bytes())
				if hint.Exhausted {
					class = Permanent // a spent quota is not "busy, try again in a minute"
				} else if hint.RetryAfter > 0 && (!hasAsk || hint.RetryAfter > ask) {
					ask, hasAsk = hint.RetryAfter, true
				}
			}
			if hasAsk && class != Permanent {
				p.retryAfter = ask
			}
		}
		quotaOK := c.quota == nil || c.quota.record(class) // R12: every try counts
		if cd != nil {
			if s := signalOf(resp, class, ask, hasAsk, now); entry != nil || !s.until.IsZero() {
				if keyOf() != "" {
					cd.settle(key, entry, now, s, &membership)
				}
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
			if cd != nil && keyOf() != "" {
				if until := cd.Until(key); !until.IsZero() {
					s.cooldown = max(until.Sub(clk.Now()), 0)
				}
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

// hold waits while the Cooldown holds key (R17): the rest of a cooldown, a
// wait like any other (R7 fit, R8 charged, interruptible), and the wait for
// a probe's answer. It returns the admission's entry and what was waited;
// an error ends the call: a hold that does not fit sends nothing.
func (t *Transport) hold(ctx context.Context, req *http.Request, key string, budget *Budget, p *progress, m *member) (*cooling, time.Duration, error) {
	c := &t.cfg
	cd := c.cooldown
	start := c.clock.Now()
	var held time.Duration
	for {
		now := c.clock.Now()
		a := cd.admit(key, now, m)
		switch {
		case a.hold > 0:
			left, untilDeadline := t.left(ctx, budget)
			if a.hold >= left || budget != nil && !budget.reserve(a.hold, untilDeadline) {
				p.retryAfter = a.hold
				logGiveUp(c.logger, req, OutOfTime, p.tries, p.waited, p.status, ErrRateLimited)
				return nil, 0, t.rateLimited(budget, p.fail(OutOfTime, ErrRateLimited))
			}
			logHold(c.logger, req, a.hold)
			unused, ok := t.sleep(ctx, a.hold)
			p.waited += a.hold - unused
			if !ok {
				if budget != nil {
					budget.refund(unused)
				}
				logGiveUp(c.logger, req, Canceled, p.tries, p.waited, p.status, ctx.Err())
				return nil, 0, p.fail(Canceled, ctx.Err())
			}
			held += a.hold
		case a.wake != nil:
			ok := t.await(ctx, a.wake, a.grace)
			cd.unwait(key)
			if !ok {
				logGiveUp(c.logger, req, Canceled, p.tries, p.waited, p.status, ctx.Err())
				return nil, 0, p.fail(Canceled, ctx.Err())
			}
		default:
			return a.entry, max(held, c.clock.Since(start)), nil
		}
	}
}

// await waits for another call's answer to a probe (R17): until wake is
// closed, grace has passed on the clock, or ctx ends (false).
func (t *Transport) await(ctx context.Context, wake <-chan struct{}, grace time.Duration) bool {
	late := make(chan struct{})
	timer := t.cfg.clock.AfterFunc(grace, func() { close(late) })
	defer timer.Stop()
	select {
	case <-wake:
	case <-late:
	case <-ctx.Done():
		return false
	}
	return true
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
// waits for the drain at most bound, in real time: a body that stalls is
// closed, which ends the read.
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
