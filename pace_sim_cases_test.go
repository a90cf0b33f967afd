package retryhttp

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
)

// TestSimRequests: issue 16's load (100 requests a second, burst 10, 64
// workers, 1000 calls) in each dialect; the bounds are the model's numbers
// with a little room, so that they catch a policy that got worse.
func TestSimRequests(t *testing.T) {
	for _, d := range retryhttptest.Dialects() {
		t.Run(d.String(), func(t *testing.T) {
			cfg := retryhttptest.ProviderConfig{Dialect: d, Requests: retryhttptest.Limit{Rate: 100, Size: 10}}
			r := simRun{workers: 64, calls: 1000, cooldown: true}.run(t, cfg)
			ideal := 100*r.wall.Seconds() + 10
			t.Logf("%s: %d ok, %d failed, %.3f requests/success, goodput %.3f, p99 %v", d, r.ok, r.failed, r.perOK(), float64(r.ok)/ideal, r.p99())
			assert.Equal(t, 1000, r.ok)
			assert.LessOrEqual(t, r.perOK(), 1.2)
			assert.GreaterOrEqual(t, float64(r.ok)/ideal, 0.85)
			assert.LessOrEqual(t, r.p99(), 2500*time.Millisecond)
		})
	}
}

// TestSimTokens: issue 22's load (100 requests a second, 50,000 tokens a
// second in a bucket of 50,000; prompts of 100 to 4,000 tokens, mean about
// 1,500; 64 workers; 400 calls) in each dialect that names the limit, three
// prompt draws each, against issue 22's targets on the mean of the three:
// at most 1.1 requests per success and at least 0.9 of the token limit
// served, no failed call, and a p99 of at most 2 × workers × mean cost ÷
// token rate (+1 s where the provider speaks whole seconds), with a little
// room: a run in a bubble is one draw of the goroutines' order, and the
// runs vary (over repeated runs, the mean of three: 1.00 to 1.20 requests
// a success, 0.88 to 0.99 of the limit); each run within much more. The
// bounds catch a policy that got worse, not one that missed by a hair;
// bench/ measures the targets on the real thing (RESULTS.md).
func TestSimTokens(t *testing.T) {
	for _, d := range retryhttptest.Dialects()[:4] {
		t.Run(d.String(), func(t *testing.T) {
			var perOK, share float64
			for seed := uint64(1); seed <= 3; seed++ {
				r, sh, target := simTokenRun(t, d, seed)
				t.Logf("%s, draw %d: %d ok, %d failed, %.3f requests/success, token share %.3f, p99 %v (target %v)",
					d, seed, r.ok, r.failed, r.perOK(), sh, r.p99(), target)
				assert.Equal(t, 400, r.ok)
				assert.LessOrEqual(t, r.perOK(), 1.4)
				assert.GreaterOrEqual(t, sh, 0.5)
				assert.LessOrEqual(t, r.p99(), 4*target)
				perOK, share = perOK+r.perOK()/3, share+sh/3
			}
			assert.LessOrEqual(t, perOK, 1.25, "requests per success, the mean of three")
			assert.GreaterOrEqual(t, share, 0.8, "the share of the token limit served, the mean of three")
		})
	}
}

// simTokenRun is one run of issue 22's load, its share of the token limit
// served and its p99 target.
func simTokenRun(t *testing.T, d retryhttptest.Dialect, seed uint64) (simResult, float64, time.Duration) {
	return simTokenRunW(t, d, seed, nil)
}

// simTokenRunW is simTokenRun with the provider wrapped by wrap (nil: not).
func simTokenRunW(t *testing.T, d retryhttptest.Dialect, seed uint64, wrap func(http.RoundTripper) http.RoundTripper) (simResult, float64, time.Duration) {
	cfg := retryhttptest.ProviderConfig{Dialect: d, Requests: retryhttptest.Limit{Rate: 100, Size: 100},
		Tokens: retryhttptest.Limit{Rate: 50000, Size: 50000}}
	sizes := prompts(seed)
	r := simRun{workers: 64, calls: 400, prompt: sizes, cooldown: true, wrap: wrap}.run(t, cfg)
	var mean float64
	for i := range 400 {
		mean += math.Ceil(float64(sizes(i)) / 4)
	}
	mean /= 400
	target := time.Duration(2 * 64 * mean / 50000 * float64(time.Second))
	if d == retryhttptest.AnthropicDialect || d == retryhttptest.RetryAfterDialect {
		target += time.Second
	}
	return r, r.okTokens / (50000 + 50000*r.wall.Seconds()), target
}
