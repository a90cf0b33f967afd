package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/retryredis"
	"github.com/retryhttp/retryhttp/store"
)

const providerRate, providerBurst = 100, 10

// fleet is one run: replicas × workers making calls back to back for span.
type fleet struct {
	replicas, workers int
	span              time.Duration
	dialect           retryhttptest.Dialect
	// redis, when set, makes each replica's client: each replica's
	// Cooldown keeps its state on Redis with a retryredis.Store of its own,
	// under prefix.
	redis  func() redis.UniversalClient
	prefix string
	bound  time.Duration // each Store operation's (retryredis.WithTimeout)
	errs   *atomic.Int64 // the Stores' failed Applies (each then ran on the replica's own state)
}

// counted is a Store that counts its failures: the example shows that the
// fleet shared for real, and did not fall back to each replica's state.
type counted struct {
	*retryredis.Store
	errs *atomic.Int64
}

func (c counted) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	st, err := c.Store.Apply(ctx, key, ops)
	if err != nil {
		if c.errs.Add(1) == 1 && os.Getenv("FLEET_DEBUG") != "" {
			fmt.Fprintln(os.Stderr, "first Store error:", err)
		}
	}
	return st, err
}

type result struct {
	calls, ok, failed int
	storeErrs         int64
	perSuccess        float64
	goodput           float64
	p99               time.Duration
}

// maxRetries is what docs/fleet.md recommends for a paced fleet: a call
// that waits its turn behind a shared limit may meet a 429 more than twice
// (the default, 2) before it gets through, and each retry waits for the
// Cooldown's slot, not a blind backoff.
const maxRetries = 10

// replica is one process's worth: a Transport, its Cooldown, and what it
// must close.
type replica struct {
	client *http.Client
	close  func()
}

func (f fleet) replica() replica {
	var opts []retryhttp.CooldownOption
	closers := []func(){}
	if f.redis != nil {
		rdb := f.redis()
		s := retryredis.NewStore(rdb, retryredis.WithPrefix(f.prefix), retryredis.WithTimeout(f.bound))
		opts = append(opts, retryhttp.WithStore(counted{s, f.errs}))
		closers = append(closers, func() { _ = s.Close(); _ = rdb.Close() })
	}
	base := &http.Transport{MaxIdleConnsPerHost: f.workers}
	closers = append(closers, base.CloseIdleConnections)
	tr := retryhttp.New(base, retryhttp.WithMaxRetries(maxRetries), retryhttp.WithCooldown(retryhttp.NewCooldown(nil, opts...)))
	return replica{client: &http.Client{Transport: tr}, close: func() {
		for _, c := range closers {
			c()
		}
	}}
}

// runFleet runs f against a fresh provider on 127.0.0.1.
func runFleet(ctx context.Context, f fleet) result {
	p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: f.dialect,
		Requests: retryhttptest.Limit{Rate: providerRate, Size: providerBurst}, Latency: 10 * time.Millisecond})
	hs := httptest.NewServer(p)
	defer hs.Close()
	var mu sync.Mutex
	var r result
	if f.errs == nil {
		f.errs = new(atomic.Int64)
	}
	var lat []time.Duration
	inSpan := 0
	end := time.Now().Add(f.span)
	var wg sync.WaitGroup
	for range f.replicas {
		rep := f.replica()
		defer rep.close()
		for range f.workers {
			wg.Go(func() {
				for time.Now().Before(end) && ctx.Err() == nil {
					t0 := time.Now()
					ok := call(ctx, rep.client, hs.URL)
					mu.Lock()
					lat = append(lat, time.Since(t0))
					r.calls++
					switch {
					case !ok:
						r.failed++
					case time.Now().Before(end):
						inSpan++
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	st := p.Stats()
	r.storeErrs = f.errs.Load()
	r.ok = r.calls - r.failed
	r.perSuccess = float64(st.Requests) / float64(max(st.Admitted, 1))
	r.goodput = float64(inSpan) / (providerBurst + providerRate*f.span.Seconds())
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p99 = lat[len(lat)*99/100]
	}
	return r
}

// call makes one chat call and reports whether it ended in a 200.
func call(ctx context.Context, c *http.Client, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions",
		bytes.NewReader([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
