package retryhttp

import (
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
		want counts
	}{
		{"1 s a request against 0.2 s: the first", append(openAI("10", "0", "10s"), ietf("100", "0", "20")...),
			counts{limit: 10, remaining: 0, window: 10 * time.Second, res: time.Millisecond, ok: true}},
		{"1 s a request against 5 s: the second", append(openAI("10", "0", "10s"), ietf("10", "8", "10")...),
			counts{limit: 10, remaining: 8, window: 10 * time.Second, res: time.Second, ok: true}},
		{"5 s a request against 1 s: the first", append(openAI("10", "8", "10s"), ietf("10", "0", "10")...),
			counts{limit: 10, remaining: 8, window: 10 * time.Second, res: time.Millisecond, ok: true}},
		{"0.5 s a request against 2 s, in the middle set", append(openAI("40", "20", "10s"), anthropic("10", "5", 10*time.Second)...),
			counts{limit: 10, remaining: 5, window: 10 * time.Second, res: time.Second, ok: true}},
		{"nothing spent, then some: the second", append(openAI("10", "10", "1s"), ietf("10", "5", "10")...),
			counts{limit: 10, remaining: 5, window: 10 * time.Second, res: time.Second, ok: true}},
		{"some spent, then nothing: the first", append(openAI("10", "5", "10s"), ietf("10", "10", "30")...),
			counts{limit: 10, remaining: 5, window: 10 * time.Second, res: time.Millisecond, ok: true}},
		{"as slow, 2 s a request each: the first", append(openAI("10", "5", "10s"), ietf("20", "10", "20")...),
			counts{limit: 10, remaining: 5, window: 10 * time.Second, res: time.Millisecond, ok: true}},
		{"as slow, the other way round: the first", append(openAI("20", "10", "20s"), ietf("10", "5", "10")...),
			counts{limit: 20, remaining: 10, window: 20 * time.Second, res: time.Millisecond, ok: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, requestCounts(headerOf(tc.h...), epoch))
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
