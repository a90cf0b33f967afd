package signal

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Tests of requestCounts (ratelimit.go): the provider's request counts, read
// for the Cooldown's pace (R17).

// TestRequestCountsTwoSets: when a response carries two sets of request
// counts (R17), the slowest wins: the longest window per request spent, in
// either order of the sets, and of two as slow the first (OpenAI's, then
// Anthropic's, then the IETF draft's); a set with nothing spent yet says
// nothing of the rate, so any set that has spent some wins over it.
func TestRequestCountsTwoSets(t *testing.T) {
	openAI := func(limit, remaining, reset string) []string {
		return []string{"X-Ratelimit-Limit-Requests", limit, "X-Ratelimit-Remaining-Requests", remaining, "X-Ratelimit-Reset-Requests", reset}
	}
	ietf := func(limit, remaining, reset string) []string {
		return []string{"Ratelimit-Limit", limit, "Ratelimit-Remaining", remaining, "Ratelimit-Reset", reset}
	}
	anthropic := func(limit, remaining string, reset time.Duration) []string {
		return []string{"Anthropic-Ratelimit-Requests-Limit", limit, "Anthropic-Ratelimit-Requests-Remaining", remaining,
			"Anthropic-Ratelimit-Requests-Reset", epoch.Add(reset).Format(time.RFC3339)}
	}
	for _, tc := range []struct {
		name string
		h    []string
		want Counts
	}{
		{"1 s a request against 0.2 s: the first", append(openAI("10", "0", "10s"), ietf("100", "0", "20")...),
			Counts{Limit: 10, Remaining: 0, Window: 10 * time.Second, Res: time.Millisecond, OK: true}},
		{"1 s a request against 5 s: the second", append(openAI("10", "0", "10s"), ietf("10", "8", "10")...),
			Counts{Limit: 10, Remaining: 8, Window: 10 * time.Second, Res: time.Second, OK: true}},
		{"5 s a request against 1 s: the first", append(openAI("10", "8", "10s"), ietf("10", "0", "10")...),
			Counts{Limit: 10, Remaining: 8, Window: 10 * time.Second, Res: time.Millisecond, OK: true}},
		{"0.5 s a request against 2 s, in the middle set", append(openAI("40", "20", "10s"), anthropic("10", "5", 10*time.Second)...),
			Counts{Limit: 10, Remaining: 5, Window: 10 * time.Second, Res: time.Second, OK: true}},
		{"nothing spent, then some: the second", append(openAI("10", "10", "1s"), ietf("10", "5", "10")...),
			Counts{Limit: 10, Remaining: 5, Window: 10 * time.Second, Res: time.Second, OK: true}},
		{"some spent, then nothing: the first", append(openAI("10", "5", "10s"), ietf("10", "10", "30")...),
			Counts{Limit: 10, Remaining: 5, Window: 10 * time.Second, Res: time.Millisecond, OK: true}},
		{"as slow, 2 s a request each: the first", append(openAI("10", "5", "10s"), ietf("20", "10", "20")...),
			Counts{Limit: 10, Remaining: 5, Window: 10 * time.Second, Res: time.Millisecond, OK: true}},
		{"as slow, the other way round: the first", append(openAI("20", "10", "20s"), ietf("10", "5", "10")...),
			Counts{Limit: 20, Remaining: 10, Window: 20 * time.Second, Res: time.Millisecond, OK: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, RequestCounts(headerOf(tc.h...), epoch))
		})
	}
}

// TestParseCount: a count is a plain non-negative integer, read exactly
// while it fits, saturating rather than wrapping past it.
func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   int64
		wantOK bool
	}{
		{"0", 0, true}, {"007", 7, true}, {"5000", 5000, true},
		{"4611686018427387900", 4611686018427387900, true},
		{"", 0, false}, {"-1", 0, false}, {"1.5", 0, false}, {"12a", 0, false},
	} {
		got, ok := parseCount(tc.in)
		assert.Equal(t, tc.wantOK, ok, "parseCount(%q) ok", tc.in)
		assert.Equal(t, tc.want, got, "parseCount(%q)", tc.in)
	}
	huge, ok := parseCount("99999999999999999999999")
	assert.True(t, ok)
	assert.GreaterOrEqual(t, huge, int64(4611686018427387900), "saturated, never wrapped")
}

// TestResetResolution: a reset's resolution is the unit of its last figure,
// in every form requestCounts reads (R17).
func TestResetResolution(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"20ms", time.Millisecond}, {"1.5ms", 100 * time.Microsecond},
		{"6m0s", time.Second}, {"1.5s", 100 * time.Millisecond}, {"0.25s", 10 * time.Millisecond},
		{"1h", time.Second}, {"90us", time.Microsecond}, {"1.5µs", 100 * time.Nanosecond},
		{"2μs", time.Microsecond}, {"5ns", time.Nanosecond},
		{"30", time.Second}, {"1.5", 100 * time.Millisecond}, {".5", 100 * time.Millisecond},
		{"0.000000000001", time.Nanosecond}, // below a nanosecond: a nanosecond
		{"2026-11-30T12:00:01Z", time.Second},
		{"2026-11-30T12:00:01.5Z", 100 * time.Millisecond},
		{"2026-11-30T12:00:01.123-05:00", time.Millisecond},
		{"2026-11-30T12:00:01+01:00", time.Second},
	} {
		assert.Equal(t, tc.want, resetResolution(tc.in), "resetResolution(%q)", tc.in)
	}
}

// TestRequestCounts reads the providers' request counts for pacing.
func TestRequestCounts(t *testing.T) {
	now := epoch
	for _, tc := range []struct {
		name string
		h    []string
		want Counts
	}{
		{"openai", []string{"X-Ratelimit-Limit-Requests", "10", "X-Ratelimit-Remaining-Requests", "3", "X-Ratelimit-Reset-Requests", "70ms"},
			Counts{10, 3, 70 * time.Millisecond, time.Millisecond, true}},
		{"openai minutes", []string{"X-Ratelimit-Limit-Requests", "500", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1m0s"},
			Counts{500, 0, time.Minute, time.Millisecond, true}},
		{"openai fraction", []string{"X-Ratelimit-Limit-Requests", "500", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1.5s"},
			Counts{500, 0, 1500 * time.Millisecond, time.Millisecond, true}},
		{"anthropic", []string{"Anthropic-Ratelimit-Requests-Limit", "50", "Anthropic-Ratelimit-Requests-Remaining", "49",
			"Anthropic-Ratelimit-Requests-Reset", now.Add(2 * time.Second).Format(time.RFC3339)},
			Counts{50, 49, 2 * time.Second, time.Second, true}},
		{"anthropic fraction", []string{"Anthropic-Ratelimit-Requests-Limit", "50", "Anthropic-Ratelimit-Requests-Remaining", "49",
			"Anthropic-Ratelimit-Requests-Reset", now.Add(1500 * time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")},
			Counts{50, 49, 1500 * time.Millisecond, time.Millisecond, true}},
		{"ietf", []string{"Ratelimit-Limit", "100", "Ratelimit-Remaining", "0", "Ratelimit-Reset", "30"},
			Counts{100, 0, 30 * time.Second, time.Second, true}},
		{"the slowest of two wins", []string{"X-Ratelimit-Limit-Requests", "10", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "100ms",
			"Ratelimit-Limit", "10", "Ratelimit-Remaining", "0", "Ratelimit-Reset", "10"},
			Counts{10, 0, 10 * time.Second, time.Second, true}},
		{"azure's -1", []string{"X-Ratelimit-Limit-Requests", "10", "X-Ratelimit-Remaining-Requests", "-1", "X-Ratelimit-Reset-Requests", "1s"}, Counts{}},
		{"no limit", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1s"}, Counts{}},
		{"tokens are not requests", []string{"X-Ratelimit-Limit-Tokens", "10", "X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "1s"}, Counts{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.h); i += 2 {
				h.Set(tc.h[i], tc.h[i+1])
			}
			assert.Equal(t, tc.want, RequestCounts(h, now))
		})
	}
}
