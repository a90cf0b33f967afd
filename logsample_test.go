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
	clk := newClock()
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

// TestLogSamplerBounded: lines of 3×maxSampled providers in one instant
// take maxSampled rooms and one spill: the first past the bound is
// written, the rest held, and a second later the next entry carries them.
func TestLogSamplerBounded(t *testing.T) {
	var s logSampler
	now := time.Now()
	for i := range 3 * maxSampled {
		u, err := url.Parse("https://h" + itoa(i) + ".example.com")
		require.NoError(t, err)
		n, ok := s.take(msgGivingUp, u, now)
		require.Equal(t, i <= maxSampled, ok, "provider %d", i)
		require.Equal(t, map[bool]int{true: 1, false: 0}[ok], n, "provider %d", i)
	}
	assert.LessOrEqual(t, len(s.last), maxSampled)
	assert.Equal(t, maxSampled, s.order.Len())
	assert.Len(t, s.spill, 1, "one for each message")
	n, ok := s.take(msgGivingUp, &url.URL{Scheme: "https", Host: "new.example.com"}, now.Add(sampleEvery))
	assert.True(t, ok)
	assert.Equal(t, 2*maxSampled-1+1, n, "the lines held past the bound, and itself")
}

// TestLogSamplerPastItsBound: with more providers than the sampler
// remembers (maxSampled+76, each giving up three times a second for five
// seconds, in turn or three in a row), it writes about one line a second
// for each, and every line is counted once: the counts written, and those
// the last lines write, add up to the lines taken. (It forgot everything
// at maxSampled: lines in turn were all written, and the counts of lines
// in a row were lost.) From any instant.
func TestLogSamplerPastItsBound(t *testing.T) {
	const providers, perSecond, seconds = maxSampled + 76, 3, 5
	urls := make([]*url.URL, providers)
	for i := range urls {
		urls[i] = &url.URL{Scheme: "https", Host: "h" + itoa(i) + ".example.com"}
	}
	orders := map[string]func(i int) int{
		"in turn":  func(i int) int { return i % providers },
		"in a row": func(i int) int { return i / perSecond % providers },
	}
	for name, order := range orders {
		for _, start := range []time.Time{{}, time.Unix(0, 0), time.Unix(-1e9, 0), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)} {
			var s logSampler
			now, step := start, time.Second/(providers*perSecond)
			taken, written, counted := 0, 0, 0
			take := func(u *url.URL) bool {
				taken++
				n, ok := s.take(msgGivingUp, u, now)
				if ok {
					written++
					counted += n
				}
				return ok
			}
			for i := range providers * perSecond * seconds {
				take(urls[order(i)])
				now = now.Add(step)
			}
			assert.LessOrEqual(t, written, (providers+1)*(seconds+1), "%s, from %v: about a line a second for each", name, start)
			now = now.Add(sampleEvery) // each once more: what each held comes out
			for _, u := range urls {
				take(u)
			}
			now = now.Add(sampleEvery) // and a provider never seen: what the last lines left
			assert.True(t, take(&url.URL{Scheme: "https", Host: "new.example.com"}))
			assert.Equal(t, taken, counted, "%s, from %v: every line counted once", name, start)
		}
	}
}
