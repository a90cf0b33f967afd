package retryhttptest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The three ways a Provider works: as the base of a Transport on the kit's
// Clock, in a testing/synctest bubble, and as the handler of a loopback
// server.

// TestProviderOnClock: as a Transport's base on the kit's Clock, the
// transport's wait after a 429 is what each dialect asked for (R4, R19),
// and the bare 429 leaves it its backoff.
func TestProviderOnClock(t *testing.T) {
	quick := retryhttp.Backoff{Base: ms, Factor: 2}
	tests := []struct {
		d     retryhttptest.Dialect
		waits []time.Duration
	}{
		{retryhttptest.OpenAIDialect, []time.Duration{100 * ms}}, // retry-after-ms
		{retryhttptest.AnthropicDialect, []time.Duration{time.Second}},
		{retryhttptest.RetryAfterDialect, []time.Duration{time.Second}},
		{retryhttptest.GeminiDialect, []time.Duration{100 * ms}}, // retryDelay
		{retryhttptest.BareDialect, []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			clk := retryhttptest.NewClock()
			p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: tt.d, Clock: clk,
				Requests: retryhttptest.Limit{Rate: 10, Size: 1}})
			rt := retryhttp.New(p, retryhttp.WithClock(clk), retryhttp.WithBackoff(quick), retryhttp.WithMaxRetries(10))
			for range 2 {
				resp, _ := post(t, rt, chat(100, 0))
				assert.Equal(t, 200, resp.StatusCode)
			}
			assert.Equal(t, tt.waits, clk.Waits())
			s := p.Stats()
			assert.Equal(t, [2]int64{2, int64(len(tt.waits))}, [2]int64{s.Admitted, s.Refused})
		})
	}
}

// TestProviderLatency: a success waits the Latency on the provider's clock
// (on a *Clock, a wait like the transport's); a 429 does not; a client that
// leaves during it gets its context's cause, and the answer counts as
// Abandoned.
func TestProviderLatency(t *testing.T) {
	clk := retryhttptest.NewClock()
	p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Clock: clk, Latency: 300 * ms, Requests: retryhttptest.Limit{Rate: 1, Size: 1}})
	resp, _ := post(t, p, "{}")
	assert.Equal(t, 200, resp.StatusCode)
	resp, _ = post(t, p, "{}")
	assert.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, []time.Duration{300 * ms}, clk.Waits())

	synctest.Test(t, func(t *testing.T) {
		p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Latency: time.Second})
		ctx, cancel := context.WithTimeout(t.Context(), 100*ms)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/v1/chat/completions", strings.NewReader("{}"))
		start := time.Now()
		_, err := p.RoundTrip(req)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 100*ms, time.Since(start))
		s := p.Stats()
		assert.Equal(t, [2]int64{1, 1}, [2]int64{s.Admitted, s.Abandoned})

		_, err = p.RoundTrip(req) // its context has ended: not sent
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, int64(1), p.Stats().Requests)
	})
}

// load sends calls calls from 8 goroutines through rt and returns how many
// got a 200.
func load(t *testing.T, rt http.RoundTripper, calls int) int {
	var ok atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < calls; i += 8 {
				req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat/completions", strings.NewReader(chat(100, 0)))
				resp, err := rt.RoundTrip(req)
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(ok.Load())
}

// TestProviderSynctest: in a testing/synctest bubble, with the real clock
// (no Clock anywhere), 8 goroutines' waits overlap as in real time and the
// provider admits no more than its bucket allows; a Transport with a
// Cooldown sends fewer requests per success than one without.
func TestProviderSynctest(t *testing.T) {
	realStart := time.Now()
	perSuccess := map[bool]float64{}
	for _, cooldown := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 10, Size: 5}})
			opts := []retryhttp.Option{retryhttp.WithMaxRetries(10)}
			if cooldown {
				opts = append(opts, retryhttp.WithCooldown(retryhttp.NewCooldown(nil)))
			}
			start := time.Now()
			ok := load(t, retryhttp.New(p, opts...), 80)
			took := time.Since(start)
			s := p.Stats()
			assert.Equal(t, 80, ok)
			assert.Equal(t, int64(80), s.Admitted)
			assert.GreaterOrEqual(t, took, 7500*ms, "80 calls at 10 a second, 5 at once, cannot end sooner")
			assert.LessOrEqual(t, float64(s.Admitted), 5+10*s.LastAdmitted.Sub(start).Seconds()+1e-9, "more than the bucket allows")
			perSuccess[cooldown] = float64(s.Requests) / float64(ok)
		})
	}
	assert.Less(t, perSuccess[true], perSuccess[false], "requests per success with a Cooldown, and without")
	assert.Less(t, time.Since(realStart), 5*time.Second, "no real wait")
}

// TestProviderHandler: as the handler of a loopback httptest.Server it
// answers as its RoundTrip does, and a client that leaves during the
// Latency ends the handler (so Close does not wait for it).
func TestProviderHandler(t *testing.T) {
	limit := retryhttptest.Limit{Rate: 1, Size: 2}
	p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Requests: limit})
	srv := httptest.NewServer(p)
	defer srv.Close()
	client := srv.Client()
	for i, want := range []int{200, 200, 429} {
		resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(chat(100, 0)))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, "answer %d", i)
		assert.Equal(t, "2", resp.Header.Get("X-Ratelimit-Limit-Requests"))
		if want == 429 {
			assert.Equal(t, "1", resp.Header.Get("Retry-After"))
			assert.Contains(t, string(body), `"code":"rate_limit_exceeded"`)
		}
	}
	assert.Equal(t, int64(3), p.Stats().Requests)

	slow := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Latency: time.Hour})
	srv2 := httptest.NewServer(slow)
	ctx, cancel := context.WithTimeout(t.Context(), 50*ms)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv2.URL, strings.NewReader("{}"))
	_, err := srv2.Client().Do(req)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	closed := make(chan struct{})
	go func() { srv2.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waiting for a handler after 5 s")
	}
	assert.Equal(t, int64(1), slow.Stats().Abandoned)
}

// TestProviderConcurrentUse: many goroutines at once on the real clock; the
// counts add up and the bucket holds (run with -race).
func TestProviderConcurrentUse(t *testing.T) {
	p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: retryhttptest.AnthropicDialect,
		Requests: retryhttptest.Limit{Rate: 1000, Size: 50}, Tokens: retryhttptest.Limit{Rate: 1e5, Size: 5000}})
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/", strings.NewReader(chat(100, 0)))
				resp, err := p.RoundTrip(req)
				if assert.NoError(t, err) {
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	s := p.Stats()
	assert.Equal(t, int64(800), s.Requests)
	assert.Equal(t, s.Requests, s.Admitted+s.Refused)
	assert.Equal(t, 100*s.Admitted, s.Tokens)
	assert.LessOrEqual(t, float64(s.Admitted), 50+1000*time.Since(start).Seconds())
}
