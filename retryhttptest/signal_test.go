package retryhttptest_test

import (
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
