package bench

// Goodput under a provider's rate limit: many workers share a fixed number of
// calls to a fake LLM provider that admits R requests a second (a token
// bucket with burst B) and answers the rest 429, as OpenAI does. Each client
// row runs against a fresh provider with a full bucket and a fresh base
// transport; cmd/goodput runs every row and prints the table.

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

// RateLimitBody is the body of the provider's 429, shaped like OpenAI's.
var RateLimitBody = []byte(`{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)

// chatRequest is the body every call POSTs.
var chatRequest = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`)

// A Provider is a fake LLM API on loopback that admits Rate requests a
// second with a burst of Burst, one bucket for all its clients. A request
// that gets a token is answered 200 with CompletionBody; the others 429 with
// `retry-after-ms` (until the next token, rounded up, at least 1),
// `Retry-After` (the same in whole seconds, rounded up, at least 1) and
// RateLimitBody. Every response carries OpenAI's x-ratelimit-limit-requests,
// x-ratelimit-remaining-requests and x-ratelimit-reset-requests (until the
// bucket is full). It reads every request body to the end.
type Provider struct {
	Rate, Burst int
	URL         string // where to POST: the server's /v1/chat/completions
	Start       time.Time

	srv    *server
	bucket *Bucket

	admitted, limited atomic.Int64
	lastAdmit         atomic.Int64 // ns after Start of the latest admission
}

// NewProvider starts a provider with a full bucket. Close it when done.
func NewProvider(rate, burst int) *Provider {
	p := &Provider{Rate: rate, Burst: burst, Start: time.Now()}
	p.bucket = NewBucket(float64(rate), burst, p.Start) // before the server starts: its handler reads both
	limit := strconv.Itoa(rate)
	p.srv = newServer(func(_ *server, w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		now := time.Now()
		d := p.bucket.Take(now)
		h := w.Header()
		h.Set("X-Ratelimit-Limit-Requests", limit)
		h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(d.Remaining))
		h.Set("X-Ratelimit-Reset-Requests", FormatReset(d.Reset))
		h.Set("Content-Type", "application/json")
		if d.OK {
			p.admitted.Add(1)
			for ns := int64(now.Sub(p.Start)); ; {
				old := p.lastAdmit.Load()
				if ns <= old || p.lastAdmit.CompareAndSwap(old, ns) {
					break
				}
			}
			h.Set("Content-Length", strconv.Itoa(len(CompletionBody)))
			w.Write(CompletionBody)
			return
		}
		p.limited.Add(1)
		h.Set("Retry-After-Ms", strconv.FormatInt(ceilUnits(d.Next, time.Millisecond), 10))
		h.Set("Retry-After", strconv.FormatInt(ceilUnits(d.Next, time.Second), 10))
		h.Set("Content-Length", strconv.Itoa(len(RateLimitBody)))
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(RateLimitBody)
	})
	p.URL = p.srv.URL + "/v1/chat/completions"
	return p
}

// ProviderStats is what a provider counted.
type ProviderStats struct {
	Requests  int64         // every request received
	Admitted  int64         // answered 200
	Limited   int64         // answered 429
	Conns     int64         // TCP connections accepted
	AdmitSpan time.Duration // from Start to the latest admission
}

// Stats returns the provider's counts so far.
func (p *Provider) Stats() ProviderStats {
	return ProviderStats{
		Requests:  p.srv.requests.Load(),
		Admitted:  p.admitted.Load(),
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
	Workers int           // C: calls in flight at once
	Calls   int           // N: calls per client row, shared by the workers
	Timeout time.Duration // each call's context; no Budget
}

// DefaultGoodput is the full run: R=100/s, B=10, C=64, N=1000, 60 s a call.
var DefaultGoodput = GoodputConfig{Rate: 100, Burst: 10, Workers: 64, Calls: 1000, Timeout: 60 * time.Second}

// IdealWall is the least time N calls can take: the burst at once, the rest
// at the provider's rate.
func (c GoodputConfig) IdealWall() time.Duration {
	return seconds(float64(max(c.Calls-c.Burst, 0)) / float64(c.Rate))
}

// GoodputRows are the clients of the goodput table, in its order. Each is
// set up as in the other scenarios (Shaped backoff, 3 tries) unless its name
// says otherwise; add a Lib here to add a row.
func GoodputRows() []Lib {
	return []Lib{Bare, RetryHTTP, RetryHTTPRetries10, RetryHTTPCooldown, RetryHTTPCooldownRetries10, Retryablehttp, Failsafe}
}

// GoodputReport is one client row.
type GoodputReport struct {
	Client string
	Config GoodputConfig

	OK       int    // calls that got a 200
	Failed   int    // the others
	Got429   int    // failed calls handed a 429 response
	GotOther int    // failed calls handed another status
	Errors   int    // failed calls handed an error
	FirstErr string // the text of one such error

	Provider ProviderStats

	Wall      time.Duration // first call sent to last call ended
	Latencies []time.Duration
	P50, P99  time.Duration // of every call, ok or not
	Max       time.Duration
}

// RequestsPerSuccess is requests the provider received per call that got a
// 200; +Inf when none did.
func (r GoodputReport) RequestsPerSuccess() float64 {
	if r.OK == 0 {
		return math.Inf(1)
	}
	return float64(r.Provider.Requests) / float64(r.OK)
}

// Goodput is successful calls a second over the provider's rate: 1 means
// every token the provider refilled during the run went to a call that
// succeeded. The burst makes it slightly above 1 for a run as fast as the
// limit allows, and far above for a short run: read it with OK.
func (r GoodputReport) Goodput() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.OK) / r.Wall.Seconds() / float64(r.Config.Rate)
}

// Goodput runs cfg.Calls calls through lib, cfg.Workers at a time, against a
// fresh provider, over a fresh base transport (BaseTransport(cfg.Workers))
// and the Lib's Shaped backoff. Each call is a POST of a small chat request
// through an http.Client, with a context of cfg.Timeout; its body is read
// to the end. A call is ok iff it got a 200.
func Goodput(lib Lib, cfg GoodputConfig) GoodputReport {
	p := NewProvider(cfg.Rate, cfg.Burst)
	defer p.Close()
	base := BaseTransport(cfg.Workers)
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: lib.Wrap(base, Shaped)}

	type outcome struct {
		status int
		err    error
	}
	lat := make([]time.Duration, cfg.Calls)
	out := make([]outcome, cfg.Calls)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Calls {
					return
				}
				t0 := time.Now()
				out[i].status, out[i].err = call(client, p.URL, cfg.Timeout)
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	r := GoodputReport{Client: lib.Name, Config: cfg, Wall: time.Since(start), Latencies: lat}
	r.Provider = p.Stats()
	for _, o := range out {
		switch {
		case o.err != nil:
			r.Errors++
			if r.FirstErr == "" {
				r.FirstErr = o.err.Error()
			}
		case o.status == http.StatusOK:
			r.OK++
		case o.status == http.StatusTooManyRequests:
			r.Got429++
		default:
			r.GotOther++
		}
	}
	r.Failed = cfg.Calls - r.OK
	sorted := slices.Sorted(slices.Values(lat))
	r.P50, r.P99 = percentile(sorted, 0.50), percentile(sorted, 0.99)
	if len(sorted) > 0 {
		r.Max = sorted[len(sorted)-1]
	}
	return r
}

// call sends one chat request and reads the answer to the end.
func call(client *http.Client, url string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
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
