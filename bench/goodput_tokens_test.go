package bench

// Tests of what the goodput harness gained for the token limit: the
// prompts, the ideal client against two limits, the token share and the
// targets.

import (
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
)

func TestPrompts(t *testing.T) {
	c := TokenGoodput
	lo, hi, sum := promptMax, promptMin, 0
	for i := range 4000 {
		n := c.PromptTokens(i)
		lo, hi, sum = min(lo, n), max(hi, n), sum+n
		body := c.Body(i)
		assert.Len(t, body, 4*n, "call %d: the body is 4 × its tokens", i)
		assert.Equal(t, int64(n), retryhttptest.DefaultCost(body).Tokens, "call %d: what the provider charges", i)
	}
	assert.GreaterOrEqual(t, lo, promptMin)
	assert.LessOrEqual(t, hi, promptMax)
	assert.Less(t, lo, 200, "short prompts")
	assert.Greater(t, hi, 3500, "long prompts")
	assert.InDelta(t, 1500, float64(sum)/4000, 40, "mean")
	assert.InDelta(t, 1500, c.MeanPrompt(), 100, "mean of the 400 calls")

	again, other := c, c
	other.Seed = 2
	same, differ := true, false
	for i := range 100 {
		same = same && again.PromptTokens(i) == c.PromptTokens(i)
		differ = differ || other.PromptTokens(i) != c.PromptTokens(i)
	}
	assert.True(t, same, "the same seed, the same prompts")
	assert.True(t, differ, "another seed, other prompts")

	plain := DefaultGoodput
	assert.Zero(t, plain.PromptTokens(3))
	assert.Equal(t, chatRequest, plain.Body(3), "no token limit: the small chat request")
	assert.Zero(t, plain.MeanPrompt())
}

// TestIdealClientTokens: when the tokens bind, the ideal client ends N calls
// when the bucket and T × wall have served their prompts, to the
// nanosecond, and its token share is 1.
func TestIdealClientTokens(t *testing.T) {
	c := GoodputConfig{Rate: 1000, Burst: 1000, Workers: 64, Calls: 200, TokenRate: 50000, TokenBurst: 50000, Seed: 7}
	total := 0
	for i := range c.Calls {
		total += c.PromptTokens(i)
	}
	want := seconds(float64(total-c.TokenBucket()) / float64(c.TokenRate))
	wall := c.IdealWall()
	assert.True(t, near(wall, want), "IdealWall = %v, want %v", wall, want)
	r := GoodputReport{Config: c, Wall: wall, TokensOK: int64(total)}
	assert.InDelta(t, 1, r.TokenShare(), 1e-6)

	// One worker with answers of a second: the workers bind, not the tokens.
	c.Workers, c.Latency = 1, time.Second
	assert.Equal(t, 5, c.IdealOK(5500*time.Millisecond))
}

func TestTokenTargets(t *testing.T) {
	c := TokenGoodput
	p99 := seconds(2 * 64 * c.MeanPrompt() / 50000)
	assert.InDelta(t, 3840*time.Millisecond, p99, float64(300*time.Millisecond), "2 × 64 × ~1,500 ÷ 50,000")
	for _, tc := range []struct {
		d   retryhttptest.Dialect
		p99 time.Duration
	}{
		{retryhttptest.OpenAIDialect, p99},
		{retryhttptest.AnthropicDialect, p99 + time.Second},
		{retryhttptest.RetryAfterDialect, p99 + time.Second},
		{retryhttptest.GeminiDialect, p99},
		{retryhttptest.BareDialect, p99},
	} {
		c.Dialect = tc.d
		assert.Equal(t, GoodputTargets{RequestsPerSuccess: 1.1, TokenShare: 0.9, P99: tc.p99}, c.Targets(), "%s", tc.d)
	}

	c.Dialect = retryhttptest.OpenAIDialect
	good := GoodputReport{Config: c, OK: 400, Provider: stats(440, 0), Wall: 10 * time.Second, TokensOK: 495000, P99: p99}
	for _, tc := range []struct {
		name string
		edit func(*GoodputReport)
		want []string
	}{
		{"all met, at the edges", func(*GoodputReport) {}, nil},
		{"one request too many", func(r *GoodputReport) { r.Provider.Requests++ }, []string{"requests/success"}},
		{"too few tokens served", func(r *GoodputReport) { r.TokensOK-- }, []string{"token share"}},
		{"goodput is not a target", func(r *GoodputReport) { r.IdealOK = 1e6 }, nil},
		{"a failed call", func(r *GoodputReport) { r.Failed = 1 }, []string{"failed"}},
		{"a long tail", func(r *GoodputReport) { r.P99++ }, []string{"p99"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			tc.edit(&r)
			assert.Equal(t, tc.want, c.Targets().Missed(r))
		})
	}
}

func TestTokenShare(t *testing.T) {
	r := GoodputReport{Config: GoodputConfig{TokenRate: 1000, TokenBurst: 2000, Latency: time.Second}, Wall: 3 * time.Second, TokensOK: 2000}
	assert.Equal(t, 0.5, r.TokenShare(), "2,000 of 2,000 + 1,000 × (3 s − 1 s)")
	r.Config.TokenBurst = 0 // a second's worth
	assert.Equal(t, 2.0/3, r.TokenShare())
	r.Wall = 500 * time.Millisecond
	assert.Equal(t, 2.0, r.TokenShare(), "a wall under the latency: the bucket alone")
	r.Config.Duration = 5 * time.Second
	assert.Equal(t, 0.4, r.TokenShare(), "a timed run is judged over its duration")
	r.Config.TokenRate = 0
	assert.Zero(t, r.TokenShare(), "no token limit")
}
