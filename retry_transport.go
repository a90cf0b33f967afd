package retryhttp

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"io"
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
	calls atomic.Uint64 // numbers the calls that an Observer sees
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
	return t
}

// WithMaxRetries sets how many times a request may be sent again after its
// first try: n+1 tries in all. The default is 2; 0 or a negative n means
// never retry.
func WithMaxRetries(n int) Option {
	return func(c *config) { c.maxRetries = max(n, 0) }
}

// WithBackoff sets the transport's own delay between tries. The default is
// DefaultBackoff. A server's longer Retry-After always wins (R4).
func WithBackoff(b Backoff) Option {
	return func(c *config) { c.backoff = b }
}

// WithClock sets the clock that every time read and every wait goes through,
// so tests can use clock.NewMock(). The default is clock.New(); nil keeps it.
// A request's context deadline is compared with this clock's now (R7): when
// requests carry real deadlines (provider SDKs set their own), set a mock to
// time.Now() first, or every wait will look out of time.
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
		if cl == nil {
			cl = Classify
		}
		c.classify = cl
	}
}

// WithObserver sets a function told of every try (R15). The default, and
// nil, is none.
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
	if req == nil {
		return nil, errors.New("retryhttp: nil Request")
	}
	if req.URL == nil {
		closeBody(req.Body)
		return nil, errors.New("retryhttp: nil Request.URL")
	}
	c := &t.cfg
	ctx := req.Context()
	budget := BudgetFrom(ctx)
	maxTries := c.maxRetries + 1
	// R10: a body without GetBody can be sent once and never again.
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil

	send := req // R1: the first try may send the caller's request itself
	if c.idempotencyKey && needsIdempotencyKey(req) {
		send = withIdempotencyKey(req) // R11: on a clone, once for every try
	}
	var call uint64
	if c.observe != nil {
		call = t.calls.Add(1)
	}
	var (
		sofar    progress // what an *Error reports
		redacted string   // scheme://host/path for the Observer, made once
	)
	for try := 1; ; try++ {
		sofar.tries = try
		// Try.
		var start time.Time
		var elapsed time.Duration
		if c.observe != nil {
			start = c.clock.Now()
		}
		resp, err := t.send(send)
		if c.observe != nil {
			elapsed = c.clock.Since(start)
		}
		status := 0
		if resp != nil {
			status = resp.StatusCode
			sofar.status = status
		}

		// Classify, with the caller's request (R2).
		class := c.classify(req, resp, err)
		quotaOK := c.quota == nil || c.quota.record(class) // R12: every try counts

		// Decide (R9): the first reason to stop wins.
		var (
			outcome = Retrying
			ask     time.Duration // the server's Retry-After
			hasAsk  bool
			wait    time.Duration
			from    WaitSource
			left    = maxDuration // what the deadline and the Budget leave (R7)
			body    io.ReadCloser // the next try's body (R10)
		)
		if resp != nil && class != Permanent {
			if ask, hasAsk = ParseRetryAfter(resp.Header, c.clock.Now()); hasAsk {
				sofar.retryAfter = ask
			}
		}
		switch {
		case class == Permanent:
			outcome = Done
		case try >= maxTries:
			outcome = Exhausted
		case !replayable:
			outcome = NotReplayable
		case !quotaOK:
			outcome = NoQuota
		default:
			// R4: the server's ask is never shortened or capped.
			wait, from = c.backoff.Delay(try, rand.Float64()), FromBackoff
			if hasAsk && ask > wait {
				wait, from = ask, FromRetryAfter
			}
			var untilDeadline time.Duration
			left, untilDeadline = t.left(ctx, budget)
			fits := wait < left
			if fits && budget != nil {
				fits = budget.reserve(wait, untilDeadline) // R8: charged before the sleep
			}
			switch {
			case !fits:
				outcome = OutOfTime
			default:
				var ok bool
				if body, ok = rewind(req); !ok {
					outcome = NotReplayable
					if budget != nil {
						budget.refund(wait)
					}
				}
			}
		}
		if outcome != Retrying {
			wait = 0
		}
		// What the library writes about a try never holds a secret (R14).
		safeErr := scrub(err, req)
		if c.observe != nil {
			if redacted == "" {
				redacted = safeURL(req.URL)
			}
			c.observe(ctx, Attempt{
				Call: call, Try: try, MaxTries: maxTries,
				Method: req.Method, URL: redacted,
				Status: status, Err: safeErr, Class: class,
				Elapsed: elapsed, Wait: wait, From: from, Outcome: outcome,
			})
		}

		if outcome == Done {
			if err == nil || try == 1 {
				return resp, err // R6: the body is the caller's now; R9: a first Permanent error unchanged
			}
			return nil, sofar.fail(Done, safeErr)
		}
		if outcome != Retrying {
			logGiveUp(c.logger, req, outcome, try, sofar.waited, status, safeErr)
			// R8: with a Budget, a rate limit that cannot be waited out fails fast.
			if budget != nil && (class == Throttled || outcome == OutOfTime && hasAsk && ask >= left) {
				if resp != nil {
					t.discard(resp)
				}
				return nil, sofar.fail(outcome, ErrRateLimited)
			}
			if err != nil {
				return nil, sofar.fail(outcome, safeErr)
			}
			return resp, nil // R9: the last response, untouched
		}

		// Wait.
		logRetry(c.logger, req, try, c.maxRetries, status, wait, from, safeErr)
		if resp != nil {
			t.discard(resp) // R10: lets the connection be reused
		}
		if unused, ok := t.sleep(ctx, wait); !ok {
			if budget != nil {
				budget.refund(unused)
			}
			sofar.waited += wait - unused
			closeBody(body)
			logGiveUp(c.logger, req, Canceled, try, sofar.waited, status, ctx.Err())
			return nil, sofar.fail(Canceled, ctx.Err())
		}
		sofar.waited += wait

		// Rewind: every retry is a clone with a fresh body (R1, R10), and a
		// context that tells the base how many tries went before it (R21).
		next := send.Clone(context.WithValue(ctx, resendKey{}, try))
		if body != nil {
			next.Body = body
		}
		send = next
	}
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

// send makes one try. With a try timeout (R13) the try runs under its own
// context, cancelled by a timer on the injected clock if the headers are
// late, or when the returned body is closed: a stream outlives the timeout.
func (t *Transport) send(r *http.Request) (*http.Response, error) {
	d := t.cfg.tryTimeout
	if d <= 0 {
		return checkResult(t.base.RoundTrip(r))
	}
	ctx := r.Context()
	tryCtx, cancel := context.WithCancelCause(ctx)
	timer := t.cfg.clock.AfterFunc(d, func() { cancel(errTryTimedOut) })
	resp, err := checkResult(t.base.RoundTrip(r.WithContext(tryCtx)))
	if !timer.Stop() {
		// The timer fired, even if the headers came in the same instant:
		// the try's context is gone, and with it the body.
		cancel(errTryTimedOut)
		if resp != nil {
			resp.Body.Close()
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

// maxDrain bounds how much of a failed response's body is read before it is
// closed (R10): enough for the connection to be reused after an error page,
// little enough that an endless body cannot stall the retry loop.
const maxDrain = 64 << 10

// discard drains and closes a response the caller will not get. With a try
// timeout the drain is bounded in time too: a server that sends headers and
// then stalls the body has its try cancelled after the timeout.
func (t *Transport) discard(resp *http.Response) {
	if b, ok := resp.Body.(tryBody); ok && t.cfg.tryTimeout > 0 {
		timer := t.cfg.clock.AfterFunc(t.cfg.tryTimeout, b.cancelTry)
		defer timer.Stop()
	}
	if resp.ContentLength <= maxDrain { // -1 (unknown) included
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	}
	resp.Body.Close()
}

func closeBody(b io.ReadCloser) {
	if b != nil {
		b.Close()
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

// tryBody is a body whose try context can be cancelled early.
type tryBody interface{ cancelTry() }

type cancelReadCloser struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelReadCloser) cancelTry() { b.cancel(errTryTimedOut) }

func (b *cancelReadCloser) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

type cancelReadWriteCloser struct {
	io.ReadWriteCloser
	cancel context.CancelCauseFunc
}

func (b *cancelReadWriteCloser) cancelTry() { b.cancel(errTryTimedOut) }

func (b *cancelReadWriteCloser) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel(nil)
	return err
}
