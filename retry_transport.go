package retryhttp

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/internal/signal"
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
	maxWait        time.Duration // no single wait this long or longer (WithMaxWait)
	logs           *logSampler   // the entries that repeat, sampled (R14)
	customClassify bool          // WithClassifier gave one of the caller's own
	streamRetry    bool          // WithStreamRetry: event streams are read ahead to their first token (R26)
	firstToken     time.Duration // WithStreamRetry's bound on it; 0: the caller's context alone
	// lean is set by New when a first try needs nothing but the base and a
	// look at its status: no Observer, idempotency key or try timeout, and
	// the default Classifier (R16).
	bareFirstTry bool
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
		maxWait:    DefaultMaxWait,
		logs:       &logSampler{},
	}}
	for _, opt := range opts {
		if opt != nil {
			opt(&t.cfg)
		}
	}
	if t.cfg.cooldown != nil {
		t.cfg.cooldown.bind(t.cfg.clock, t.cfg.logger)
	}
	t.cfg.bareFirstTry = t.cfg.observe == nil && !t.cfg.idempotencyKey && t.cfg.tryTimeout == 0 && !t.cfg.customClassify
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

// WithLogger sets the logger that gets a Warn entry per retry ("llm
// transient failure — retrying"), per give-up ("llm transient failure —
// giving up") and per hold of a Cooldown ("llm rate limit — waiting for
// cooldown"), with the fields R14 and R17 list: wait_from says which side set
// a wait, and ask_from, when the server asked for one, whether it asked in a
// "header" or in a JSON error "body". The default, and nil, is zap.NewNop().
// WithSlog does the same for a log/slog Logger; of the two, the last given
// wins.
//
// The transport writes to l with no stack trace and no caller, whatever l's
// options: a retry is expected, not a fault, so it is not worth a stack
// trace (zap.NewDevelopment's would add some 20 lines to each). The caller
// would always be the library's own observe.go, and no fixed caller skip
// reaches the code that made the request (it sits under net/http's Client
// and often an SDK), so it is dropped, as with zap.WithCaller(false); the
// entry's method and url say which call it was. l's name, fields, core and
// hooks are kept.
func WithLogger(l *zap.Logger) Option {
	return func(c *config) { c.logger = withoutCaller(l) }
}

// DefaultMaxWait is the longest single wait a Transport takes by default
// (WithMaxWait): longer than the reset of any per-minute limit (OpenAI's,
// Anthropic's and Gemini's TPM and RPM reset within 60 s) with room for a
// gateway that asks twice that, and far shorter than an hourly or daily
// quota's, which no call should sleep out.
const DefaultMaxWait = 5 * time.Minute

// WithMaxWait sets the longest single wait the transport takes (one
// "Retry-After: 1000000000" slept 31.7 years): a wait of d or more is
// not slept, as a wait that does not fit the deadline is not (R7). The call
// that got such an ask hands its response back at once (with a Budget, it
// fails with ErrRateLimited); a Cooldown holds no call that long either: a
// hold past DefaultMaxWait fails every call it would keep at once with
// ErrRateLimited, sending nothing, until it ends. The default, and d <= 0,
// is DefaultMaxWait.
func WithMaxWait(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = DefaultMaxWait
		}
		c.maxWait = d
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
	if !c.bareFirstTry || req == nil || req.URL == nil {
		return t.roundTrip(req, nil, callKey{})
	}
	var key callKey // made here by a key function of the caller's: handed on, so that it runs once (R17)
	if cd := c.cooldown; cd != nil {
		if ws := cd.eng.Watched(); ws != nil && mayWatch(ws, req.URL) {
			var watched bool
			if watched, key = cd.watches(req, req.Body); watched {
				return t.roundTrip(req, nil, key) // the key is watched: hold or pace first (R17)
			}
		}
	}
	// The happy path (R16): the floor (call the base, look at the status)
	// and a few branches. A success is Permanent under Classify; it is
	// handed back as the base gave it (a Cooldown reads only the answers
	// of a key it watches, and one that states the provider's limit:
	// R27), but for an event stream that WithStreamRetry reads ahead
	// (R26), whose send is timed.
	var sent time.Time
	if c.streamRetry {
		sent = c.clock.Now()
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp != nil && resp.StatusCode < 400 && resp.Body != nil {
		if c.streamRetry && isEventStream(resp) || c.cooldown != nil && signal.StatesLimits(resp.Header) {
			return t.roundTrip(req, &tried{resp: resp, sent: sent}, key)
		}
		if q := c.quota; q != nil {
			q.succeeded()
		}
		return resp, nil
	}
	return t.roundTrip(req, &tried{resp: resp, err: err, sent: sent}, key)
}

// tried is a first try that RoundTrip made before handing the call over.
type tried struct {
	resp *http.Response
	err  error
	sent time.Time // when it was sent, with WithStreamRetry (R26)
}

// roundTrip is the slow path: it checks req, then runs the retry loop as a
// call (call.go) made on this stack. first is the first try when RoundTrip
// already made it, and key the call's Cooldown key when RoundTrip made it.
func (t *Transport) roundTrip(req *http.Request, first *tried, key callKey) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("retryhttp: nil Request")
	}
	if req.URL == nil {
		closeBody(req.Body)
		return nil, errors.New("retryhttp: nil Request.URL")
	}
	c := call{t: t, cfg: &t.cfg, req: req, key: key}
	if first != nil {
		c.first, c.hasFirst = *first, true // a copy: the pointer stays on RoundTrip's stack
	}
	c.send = req // R1: the first try may send the caller's request itself
	if c.cfg.idempotencyKey && needsIdempotencyKey(req) {
		c.send = withIdempotencyKey(req) // R11: on a clone, once for every try
	}
	c.ctx = req.Context()
	c.budget = BudgetFrom(c.ctx)
	// R10: a body without GetBody can be sent once and never again.
	c.replayable = req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	if c.cfg.observe != nil {
		c.number = t.calls.next()
	}
	return c.run()
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
