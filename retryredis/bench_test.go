package retryredis

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/require"
)

// What a paced send costs with Redis (issue 23, item 6): time, allocations
// and round trips to Redis, counted by a go-redis hook: one per paced send
// (apply.lua's EVALSHA, the take with the news of the answers before it),
// none for a first try of a key nobody watches.
//
//	go test -run '^$' -bench . -benchmem ./...

// trips counts the round trips that run a script (apply.lua or
// index.lua), a pipeline of them as one; the poll's index reads are left
// out (they are once per pollEvery, not per send).
type trips struct{ n atomic.Int64 }

func (c *trips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if isScript(cmd) {
				c.n.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

func isScript(cmd redis.Cmder) bool {
	n := strings.ToLower(cmd.Name())
	return n == "evalsha" || n == "eval"
}

// stub answers every request at once: a 429 asking for a millisecond until
// limited is false, then a success with OpenAI's counts of a limit so large
// that the pace never waits.
type stub struct {
	limited atomic.Bool
	ok, no  http.Header
	resp    *http.Response // when set, every success is it: the base allocates nothing
}

func newStub() *stub {
	s := &stub{ok: http.Header{}, no: http.Header{}}
	s.ok.Set("X-Ratelimit-Limit-Requests", "100000000")
	s.ok.Set("X-Ratelimit-Remaining-Requests", "99999999")
	s.ok.Set("X-Ratelimit-Reset-Requests", "1ms")
	s.no.Set("Retry-After-Ms", "1")
	s.limited.Store(true)
	return s
}

func (s *stub) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.limited.Load() {
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: s.no, Body: http.NoBody, Request: req}, nil
	}
	if s.resp != nil {
		return s.resp, nil
	}
	return &http.Response{StatusCode: http.StatusOK, Header: s.ok, Body: http.NoBody, Request: req}, nil
}

func benchTransport(b *testing.B) (*retryhttp.Transport, *trips, *stub) {
	srv := sharedRedis(b)
	c := srv.client(b)
	tr := &trips{}
	c.AddHook(tr)
	s := newStore(b, c, WithPrefix(testPrefix(b)), WithTimeout(time.Second))
	base := newStub()
	cd := retryhttp.NewCooldown(nil, retryhttp.WithStore(s))
	return retryhttp.New(base, retryhttp.WithCooldown(cd), retryhttp.WithMaxRetries(1)), tr, base
}

func do(b *testing.B, rt http.RoundTripper, req *http.Request) int {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// BenchmarkPacedSend is a send of a key the Cooldown watches and paces:
// its slot taken on Redis, and its answer's news sent with the next take.
func BenchmarkPacedSend(b *testing.B) {
	rt, tr, base := benchTransport(b)
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/models", nil)
	do(b, rt, req) // a 429: the key is armed, and watched from now on
	base.limited.Store(false)
	for range 10 {
		require.Equal(b, http.StatusOK, do(b, rt, req))
	}
	start := tr.n.Load()
	b.ResetTimer()
	for b.Loop() {
		do(b, rt, req)
	}
	b.ReportMetric(float64(tr.n.Load()-start)/float64(b.N), "redis-trips/op")
}

// BenchmarkUnwatchedFirstTry is a first try of a key nobody has armed: no
// Redis call and no allocation (R16).
func BenchmarkUnwatchedFirstTry(b *testing.B) {
	rt, tr, base := benchTransport(b)
	base.limited.Store(false)
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/models", nil)
	base.resp = &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: req}
	start := tr.n.Load()
	b.ReportAllocs()
	for b.Loop() {
		do(b, rt, req)
	}
	b.ReportMetric(float64(tr.n.Load()-start)/float64(b.N), "redis-trips/op")
}

// BenchmarkApply is the Store alone: one take, one round trip.
func BenchmarkApply(b *testing.B) {
	srv := sharedRedis(b)
	s := newStore(b, srv.client(b), WithPrefix(testPrefix(b)), WithTimeout(time.Second))
	ctx := context.Background()
	ops := []store.Op{{Kind: store.OpTake, Costs: []float64{1, 100}, Within: time.Second}}
	_, err := s.Apply(ctx, "k", []store.Op{{Kind: store.OpRates, Per: 1, Rates: binaryRates}})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Apply(ctx, "k", ops); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTrip is Redis's own floor: a PING on the same client.
func BenchmarkRoundTrip(b *testing.B) {
	srv := sharedRedis(b)
	c := srv.client(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
