package retryredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestPingSaysWhy: Ping's error names the cause: a Redis that refuses the
// connection (nothing listens on the port) is "connection refused", not
// the deadline go-redis's retries ran into; one that accepts and never
// answers is the deadline. With a client bounded by the context and with
// one that is not.
func TestPingSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	silent := silentListener(t)
	for _, tc := range []struct {
		name, addr string
		want       error
	}{
		{"a closed port", closed, syscall.ECONNREFUSED},
		{"a listener that never answers", silent, context.DeadlineExceeded},
	} {
		for _, direct := range []bool{true, false} {
			c := redis.NewClient(&redis.Options{Addr: tc.addr, ContextTimeoutEnabled: direct,
				ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
			s := newStore(t, c)
			start := time.Now()
			err := s.Ping(context.Background())
			took := time.Since(start)
			_ = c.Close()
			require.Error(t, err, "%s, bounded by the context %v", tc.name, direct)
			assert.ErrorIs(t, err, tc.want, "%s, bounded by the context %v: %v", tc.name, direct, err)
			assert.Less(t, took, 2*DefaultTimeout+slack, "%s: within twice the bound", tc.name)
			if tc.want != context.DeadlineExceeded {
				assert.NotErrorIs(t, err, context.DeadlineExceeded, "%s: %v", tc.name, err)
			}
		}
	}
}

// silentListener is the address of a listener on 127.0.0.1 that accepts
// connections and never answers; they close when the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

// TestBreakerLogLevels: Redis failing is a Warn entry, Redis back an
// Info one, as the Cooldown's own Store failing and working again are;
// to zap and to slog alike.
func TestBreakerLogLevels(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	lines, sl := newSlogLines()
	for _, opt := range []Option{WithLogger(zap.New(core)), WithSlog(sl)} {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		s := newStore(t, c, opt, WithBreaker(1, time.Millisecond))
		s.noteOutcome(context.Background(), false, errors.New("refused"))
		require.True(t, s.br.isOpen())
		s.noteOutcome(context.Background(), true, nil)
		require.False(t, s.br.isOpen())
		_ = c.Close()
	}
	levels := map[string]zapcore.Level{}
	for _, e := range logs.All() {
		levels[e.Message] = e.Level
	}
	assert.Equal(t, map[string]zapcore.Level{msgFailing: zapcore.WarnLevel, msgBack: zapcore.InfoLevel}, levels, "zap")
	slevels := map[string]any{}
	for _, e := range lines.entries(t) {
		slevels[e["msg"].(string)] = e["level"]
	}
	assert.Equal(t, map[string]any{msgFailing: slog.LevelWarn.String(), msgBack: slog.LevelInfo.String()}, slevels, "slog")
}

// TestApplyConcurrentWithClose: Applies before, during and after
// Close, on a client that does not bound its I/O by the context (each op
// then runs on a goroutine of its own that Close waits for): an Apply
// after Close is allowed, and its goroutine is never added to what a
// Close under way waits for (-race: the WaitGroup's Add raced its Wait).
func TestApplyConcurrentWithClose(t *testing.T) {
	srv := sharedRedis(t)
	prefix := testPrefix(t)
	for round := range 20 {
		c := redis.NewClient(&redis.Options{Addr: srv.addr, DialTimeout: time.Second}) // no ContextTimeoutEnabled
		s := NewStore(c, WithPrefix(prefix))
		require.False(t, s.direct, "ops run on goroutines")
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				<-start
				for i := range 10 {
					_, _ = s.Apply(context.Background(), fmt.Sprintf("k%d-%d-%d", round, g, i%3), paced)
				}
			})
		}
		close(start)
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond) // Close at points along the Applies
		require.NoError(t, s.Close())
		wg.Wait()
		_, err := s.Apply(context.Background(), "after", paced)
		assert.NoError(t, err, "an Apply after Close still applies")
		require.NoError(t, s.Close(), "idempotent")
		require.NoError(t, c.Close())
	}
}

// What a paced send costs with Redis (time, allocations
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
