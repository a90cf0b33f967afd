package bench

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDialectNames(t *testing.T) {
	for _, d := range retryhttptest.Dialects() {
		got, ok := DialectByName(d.String())
		assert.True(t, ok, d.String())
		assert.Equal(t, d, got)
		for _, tokens := range []bool{false, true} {
			assert.NotEqual(t, d.String(), Describe(d, tokens), "%s has no description", d)
		}
	}
	_, ok := DialectByName("OpenAI")
	assert.False(t, ok, "names are lower case, as typed on the command line")
	assert.Equal(t, "Dialect(9)", Describe(9, false))
	assert.Contains(t, Describe(retryhttptest.OpenAIDialect, true), "-tokens")
}

// TestDialectLimitIsTheBucket checks why the goodput provider's OpenAI
// limit is the bucket's size: with it, a client computes the refill rate
// from one response, (limit − remaining) / reset, for requests and tokens
// alike.
func TestDialectLimitIsTheBucket(t *testing.T) {
	clk := retryhttptest.NewClock()
	cfg := GoodputConfig{Rate: 100, Burst: 10, TokenRate: 50000, TokenBurst: 50000}.providerConfig()
	cfg.Clock = clk
	p := retryhttptest.NewProvider(cfg)
	var h http.Header
	for range 4 {
		req, _ := http.NewRequest(http.MethodPost, "http://provider/", strings.NewReader(strings.Repeat("a", 4000)))
		resp, err := p.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		h = resp.Header
	}
	for _, tc := range []struct {
		limit, remaining string
		rate             float64
	}{
		{"Requests", "6", 100},
		{"Tokens", "46000", 50000},
	} {
		limit, remaining := h.Get("X-Ratelimit-Limit-"+tc.limit), h.Get("X-Ratelimit-Remaining-"+tc.limit)
		reset, err := time.ParseDuration(h.Get("X-Ratelimit-Reset-" + tc.limit))
		require.NoError(t, err)
		require.Equal(t, tc.remaining, remaining)
		l, _ := strconv.ParseFloat(limit, 64)
		r, _ := strconv.ParseFloat(remaining, 64)
		assert.InDelta(t, tc.rate, (l-r)/reset.Seconds(), 1e-9, "%s: (limit − remaining) / reset", tc.limit)
	}
}
