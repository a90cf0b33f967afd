package retryhttp

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGiveUpsSampled: a caller's loop around calls that fail at once (a
// hold longer than the Budget) writes one give-up entry a second per
// provider, and the next one says how many it stands for; another provider
// is sampled apart.
func TestGiveUpsSampled(t *testing.T) {
	log, logs := logSink()
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "60")).WithClock(clk)
	tr := New(script, WithClock(clk), WithLogger(log), WithCooldown(NewCooldown(nil)), WithMaxRetries(0))
	call := func(url string) {
		ctx := WithBudget(context.Background(), NewBudget(PublicTierMaxWait))
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	for range 1000 {
		call("https://api.example.com/v1/chat")
	}
	call("https://other.example.com/v1/chat")
	entries := logs.FilterMessage(msgGivingUp).All()
	require.Len(t, entries, 2, "one for each provider in the first second")
	assert.NotContains(t, entries[0].ContextMap(), "count", "the first of a second stands for itself")
	clk.Add(time.Second)
	call("https://api.example.com/v1/chat")
	entries = logs.FilterMessage(msgGivingUp).All()
	require.Len(t, entries, 3)
	assert.Equal(t, int64(1000), entries[2].ContextMap()["count"], "999 held, and itself")
	assert.Equal(t, 2, script.Len(), "one 429 each: the rest failed at once")
}

func TestLogSamplerBounded(t *testing.T) {
	var s logSampler
	now := time.Now()
	for i := range 3 * maxSampled {
		u, err := url.Parse("https://h" + itoa(i) + ".example.com")
		require.NoError(t, err)
		n, ok := s.take(msgGivingUp, u, now)
		require.True(t, ok)
		require.Equal(t, 1, n)
	}
	assert.LessOrEqual(t, len(s.last), maxSampled)
}
