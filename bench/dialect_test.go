package bench

import (
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDialectNames(t *testing.T) {
	for _, d := range Dialects() {
		got, ok := DialectByName(d.String())
		assert.True(t, ok, d.String())
		assert.Equal(t, d, got)
		assert.NotEqual(t, d.String(), d.Description(), "%s has no description", d)
	}
	_, ok := DialectByName("OpenAI")
	assert.False(t, ok, "names are lower case, as typed on the command line")
	assert.Equal(t, "Dialect(9)", Dialect(9).String())
	assert.Equal(t, OpenAIDialect, Dialect(0), "the zero Dialect is today's provider")
}

// TestDialectAnswer checks every header and body each dialect writes for
// one admitted and one refused request, at a fixed instant.
func TestDialectAnswer(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 250_000_000, time.UTC)
	admit := Decision{OK: true, Remaining: 3, Reset: 600 * time.Millisecond}
	refuse := Decision{Remaining: 0, Next: 13*time.Millisecond + 1, Reset: 1500 * time.Millisecond}
	openAICounts := http.Header{
		"X-Ratelimit-Limit-Requests":     {"10"},
		"X-Ratelimit-Remaining-Requests": {"0"},
		"X-Ratelimit-Reset-Requests":     {"1.5s"},
	}
	anthropicCounts := http.Header{
		"Anthropic-Ratelimit-Requests-Limit":     {"10"},
		"Anthropic-Ratelimit-Requests-Remaining": {"0"},
		"Anthropic-Ratelimit-Requests-Reset":     {"2026-01-02T03:04:07Z"}, // 05.25 + 1.5, rounded up
	}
	with := func(h http.Header, kv ...string) http.Header {
		h = h.Clone()
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, tc := range []struct {
		d          Dialect
		onAdmit    http.Header
		onRefuse   http.Header
		refuseBody []byte
	}{
		{OpenAIDialect,
			http.Header{"X-Ratelimit-Limit-Requests": {"10"}, "X-Ratelimit-Remaining-Requests": {"3"}, "X-Ratelimit-Reset-Requests": {"600ms"}},
			with(openAICounts, "Retry-After-Ms", "14", "Retry-After", "1", "Content-Type", "application/json"),
			RateLimitBody},
		{AnthropicDialect,
			http.Header{"Anthropic-Ratelimit-Requests-Limit": {"10"}, "Anthropic-Ratelimit-Requests-Remaining": {"3"}, "Anthropic-Ratelimit-Requests-Reset": {"2026-01-02T03:04:06Z"}},
			with(anthropicCounts, "Retry-After", "1", "Content-Type", "application/json"),
			anthropicLimitBody},
		{RetryAfterDialect, http.Header{},
			http.Header{"Retry-After": {"1"}, "Content-Type": {"application/json"}},
			retryAfterLimitBody},
		{GeminiDialect, http.Header{},
			http.Header{"Content-Type": {"application/json"}},
			[]byte(`{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.013000001s"}]}}`)},
		{BareDialect, http.Header{},
			http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
			bareLimitBody},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			h := http.Header{}
			assert.Nil(t, tc.d.answer(h, admit, 10, now), "a 200's body is the completion")
			assert.Equal(t, tc.onAdmit, h, "on a 200")
			h = http.Header{}
			assert.Equal(t, string(tc.refuseBody), string(tc.d.answer(h, refuse, 10, now)))
			assert.Equal(t, tc.onRefuse, h, "on a 429")
		})
	}
}

// TestDialectLimitIsTheBucket checks the fix of the OpenAI headers: with
// the bucket's capacity as the limit, a client computes the refill rate
// from one response.
func TestDialectLimitIsTheBucket(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	const rate, burst = 100, 10
	b := NewBucket(rate, burst, t0)
	var dec Decision
	for range 4 {
		dec = b.Take(t0)
	}
	h := http.Header{}
	OpenAIDialect.answer(h, dec, burst, t0)
	limit, remaining := h.Get("X-Ratelimit-Limit-Requests"), h.Get("X-Ratelimit-Remaining-Requests")
	reset, err := time.ParseDuration(h.Get("X-Ratelimit-Reset-Requests"))
	require.NoError(t, err)
	require.Equal(t, []string{"10", "6"}, []string{limit, remaining})
	assert.InDelta(t, rate, float64(10-6)/reset.Seconds(), 1e-9, "(limit − remaining) / reset")
}

func TestFormatProtoDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{13 * time.Second, "13s"},
		{13 * time.Millisecond, "0.013s"},
		{13*time.Millisecond + 1, "0.013000001s"},
		{1500 * time.Microsecond, "0.001500s"},
		{time.Nanosecond, "0.000000001s"},
		{45*time.Second + 837906927, "45.837906927s"},
		{90 * time.Second, "90s"},
	} {
		got := FormatProtoDuration(tc.d)
		assert.Equal(t, tc.want, got, "%v", tc.d)
		// What Gemini sends, retryhttp reads back exactly.
		assert.Equal(t, retryhttp.BodyHint{RetryAfter: tc.d}, retryhttp.ParseErrorBody(GeminiLimitBody(tc.d)), "%v", tc.d)
	}
}

func TestFormatResetTime(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{at("2026-01-02T03:04:05Z"), "2026-01-02T03:04:05Z"},
		{at("2026-01-02T03:04:05.000000001Z"), "2026-01-02T03:04:06Z"},
		{at("2026-01-02T03:04:05.999Z"), "2026-01-02T03:04:06Z"},
		{at("2026-01-02T04:04:05.5+01:00"), "2026-01-02T03:04:06Z"},
		{at("2026-12-31T23:59:59.1Z"), "2027-01-01T00:00:00Z"},
	} {
		got := FormatResetTime(tc.t)
		assert.Equal(t, tc.want, got, "%v", tc.t)
		back, err := time.Parse(time.RFC3339, got)
		if assert.NoError(t, err) {
			assert.False(t, back.Before(tc.t), "%s is earlier than %v", got, tc.t)
		}
	}
}
