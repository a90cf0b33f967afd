package bench

// Goodput under a provider's rate limit: many workers share a fixed number of
// calls (or a fixed time) to a fake LLM provider that admits R requests a
// second (a token bucket with burst B), answers them after a latency, and
// answers the rest 429 at once, saying what OpenAI, Anthropic, Gemini or a
// plainer server says (dialect.go). Each client row runs against a fresh
// provider with a full bucket and a fresh base transport; cmd/goodput runs
// every row and prints the tables.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// A Bucket is a token bucket: it holds at most burst tokens, starts full and
// refills continuously at rate tokens a second. Each admitted request takes
// one token. It is safe for concurrent use by multiple goroutines.
type Bucket struct {
	rate, burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time // the latest now seen: tokens are counted up to it
}

// NewBucket returns a full bucket of burst tokens that refills at rate
// tokens a second from now on. rate and burst must be positive.
func NewBucket(rate float64, burst int, now time.Time) *Bucket {
	return &Bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

// A Decision is the bucket's answer to one request.
type Decision struct {
	OK        bool          // the request got a token
	Remaining int           // whole tokens left after this request
	Next      time.Duration // until the next whole token; 0 when OK
	Reset     time.Duration // until the bucket is full again
}

// Take asks for one token at now. A now earlier than one already seen (two
// requests racing for the lock) adds no tokens, so the bucket never admits
// more than burst + rate × (latest now - start).
func (b *Bucket) Take(now time.Time) Decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	var d Decision
	if b.tokens >= 1 {
		b.tokens--
		d.OK = true
	} else {
		d.Next = seconds((1 - b.tokens) / b.rate)
	}
	d.Remaining = int(math.Floor(b.tokens))
	d.Reset = seconds((b.burst - b.tokens) / b.rate)
	return d
}

// seconds converts s to a Duration, rounded up to the nanosecond so that a
// client waiting it never comes back before the token is there.
func seconds(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(s * 1e9))
}

// FormatReset writes d as OpenAI writes x-ratelimit-reset-*: Go's duration
// syntax at millisecond resolution ("20ms", "1.5s", "6m0s"), rounded up so
// that the reset is never earlier than the bucket's; "0s" when d <= 0.
func FormatReset(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	if d < time.Second {
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return d.String()
}

// ceilUnits is d in whole units, rounded up, at least 1.
func ceilUnits(d, unit time.Duration) int64 {
	return max(1, int64((d+unit-1)/unit))
}

// chatRequest is the body every call POSTs.
var chatRequest = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`)

// A Provider is a fake LLM API on loopback that admits Rate requests a
// second with a burst of Burst, one bucket for all its clients. A request
// that gets a token (when it arrives) is answered 200 with CompletionBody
// after Latency, as a model takes its time to answer; the others are
// answered 429 at once, as real providers refuse at once. What the answers
// say about the limit is the Dialect's. It reads every request body to the
// end.
type Provider struct {
	Rate, Burst int
	Dialect     Dialect
	Latency     time.Duration // before a 200; 0 answers at once
	URL         string        // where to POST: the server's /v1/chat/completions
	Start       time.Time

	srv    *server
	bucket *Bucket

	admitted, limited, abandoned atomic.Int64
	lastAdmit                    atomic.Int64 // ns after Start of the latest admission
}

// NewProvider starts a provider with a full bucket. Close it when done.
func NewProvider(rate, burst int, d Dialect, latency time.Duration) *Provider {
	p := &Provider{Rate: rate, Burst: burst, Dialect: d, Latency: latency, Start: time.Now()}
	p.bucket = NewBucket(float64(rate), burst, p.Start) // before the server starts: its handler reads both
	p.srv = newServer(p.serve)
	p.URL = p.srv.URL + "/v1/chat/completions"
	return p
}

// serve answers one request: the token is taken as it arrives, so a slow
// answer holds no token back from the requests after it.
func (p *Provider) serve(_ *server, w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	now := time.Now()
	d := p.bucket.Take(now)
	h := w.Header()
	body := p.Dialect.answer(h, d, p.Burst, now)
	if !d.OK {
		p.limited.Add(1)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(body)
		return
	}
	p.admitted.Add(1)
	for ns := int64(now.Sub(p.Start)); ; {
		old := p.lastAdmit.Load()
		if ns <= old || p.lastAdmit.CompareAndSwap(old, ns) {
			break
		}
	}
	if p.Latency > 0 {
		t := time.NewTimer(p.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			// The client gave up, or the run is over and Close is waiting
			// for this handler: nobody will read the answer.
			t.Stop()
			p.abandoned.Add(1)
			return
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(CompletionBody)))
	w.Write(CompletionBody)
}

// ProviderStats is what a provider counted.
type ProviderStats struct {
	Requests  int64         // every request received
	Admitted  int64         // given a token (answered 200 unless the client left first)
	Abandoned int64         // of Admitted, those whose client left before the answer
	Limited   int64         // answered 429
	Conns     int64         // TCP connections accepted
	AdmitSpan time.Duration // from Start to the latest admission
}

// Stats returns the provider's counts so far.
func (p *Provider) Stats() ProviderStats {
	return ProviderStats{
		Requests:  p.srv.requests.Load(),
		Admitted:  p.admitted.Load(),
		Abandoned: p.abandoned.Load(),
		Limited:   p.limited.Load(),
		Conns:     p.srv.conns.Load(),
		AdmitSpan: time.Duration(p.lastAdmit.Load()),
	}
}

// Close closes every connection and stops the server.
func (p *Provider) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// GoodputConfig is one run of the goodput scenario.
type GoodputConfig struct {
	Rate    int           // R: requests a second the provider admits
	Burst   int           // B: its bucket's size
	Dialect Dialect       // what the provider says about its limit; the zero Dialect is OpenAI's
	Latency time.Duration // L: how long the provider takes to answer an admitted request; 0 answers at once
	Workers int           // C: calls in flight at once
	Calls   int           // N: calls per client row, shared by the workers; unused when Duration > 0
	// Duration, when above 0, bounds the run by time instead of by Calls:
	// each worker makes calls one after another until Duration has passed
	// since the start, and only what ended within it counts. The calls
	// still running then are cut short (their context ends) and counted as
	// Cut, neither ok nor failed.
	Duration time.Duration
	Timeout  time.Duration // each call's context; no Budget
}

// DefaultGoodput is the full run: R=100/s, B=10, OpenAI's dialect, answers
// at once, C=64, N=1000, 60 s a call.
var DefaultGoodput = GoodputConfig{Rate: 100, Burst: 10, Workers: 64, Calls: 1000, Timeout: 60 * time.Second}

// idealClient plays the best any client can do against the provider, in
// arithmetic: each of the Workers sends its next call the moment it is free
// and the bucket has a token, so no request is refused and no token waits
// while a worker could take it; every call then takes Latency. It calls end
// with each call's end, from the start, in order (they end in the order they
// are admitted), until end returns false.
//
// Greedy is the best: the worker free first takes the first token, and
// putting any call later delays the ones after it. With Latency 0 the i-th
// call (from 0) ends at (i + 1 − B) / R, the burst at once.
func (c GoodputConfig) idealClient(end func(time.Duration) bool) {
	if c.Rate <= 0 || c.Burst <= 0 || c.Workers <= 0 {
		return
	}
	t0 := time.Unix(0, 0)
	b := NewBucket(float64(c.Rate), c.Burst, t0)
	// Every call takes Latency, so workers come free in the order they were
	// given calls: worker i % C takes call i.
	free := make([]time.Duration, c.Workers)
	for i := 0; ; i++ {
		w := i % c.Workers
		at := free[w]
		for {
			d := b.Take(t0.Add(at))
			if d.OK {
				break
			}
			at += max(d.Next, 1)
		}
		free[w] = at + c.Latency
		if !end(free[w]) {
			return
		}
	}
}

// IdealWall is the least time Calls calls can take: the time the ideal
// client (idealClient) ends its Calls-th call. With no Latency it is
// (N − B) / R; Latency adds at least one answer's time, and more when the
// workers, not the bucket, are what limits (C / L below R). It ignores
// Duration.
func (c GoodputConfig) IdealWall() time.Duration {
	var wall time.Duration
	n := 0
	c.idealClient(func(end time.Duration) bool {
		wall, n = end, n+1
		return n < c.Calls
	})
	return wall
}

// IdealOK is the most calls that can end ok within span of the start, by
// the ideal client (idealClient): bounded by the bucket (B + R × (span − L))
// and by the workers (each ends at most span / L calls), and below both
// when the two take turns.
func (c GoodputConfig) IdealOK(span time.Duration) int {
	n := 0
	c.idealClient(func(end time.Duration) bool {
		if end > span {
			return false
		}
		n++
		return true
	})
	return n
}

// GoodputTargets are issue 16's targets for one row of the goodput table.
type GoodputTargets struct {
	RequestsPerSuccess float64       // at most
	Goodput            float64       // at least
	P99                time.Duration // at most
	// and no failed call (calls Cut at the end of a timed run are not failed)
}

// Targets returns the targets for runs of c: at most 1.2 requests per
// success, goodput at least 0.9 (0.85 when the provider gives no hint, where
// a client can only guess), no failed call, and p99 at most 2 × C / R + L:
// a call that waits its turn behind every other worker twice over, then
// takes its answer's time.
func (c GoodputConfig) Targets() GoodputTargets {
	t := GoodputTargets{RequestsPerSuccess: 1.2, Goodput: 0.9}
	if c.Dialect == BareDialect {
		t.Goodput = 0.85
	}
	if c.Rate > 0 {
		t.P99 = seconds(2*float64(c.Workers)/float64(c.Rate)) + c.Latency
	}
	return t
}

// Missed returns the targets r misses, by name ("requests/success",
// "goodput", "failed", "p99"), in that order; none when it meets them all.
func (t GoodputTargets) Missed(r GoodputReport) []string {
	var missed []string
	if !(r.RequestsPerSuccess() <= t.RequestsPerSuccess) {
		missed = append(missed, "requests/success")
	}
	if !(r.Goodput() >= t.Goodput) {
		missed = append(missed, "goodput")
	}
	if r.Failed > 0 {
		missed = append(missed, "failed")
	}
	if r.P99 > t.P99 {
		missed = append(missed, "p99")
	}
	return missed
}

// GoodputRows are the clients of the goodput table, in its order. Each is
// set up as in the other scenarios (Shaped backoff, 3 tries) unless its name
// says otherwise; add a Lib here to add a row. The reference
// configuration is RetryHTTPCooldownRetries10.
func GoodputRows() []Lib {
	return []Lib{Bare, RetryHTTP, RetryHTTPRetries10, RetryHTTPCooldown, RetryHTTPCooldownRetries10, Retryablehttp, Failsafe}
}

// GoodputReport is one client row.
type GoodputReport struct {
	Client string
	Config GoodputConfig

	Calls    int    // calls made: Config.Calls, or as many as the workers began within Duration
	OK       int    // calls that got a 200 (within Duration, when it is set)
	Failed   int    // calls that ended otherwise (within Duration, when it is set)
	Cut      int    // calls still running when Duration was up, ended by the run; 0 without Duration
	Got429   int    // failed calls handed a 429 response
	GotOther int    // failed calls handed another status
	Errors   int    // failed calls handed an error
	FirstErr string // the text of one such error

	Provider ProviderStats

	Wall      time.Duration   // first call sent to last call ended, cut calls included
	IdealOK   int             // the most calls that could have ended ok in Span (GoodputConfig.IdealOK)
	Latencies []time.Duration // of every call ok or failed, from Do to the end of the body; not of cut calls
	P50, P99  time.Duration   // of Latencies
	Max       time.Duration
}

// Span is the time the run is judged over: Config.Duration when it is set,
// else Wall.
func (r GoodputReport) Span() time.Duration {
	if r.Config.Duration > 0 {
		return r.Config.Duration
	}
	return r.Wall
}

// RequestsPerSuccess is requests the provider received per call that got a
// 200; +Inf when none did. A timed run leaves out the requests admitted but
// not yet answered when it ended (Provider.Abandoned): they are not waste,
// their calls were cut short on their way to a success.
func (r GoodputReport) RequestsPerSuccess() float64 {
	if r.OK == 0 {
		return math.Inf(1)
	}
	n := r.Provider.Requests
	if r.Config.Duration > 0 {
		n -= r.Provider.Abandoned
	}
	return float64(n) / float64(r.OK)
}

// Goodput is the calls that ended ok within Span over the most that could
// have (IdealOK): 1 is as good as any client can do against this provider
// with these workers, whether the bucket or the workers are what limits (C /
// L below R). A run that is slower than the ideal lowers it, since the ideal
// client would have ended more calls in the same time. It can pass 1 by a
// hair: the provider's bucket starts refilling as it starts, just before
// the first call. 0 when IdealOK is 0.
func (r GoodputReport) Goodput() float64 {
	if r.IdealOK <= 0 {
		return 0
	}
	return float64(r.OK) / float64(r.IdealOK)
}

// callResult is one call, as a worker saw it.
type callResult struct {
	status  int
	err     error
	took    time.Duration // from Do to the end of the body
	endedAt time.Duration // after the run's start
}

// Goodput runs cfg.Calls calls (or, when cfg.Duration is set, as many as fit
// in it) through lib, cfg.Workers at a time, against a fresh provider, over
// a fresh base transport (BaseTransport(cfg.Workers)) and the Lib's Shaped
// backoff. Each call is a POST of a small chat request through an
// http.Client, with a context of cfg.Timeout; its body is read to the end.
// A call is ok iff it got a 200.
func Goodput(lib Lib, cfg GoodputConfig) GoodputReport {
	p := NewProvider(cfg.Rate, cfg.Burst, cfg.Dialect, cfg.Latency)
	defer p.Close()
	base := BaseTransport(cfg.Workers)
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: lib.Wrap(base, Shaped)}

	start := time.Now()
	run, stop := context.WithCancel(context.Background())
	defer stop()
	if cfg.Duration > 0 {
		// A timed run cancels the calls still running when it is over, so
		// that it ends on time whatever they wait for. A cancel, not a
		// deadline: a client that sees a deadline may end at once a call it
		// cannot finish in time (a Cooldown's hold does, R17), and each
		// worker would then fail call after call until the end.
		t := time.AfterFunc(cfg.Duration, stop)
		defer t.Stop()
	}
	perWorker := make([][]callResult, cfg.Workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Go(func() {
			for {
				if cfg.Duration > 0 {
					if time.Since(start) >= cfg.Duration {
						return
					}
				} else if next.Add(1) > int64(cfg.Calls) {
					return
				}
				t0 := time.Now()
				status, err := call(run, client, p.URL, cfg.Timeout)
				t1 := time.Now()
				perWorker[w] = append(perWorker[w], callResult{status, err, t1.Sub(t0), t1.Sub(start)})
			}
		})
	}
	wg.Wait()
	r := GoodputReport{Client: lib.Name, Config: cfg, Wall: time.Since(start)}
	r.Provider = p.Stats()
	for _, rs := range perWorker {
		for _, c := range rs {
			r.Calls++
			if cfg.Duration > 0 && c.endedAt >= cfg.Duration {
				r.Cut++
				continue
			}
			r.Latencies = append(r.Latencies, c.took)
			switch {
			case c.err != nil:
				r.Errors++
				if r.FirstErr == "" {
					r.FirstErr = c.err.Error()
				}
			case c.status == http.StatusOK:
				r.OK++
			case c.status == http.StatusTooManyRequests:
				r.Got429++
			default:
				r.GotOther++
			}
		}
	}
	r.Failed = r.Errors + r.Got429 + r.GotOther
	r.IdealOK = cfg.IdealOK(r.Span())
	sorted := slices.Sorted(slices.Values(r.Latencies))
	r.P50, r.P99 = percentile(sorted, 0.50), percentile(sorted, 0.99)
	if len(sorted) > 0 {
		r.Max = sorted[len(sorted)-1]
	}
	return r
}

// call sends one chat request, with a context of timeout under parent, and
// reads the answer to the end.
func call(parent context.Context, client *http.Client, url string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(chatRequest))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, fmt.Errorf("reading the body: %w", err)
	}
	return resp.StatusCode, nil
}

// percentile is the nearest-rank p-quantile of sorted (0 when empty).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
