package retryhttptest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each Signal writes its headers when the reply is served, relative to the
// Script's clock; the Retry-After forms read back as the wait asked.
func TestReplyAsks(t *testing.T) {
	clk := retryhttptest.NewClock()
	clk.Add(400 * ms) // as after a first backoff: not on a whole second
	now := clk.Now()
	tests := []struct {
		sig   retryhttptest.Signal
		d     time.Duration
		want  http.Header
		after time.Duration // what ParseRetryAfter reads; 0 when the form is not a Retry-After
	}{
		{retryhttptest.RetryAfterSeconds, 2 * time.Second, http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{retryhttptest.RetryAfterSeconds, 1500 * ms, http.Header{"Retry-After": {"1.5"}}, 1500 * ms},
		{retryhttptest.RetryAfterSeconds, time.Nanosecond, http.Header{"Retry-After": {"0.000000001"}}, time.Nanosecond},
		{retryhttptest.RetryAfterMs, 250 * ms, http.Header{"Retry-After-Ms": {"250"}}, 250 * ms},
		{retryhttptest.RetryAfterMs, 1500 * time.Microsecond, http.Header{"Retry-After-Ms": {"1.5"}}, 1500 * time.Microsecond},
		{retryhttptest.RetryAfterDate, 2 * time.Second,
			http.Header{"Retry-After": {now.Add(3 * time.Second).Truncate(time.Second).UTC().Format(http.TimeFormat)}}, 2600 * ms},
		{retryhttptest.OpenAIReset, 6 * time.Minute,
			http.Header{"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"6m0s"}}, 0},
		{retryhttptest.AnthropicReset, 2 * time.Second,
			http.Header{"Anthropic-Ratelimit-Requests-Remaining": {"0"}, "Anthropic-Ratelimit-Requests-Reset": {now.Add(2 * time.Second).UTC().Format(time.RFC3339Nano)}}, 0},
		{retryhttptest.RateLimitReset, 1500 * ms, http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"2"}}, 0},
		{retryhttptest.RateLimitField, 2 * time.Second, http.Header{"Ratelimit": {`"default";r=0;t=2`}}, 0},
		{retryhttptest.RetryAfterSeconds, -time.Second, http.Header{"Retry-After": {"0"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.sig.String()+"/"+tt.d.String(), func(t *testing.T) {
			script := retryhttptest.NewScript(retryhttptest.Status(429).Asks(tt.sig, tt.d)).WithClock(clk)
			req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
			resp, err := script.RoundTrip(req)
			require.NoError(t, err)
			assert.Equal(t, tt.want, resp.Header)
			if tt.after > 0 {
				d, ok := retryhttp.ParseRetryAfter(resp.Header, clk.Now())
				assert.True(t, ok)
				assert.Equal(t, tt.after, d)
			}
		})
	}
}

func TestReplyAsksMoreThanOnceKeepsCopiesApart(t *testing.T) {
	base := retryhttptest.Status(429, "X-Request-Id", "r1")
	a := base.Asks(retryhttptest.RetryAfterSeconds, time.Second)
	b := a.Asks(retryhttptest.OpenAIReset, time.Minute)
	c := a.Asks(retryhttptest.RetryAfterMs, 20*ms)
	header := func(r retryhttptest.Reply) http.Header {
		resp, err := retryhttptest.NewScript(r).RoundTrip(&http.Request{Method: http.MethodGet})
		require.NoError(t, err)
		return resp.Header
	}
	assert.Equal(t, http.Header{"X-Request-Id": {"r1"}}, header(base))
	assert.Equal(t, http.Header{"X-Request-Id": {"r1"}, "Retry-After": {"1"}}, header(a))
	assert.Equal(t, http.Header{"X-Request-Id": {"r1"}, "Retry-After": {"1"},
		"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"1m0s"}}, header(b))
	assert.Equal(t, http.Header{"X-Request-Id": {"r1"}, "Retry-After": {"1"}, "Retry-After-Ms": {"20"}}, header(c))
}

func TestSignalString(t *testing.T) {
	assert.Equal(t, "retry-after-date", retryhttptest.RetryAfterDate.String())
	assert.Equal(t, "ratelimit", retryhttptest.RateLimitField.String())
	assert.Equal(t, "signal(7)", (retryhttptest.RateLimitField + 1).String(), "one past the last")
	assert.Equal(t, "signal(200)", retryhttptest.Signal(200).String())
}

// TestReplyAsksResetWithCooldown pins what Reply.Asks says of the rate-limit
// forms (they act only with a Cooldown, and hold until
// one resolution before the reset, not until it (RULES.md R17): a
// whole-second reset of 1 s holds nothing, and the retry waits its backoff.
func TestReplyAsksResetWithCooldown(t *testing.T) {
	tests := []struct {
		sig      retryhttptest.Signal
		d        time.Duration
		cooldown bool
		wait     time.Duration // before the retry
		from     retryhttp.WaitSource
	}{
		{retryhttptest.OpenAIReset, 2 * time.Second, false, 400 * ms, retryhttp.FromBackoff},
		{retryhttptest.AnthropicReset, 3 * time.Second, false, 400 * ms, retryhttp.FromBackoff},
		{retryhttptest.OpenAIReset, 2 * time.Second, true, 1999 * ms, retryhttp.FromCooldown},
		{retryhttptest.AnthropicReset, 3 * time.Second, true, 2 * time.Second, retryhttp.FromCooldown},
		{retryhttptest.AnthropicReset, time.Second, true, 400 * ms, retryhttp.FromBackoff},
		{retryhttptest.RateLimitReset, 1500 * ms, true, time.Second, retryhttp.FromCooldown},
		{retryhttptest.RateLimitReset, time.Second, true, 400 * ms, retryhttp.FromBackoff},
		{retryhttptest.RateLimitField, 3 * time.Second, true, 2 * time.Second, retryhttp.FromCooldown},
		{retryhttptest.RateLimitField, time.Second, true, 400 * ms, retryhttp.FromBackoff},
		{retryhttptest.RetryAfterSeconds, time.Second, true, time.Second, retryhttp.FromRetryAfter}, // an ask, not a reset
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v/cooldown=%v", tt.sig, tt.d, tt.cooldown), func(t *testing.T) {
			clk := retryhttptest.NewClock()
			script := retryhttptest.NewScript(retryhttptest.Status(429).Asks(tt.sig, tt.d), retryhttptest.Status(200)).WithClock(clk)
			var from []retryhttp.WaitSource
			opts := []retryhttp.Option{retryhttp.WithClock(clk), retryhttp.WithBackoff(noJitter),
				retryhttp.WithObserver(func(_ context.Context, a retryhttp.Attempt) { from = append(from, a.From) })}
			if tt.cooldown {
				opts = append(opts, retryhttp.WithCooldown(retryhttp.NewCooldown(nil)))
			}
			code, _, err := get(t, retryhttp.New(script, opts...))
			require.NoError(t, err)
			assert.Equal(t, 200, code)
			assert.Equal(t, []time.Duration{tt.wait}, clk.Waits())
			assert.Equal(t, tt.from, from[0])
		})
	}
}

// TestReplyAsksResetOnSuccess: a 200 with an exhausted count, to a key the
// Cooldown does not watch yet, arms nothing: the next call is not held.
func TestReplyAsksResetOnSuccess(t *testing.T) {
	for _, sig := range []retryhttptest.Signal{retryhttptest.OpenAIReset, retryhttptest.AnthropicReset, retryhttptest.RateLimitReset} {
		clk := retryhttptest.NewClock()
		script := retryhttptest.NewScript(retryhttptest.Status(200).Asks(sig, 5*time.Second), retryhttptest.Status(200)).WithClock(clk)
		rt := retryhttp.New(script, retryhttp.WithClock(clk), retryhttp.WithCooldown(retryhttp.NewCooldown(nil)))
		for range 2 {
			_, _, err := get(t, rt)
			require.NoError(t, err)
		}
		assert.Empty(t, clk.Waits(), "%s", sig)
		assert.Equal(t, 2, script.Len())
	}
}
