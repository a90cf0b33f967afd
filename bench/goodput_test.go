package bench

// Tests of the goodput harness: the ideal client, the targets and the
// report's arithmetic, and CI-sized runs of every row that check only what
// must hold whatever the clients' tuning. Goodput itself is measured by
// cmd/goodput, never asserted here.

import (
	"math"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
)

// stats is a provider's counts of requests and abandoned answers.
func stats(requests, abandoned int64) ProviderStats {
	return ProviderStats{ProviderStats: retryhttptest.ProviderStats{Requests: requests, Abandoned: abandoned}}
}

// TestIdealClient checks the ideal client against cases worked by hand.
func TestIdealClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  GoodputConfig
		wall time.Duration // IdealWall
		span time.Duration
		ok   int // IdealOK(span)
	}{
		{"no latency: the burst at once, then the rate",
			GoodputConfig{Rate: 100, Burst: 10, Workers: 64, Calls: 1000}, 9900 * time.Millisecond, 2005 * time.Millisecond, 10 + 200},
		{"the bucket limits: latency adds one answer",
			GoodputConfig{Rate: 10, Burst: 10, Workers: 100, Calls: 100, Latency: time.Second}, 10 * time.Second, 2050 * time.Millisecond, 10 + 10},
		{"the workers limit: one worker, one call a second",
			GoodputConfig{Rate: 100, Burst: 10, Workers: 1, Calls: 5, Latency: time.Second}, 5 * time.Second, 5500 * time.Millisecond, 5},
		// The slow case: 10 start at once and 54 at 0.1 s steps, then
		// each worker's calls follow 10 s apart (the bucket is full again
		// whenever the first 10 come back): within 120 s the first 10 end 12
		// calls each, the others 11.
		{"the two take turns: 10 s answers at 10/s, 64 workers",
			GoodputConfig{Rate: 10, Burst: 10, Workers: 64, Calls: 64, Latency: 10 * time.Second}, 15400 * time.Millisecond, 120 * time.Second, 10*12 + 54*11},
		{"nothing ends before the first answer",
			GoodputConfig{Rate: 10, Burst: 10, Workers: 64, Calls: 1, Latency: time.Second}, time.Second, 999 * time.Millisecond, 0},
		{"no rate: nothing", GoodputConfig{Burst: 10, Workers: 1, Calls: 1}, 0, time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The bucket's float arithmetic may leave a nanosecond either way.
			assert.True(t, near(tc.cfg.IdealWall(), tc.wall), "IdealWall = %v, want %v", tc.cfg.IdealWall(), tc.wall)
			assert.Equal(t, tc.ok, tc.cfg.IdealOK(tc.span), "IdealOK(%v)", tc.span)
		})
	}
}

func TestGoodputTargets(t *testing.T) {
	cfg := GoodputConfig{Rate: 100, Burst: 10, Workers: 64, Calls: 1000}
	assert.Equal(t, GoodputTargets{RequestsPerSuccess: 1.2, Goodput: 0.9, P99: 1280 * time.Millisecond}, cfg.Targets())
	bare := cfg
	bare.Dialect, bare.Latency = retryhttptest.BareDialect, 800*time.Millisecond
	assert.Equal(t, GoodputTargets{RequestsPerSuccess: 1.2, Goodput: 0.85, P99: 2080 * time.Millisecond}, bare.Targets())

	good := GoodputReport{Config: cfg, OK: 1000, IdealOK: 1000, Provider: stats(1200, 0), P99: 1280 * time.Millisecond}
	for _, tc := range []struct {
		name string
		edit func(*GoodputReport)
		want []string
	}{
		{"all met, at the edges", func(*GoodputReport) {}, nil},
		{"one request too many", func(r *GoodputReport) { r.Provider.Requests++ }, []string{"requests/success"}},
		{"slow", func(r *GoodputReport) { r.IdealOK = 1112 }, []string{"goodput"}},
		{"a failed call", func(r *GoodputReport) { r.OK, r.Failed, r.Provider.Requests = 999, 1, 1000 }, []string{"failed"}},
		{"cut calls are not failed", func(r *GoodputReport) { r.Cut = 5 }, nil},
		{"a long tail", func(r *GoodputReport) { r.P99++ }, []string{"p99"}},
		{"no success", func(r *GoodputReport) { r.OK, r.Failed = 0, 1000 }, []string{"requests/success", "goodput", "failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			tc.edit(&r)
			assert.Equal(t, tc.want, cfg.Targets().Missed(r))
		})
	}
}

func TestGoodputReportArithmetic(t *testing.T) {
	r := GoodputReport{Config: GoodputConfig{Rate: 100}, OK: 50, IdealOK: 200, Wall: 2 * time.Second, Provider: stats(125, 0)}
	assert.Equal(t, 0.25, r.Goodput())
	r.Provider.Abandoned = 25 // a call that timed out: its request was waste
	assert.Equal(t, 2.5, r.RequestsPerSuccess())
	assert.Equal(t, 2*time.Second, r.Span())
	r.Config.Duration = time.Second
	assert.Equal(t, time.Second, r.Span(), "a timed run is judged over its duration")
	r.Provider.Abandoned = 25
	assert.Equal(t, 2.0, r.RequestsPerSuccess(), "a timed run leaves out the answers it cut short")
	r.OK = 0
	assert.True(t, math.IsInf(r.RequestsPerSuccess(), 1), "RequestsPerSuccess with no success")
	r.IdealOK = 0
	assert.Zero(t, r.Goodput())
}

// ciGoodput is small enough that every row ends in seconds, even the ones
// whose retries all wait a whole second at once, and has more workers than
// the burst so that the first calls are refused however slow the machine.
var ciGoodput = GoodputConfig{Rate: 40, Burst: 8, Workers: 12, Calls: 32, Timeout: 20 * time.Second}

// ciTokens adds a token limit that binds first: 32 prompts of about 1,500
// tokens are some 48,000, a second's worth after the bucket.
var ciTokens = GoodputConfig{Rate: 40, Burst: 8, Workers: 12, Calls: 32, Timeout: 20 * time.Second,
	TokenRate: 40000, TokenBurst: 10000, Seed: 1}

// TestGoodputRuns runs every row at CI size against every dialect, with
// and without latency, by calls and by time, and checks what must hold
// whatever the clients do. The runs go all at once, each with its own
// provider: one after another they would take a minute.
func TestGoodputRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: a few seconds")
	}
	type run struct {
		name string
		lib  Lib
		cfg  GoodputConfig
		done chan GoodputReport
	}
	var runs []run
	add := func(name string, cfg GoodputConfig, libs ...Lib) {
		for _, lib := range libs {
			r := run{name + "/" + lib.Name, lib, cfg, make(chan GoodputReport, 1)}
			go func() { r.done <- Goodput(r.lib, r.cfg) }()
			runs = append(runs, r)
		}
	}
	for _, d := range retryhttptest.Dialects() {
		cfg := ciGoodput
		cfg.Dialect = d
		add(d.String(), cfg, GoodputRows()...)
	}
	for _, d := range []retryhttptest.Dialect{retryhttptest.OpenAIDialect, retryhttptest.AnthropicDialect, retryhttptest.GeminiDialect} {
		cfg := ciTokens
		cfg.Dialect = d
		add(d.String()+"+tokens", cfg, Bare, RetryHTTPRetries10, RetryHTTPCooldownRetries10)
	}
	slow := ciGoodput
	slow.Latency = 40 * time.Millisecond
	add("openai+latency", slow, GoodputRows()...)
	for _, d := range []retryhttptest.Dialect{retryhttptest.AnthropicDialect, retryhttptest.GeminiDialect} {
		timed := slow
		timed.Dialect, timed.Duration = d, 1500*time.Millisecond
		add(d.String()+"+timed", timed, Bare, RetryHTTP, RetryHTTPCooldownRetries10)
	}

	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			limit := r.cfg.Timeout + r.cfg.Duration + 10*time.Second
			var rep GoodputReport
			select {
			case rep = <-r.done:
			case <-time.After(limit):
				t.Fatalf("calls still running after %v: a call outlived its context", limit)
			}
			checkGoodput(t, r.lib, r.cfg, rep)
			t.Logf("%d ok, %d failed, %d cut, %d requests, %d 429s, goodput %.3f, wall %v", rep.OK, rep.Failed, rep.Cut, rep.Provider.Requests, rep.Provider.Refused, rep.Goodput(), rep.Wall)
		})
	}
}

func checkGoodput(t *testing.T, lib Lib, cfg GoodputConfig, r GoodputReport) {
	t.Helper()
	s := r.Provider
	// The report adds up.
	assert.Equal(t, lib.Name, r.Client)
	assert.Equal(t, r.Calls, r.OK+r.Failed+r.Cut, "ok + failed + cut")
	assert.Equal(t, r.Failed, r.Got429+r.Errors+r.GotOther, "429 + errors + other")
	assert.Len(t, r.Latencies, r.OK+r.Failed)
	if cfg.Duration == 0 {
		assert.Equal(t, cfg.Calls, r.Calls)
		assert.Zero(t, r.Cut)
	}
	assert.Equal(t, cfg.IdealOK(r.Span()), r.IdealOK)
	if r.OK > 0 && cfg.Duration == 0 {
		assert.Equal(t, float64(s.Requests)/float64(r.OK), r.RequestsPerSuccess())
	}
	// Every call ended, within its context and the run.
	for i, d := range r.Latencies {
		if d <= 0 || d > cfg.Timeout+time.Second || d > r.Span() {
			t.Errorf("call %d took %v (timeout %v, span %v)", i, d, cfg.Timeout, r.Span())
			break
		}
	}
	assert.True(t, r.P50 <= r.P99 && r.P99 <= r.Max && r.Max <= r.Span(), "p50 %v, p99 %v, max %v, span %v: out of order", r.P50, r.P99, r.Max, r.Span())
	if cfg.Duration > 0 {
		assert.Less(t, r.Wall, cfg.Duration+5*time.Second, "the calls running at the end were not cut short")
		// A cut call had at most one request waiting for its answer.
		assert.LessOrEqual(t, s.Abandoned, int64(r.Cut), "more answers abandoned than calls cut")
	}
	// The provider counted every request once, and each 200 reached one call.
	// (Not requests >= calls: a Cooldown may end a call without sending, R17.)
	assert.Equal(t, s.Requests, s.Admitted+s.Refused, "requests = admitted + refused")
	assert.LessOrEqual(t, int64(r.OK), s.Admitted, "more ok calls than admissions")
	assert.LessOrEqual(t, int64(r.Got429), s.Refused, "more 429s handed back than sent")
	// The bucket starts full: the first Burst calls cannot fail (a timed run
	// may cut them short on a slow machine). With a token limit, prompts of
	// up to 4,000 tokens may empty the token bucket first.
	if cfg.TokenRate == 0 {
		assert.GreaterOrEqual(t, r.OK+r.Cut, min(r.Calls, cfg.Burst), "fewer ok or cut calls than the burst")
	} else {
		assert.Positive(t, r.OK+r.Cut, "no call ok")
		assert.LessOrEqual(t, r.TokensOK, s.Tokens, "more tokens ok than admitted")
		if limit := float64(cfg.TokenBucket()) + float64(cfg.TokenRate)*s.AdmitSpan.Seconds() + 1; float64(s.Tokens) > limit {
			t.Errorf("provider admitted %d tokens in %v, more than the bucket + T × span = %.1f", s.Tokens, s.AdmitSpan, limit)
		}
	}
	// The provider never admitted more than its bucket allows (one token of
	// slack for requests racing for its lock with nearly equal clocks).
	if limit := float64(cfg.Burst) + float64(cfg.Rate)*s.AdmitSpan.Seconds() + 1; float64(s.Admitted) > limit {
		t.Errorf("provider admitted %d in %v, more than B + R × span = %.1f", s.Admitted, s.AdmitSpan, limit)
	}
	if !lib.Retries {
		// One request a call, but a call cut short may not have sent it yet.
		assert.True(t, int64(r.OK+r.Failed) <= s.Requests && s.Requests <= int64(r.Calls), "bare: %d requests for %d calls, %d cut", s.Requests, r.Calls, r.Cut)
		assert.True(t, int64(r.OK) <= s.Admitted && s.Admitted <= int64(r.OK+r.Cut), "bare: %d admitted for %d ok and %d cut", s.Admitted, r.OK, r.Cut)
		if cfg.Duration == 0 {
			assert.Equal(t, int64(r.Calls), s.Requests, "bare: one request a call")
		}
	}
}
func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for _, tc := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 0.5, 0},
		{d[:1], 0.99, 1},
		{d, 0.5, 50},
		{d, 0.99, 99},
		{d, 1, 100},
		{d[:3], 0.5, 2},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("percentile(%d values, %v) = %v, want %v", len(tc.sorted), tc.p, got, tc.want)
		}
	}
}
