package bench

// The goodput run itself: the workers, their calls, and the report.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// callResult is one call, as a worker saw it.
type callResult struct {
	status  int
	err     error
	tokens  int           // what the provider charges it on its token limit
	took    time.Duration // from Do to the end of the body
	endedAt time.Duration // after the run's start
}

// Goodput runs cfg.Calls calls (or, when cfg.Duration is set, as many as fit
// in it) through lib, cfg.Workers at a time, against a fresh provider, over
// a fresh base transport (BaseTransport(cfg.Workers)) and the Lib's Shaped
// backoff. Call i is a POST of cfg.Body(i) (a small chat request, or with a
// token limit a prompt of PromptTokens(i)) through an http.Client, with a
// context of cfg.Timeout; its body is read to the end. A call is ok iff it
// got a 200.
func Goodput(lib Lib, cfg GoodputConfig) GoodputReport {
	p := NewProvider(cfg)
	defer p.Close()
	clients := make([]*http.Client, max(cfg.Replicas, 1))
	for i := range clients {
		base := BaseTransport(cfg.Workers/len(clients) + 1)
		defer base.CloseIdleConnections()
		clients[i] = &http.Client{Transport: lib.Wrap(base, Shaped)}
	}

	start := time.Now()
	perWorker := cfg.work(clients, p.URL, start)
	r := GoodputReport{Client: lib.Name, Config: cfg, Wall: time.Since(start)}
	r.Provider = p.Stats()
	r.tally(perWorker)
	r.IdealOK = cfg.IdealOK(r.Span())
	sorted := slices.Sorted(slices.Values(r.Latencies))
	r.P50, r.P99 = percentile(sorted, 0.50), percentile(sorted, 0.99)
	if len(sorted) > 0 {
		r.Max = sorted[len(sorted)-1]
	}
	return r
}

// work runs the workers until the calls are done (or Duration is up) and
// returns what each saw. The i-th call begun, counted across the workers,
// sends Body(i). Worker w calls through clients[w % len(clients)].
func (c GoodputConfig) work(clients []*http.Client, url string, start time.Time) [][]callResult {
	run, stop := context.WithCancel(context.Background())
	defer stop()
	if c.Duration > 0 {
		// A timed run cancels the calls still running when it is over, so
		// that it ends on time whatever they wait for. A cancel, not a
		// deadline: a client that sees a deadline may end at once a call it
		// cannot finish in time (a Cooldown's hold does, R17), and each
		// worker would then fail call after call until the end.
		t := time.AfterFunc(c.Duration, stop)
		defer t.Stop()
	}
	perWorker := make([][]callResult, c.Workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range c.Workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if c.Duration > 0 && time.Since(start) >= c.Duration || c.Duration == 0 && i >= c.Calls {
					return
				}
				body := c.Body(i)
				t0 := time.Now()
				status, err := call(run, clients[w%len(clients)], url, body, c.Timeout)
				t1 := time.Now()
				perWorker[w] = append(perWorker[w], callResult{status, err, (len(body) + 3) / 4, t1.Sub(t0), t1.Sub(start)})
			}
		})
	}
	wg.Wait()
	return perWorker
}

// tally counts the calls into r.
func (r *GoodputReport) tally(perWorker [][]callResult) {
	for _, rs := range perWorker {
		for _, c := range rs {
			r.Calls++
			if r.Config.Duration > 0 && c.endedAt >= r.Config.Duration {
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
				r.TokensOK += int64(c.tokens)
			case c.status == http.StatusTooManyRequests:
				r.Got429++
			default:
				r.GotOther++
			}
		}
	}
	r.Failed = r.Errors + r.Got429 + r.GotOther
}

// call sends one chat request of body, with a context of timeout under
// parent, and reads the answer to the end.
func call(parent context.Context, client *http.Client, url string, body []byte, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
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
