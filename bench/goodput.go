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
	"sync"
	"sync/atomic"
	"time"
)

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
