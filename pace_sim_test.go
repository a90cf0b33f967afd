package retryhttp

import (
	"bytes"
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// The pacing simulator: the whole Transport and Cooldown, in a
// testing/synctest bubble (virtual time, real goroutines), against the
// kit's Provider (a request bucket and a token bucket, saying what it says
// in one dialect) as the base, with workers that make calls back to back.
// It is the model of bench/'s goodput runs without the network; bench/
// measures the real thing (RESULTS.md).

// simRun is one run: workers making calls back to back through tr.
type simRun struct {
	workers, calls int
	span           time.Duration   // run for this long instead of calls (the outage scenario)
	prompt         func(i int) int // the i-th call's body length in bytes; nil: a small chat request
	cooldown       bool
	wrap           func(http.RoundTripper) http.RoundTripper // wraps the provider, for a test that looks on
}

// cdHook, when a test sets it, gets each run's Cooldown.
var cdHook func(*Cooldown)

// simResult is what a run saw.
type simResult struct {
	ok, failed, requests int
	okTokens             float64
	wall                 time.Duration
	lat                  []time.Duration
}

func (r simResult) perOK() float64 { return float64(r.requests) / float64(max(r.ok, 1)) }

func (r simResult) p99() time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	l := slices.Sorted(slices.Values(r.lat))
	return l[int(math.Ceil(0.99*float64(len(l))))-1]
}

// run runs sr against a Provider of cfg in a bubble of its own.
func (sr simRun) run(t *testing.T, cfg retryhttptest.ProviderConfig) (res simResult) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := retryhttptest.NewProvider(cfg)
		defer func() { st := p.Stats(); res.requests, res.okTokens = int(st.Requests), float64(st.Tokens) }()
		opts := []Option{WithMaxRetries(10), WithBackoff(Backoff{Base: 400 * time.Millisecond, Factor: 2, Max: 30 * time.Second})} // no jitter: a run is repeatable
		if sr.cooldown {
			cd := NewCooldown(nil)
			if cdHook != nil {
				cdHook(cd)
			}
			opts = append(opts, WithCooldown(cd))
		}
		var base http.RoundTripper = p
		if sr.wrap != nil {
			base = sr.wrap(p)
		}
		tr := New(base, opts...)
		var mu sync.Mutex
		next := 0
		var wg sync.WaitGroup
		for range sr.workers {
			wg.Go(func() {
				for {
					mu.Lock()
					i := next
					next++
					mu.Unlock()
					if sr.span > 0 && time.Since(start) >= sr.span || sr.span == 0 && i >= sr.calls {
						return
					}
					ok, took := sr.call(tr, i)
					mu.Lock()
					if ok {
						res.ok++
					} else {
						res.failed++
					}
					res.lat = append(res.lat, took)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		res.wall = time.Since(start)
	})
	return res
}

// call makes the i-th call and reports whether it got a 200, and how long
// it took.
func (sr simRun) call(tr http.RoundTripper, i int) (bool, time.Duration) {
	n := 80
	if sr.prompt != nil {
		n = sr.prompt(i)
	}
	body := bytes.Repeat([]byte("x"), n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "https://llm.example/v1/chat/completions", bytes.NewReader(body))
	t0 := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return false, time.Since(t0)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == 200, time.Since(t0)
}

// prompts gives prompts of 100 to 4,000 tokens, mean about 1,500 (issue
// 22's load), the same for every run.
func prompts(seed uint64) func(int) int {
	rng := rand.New(rand.NewPCG(22, seed))
	sizes := make([]int, 4096)
	for i := range sizes {
		// Log-uniform over [100, 4000] has mean 1,057; a mix with a
		// uniform draw brings it to about 1,500.
		tokens := 100 * math.Pow(40, rng.Float64())
		if rng.IntN(2) == 0 {
			tokens = 100 + 3900*rng.Float64()
		}
		sizes[i] = int(tokens) * 4
	}
	return func(i int) int { return sizes[i%len(sizes)] }
}
