package retryhttp

import (
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// rateLimitResetTest is a row of TestParseRateLimitReset, read at epoch.
type rateLimitResetTest struct {
	name   string
	header []string // name, value pairs
	want   time.Duration
	wantOK bool
}

// rfcAt is epoch+d as Anthropic writes a reset.
func rfcAt(d time.Duration) string { return epoch.Add(d).Format(time.RFC3339Nano) }

var rateLimitResetTests = []rateLimitResetTest{
	{"absent", nil, 0, false},
	{"unrelated headers", []string{"Retry-After", "5", "X-Request-Id", "req_1", "Content-Type", "application/json"}, 0, false},

	// OpenAI and Azure: a duration as OpenAI writes it, or bare seconds.
	{"openai requests 1s", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1s"}, time.Second, true},
	{"openai tokens 6m0s", []string{"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "6m0s"}, 6 * time.Minute, true},
	{"openai 20ms", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "20ms"}, 20 * time.Millisecond, true},
	{"openai 1m30.5s", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1m30.5s"}, 90*time.Second + 500*time.Millisecond, true},
	{"openai 1h2m3s", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1h2m3s"}, time.Hour + 2*time.Minute + 3*time.Second, true},
	{"openai 59.123s", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "59.123s"}, 59123 * time.Millisecond, true},
	{"openai 1.5h", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1.5h"}, 90 * time.Minute, true},
	{"openai micro and nano units", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1ms2us3µs4μs5ns"}, time.Millisecond + 9*time.Microsecond + 5, true},
	{"openai bare seconds", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "17"}, 17 * time.Second, true},
	{"openai bare fraction", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "0.5"}, 500 * time.Millisecond, true},
	{"openai reset 0s", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "0s"}, 0, true},
	{"openai remaining 00", []string{"X-Ratelimit-Remaining-Requests", "00", "X-Ratelimit-Reset-Requests", "2s"}, 2 * time.Second, true},
	{"both exhausted: tokens longer", []string{
		"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1s",
		"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "6m0s",
	}, 6 * time.Minute, true},
	{"both exhausted: requests longer", []string{
		"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1h",
		"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "59m59s",
	}, time.Hour, true},
	{"only tokens exhausted: requests reset ignored", []string{
		"X-Ratelimit-Remaining-Requests", "4999", "X-Ratelimit-Reset-Requests", "1h",
		"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "12ms",
	}, 12 * time.Millisecond, true},
	{"remaining above 0", []string{"X-Ratelimit-Remaining-Requests", "1", "X-Ratelimit-Reset-Requests", "1s"}, 0, false},
	{"azure remaining -1", []string{"X-Ratelimit-Remaining-Requests", "-1", "X-Ratelimit-Reset-Requests", "1s"}, 0, false},
	{"azure -1 with an exhausted other limit", []string{
		"X-Ratelimit-Remaining-Requests", "-1", "X-Ratelimit-Reset-Requests", "1h",
		"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "3s",
	}, 3 * time.Second, true},
	{"remaining -0", []string{"X-Ratelimit-Remaining-Requests", "-0", "X-Ratelimit-Reset-Requests", "1s"}, 0, false},
	{"remaining fraction", []string{"X-Ratelimit-Remaining-Requests", "0.0", "X-Ratelimit-Reset-Requests", "1s"}, 0, false},
	{"remaining junk", []string{"X-Ratelimit-Remaining-Requests", "none", "X-Ratelimit-Reset-Requests", "1s"}, 0, false},
	{"remaining empty", []string{"X-Ratelimit-Remaining-Requests", "", "X-Ratelimit-Reset-Requests", "1s"}, 0, false},
	{"remaining missing", []string{"X-Ratelimit-Reset-Requests", "1s"}, 0, false},
	{"reset missing", []string{"X-Ratelimit-Remaining-Requests", "0"}, 0, false},
	{"reset empty", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", " "}, 0, false},
	{"pairs do not mix: requests remaining, tokens reset", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Tokens", "1s"}, 0, false},
	{"openai negative", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "-1s"}, 0, false},
	{"openai plus sign", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "+1s"}, 0, false},
	{"openai unknown unit", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1d"}, 0, false},
	{"openai uppercase unit", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1S"}, 0, false},
	{"openai unit without count", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "s"}, 0, false},
	{"openai count without unit after a unit", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1m30"}, 0, false},
	{"openai leading dot", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", ".5s"}, 0, false},
	{"openai trailing dot", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1.s"}, 0, false},
	{"openai exponent", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1e3s"}, 0, false},
	{"openai inner space", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1m 30s"}, 0, false},
	{"openai junk", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "soon"}, 0, false},
	{"openai huge saturates", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "99999999999999999999999h"}, maxDuration, true},
	{"openai sum saturates", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "2562047h47m16.854775807s1ns"}, maxDuration, true},
	{"openai largest duration exactly", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "2562047h47m16.854775807s"}, maxDuration, true},
	{"openai saturated, then junk", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "99999999999999999999hx"}, 0, false},
	{"openai huge bare seconds saturate", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "99999999999999999999999"}, maxDuration, true},
	{"whitespace around", []string{"X-Ratelimit-Remaining-Requests", " \t0 ", "X-Ratelimit-Reset-Requests", "\t1m30s  "}, 90 * time.Second, true},

	// Anthropic: an RFC 3339 time, relative to now.
	{"anthropic requests", []string{"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", rfcAt(30 * time.Second)}, 30 * time.Second, true},
	{"anthropic tokens", []string{"Anthropic-Ratelimit-Tokens-Remaining", "0", "Anthropic-Ratelimit-Tokens-Reset", rfcAt(2 * time.Minute)}, 2 * time.Minute, true},
	{"anthropic input tokens", []string{"Anthropic-Ratelimit-Input-Tokens-Remaining", "0", "Anthropic-Ratelimit-Input-Tokens-Reset", rfcAt(45 * time.Second)}, 45 * time.Second, true},
	{"anthropic output tokens", []string{"Anthropic-Ratelimit-Output-Tokens-Remaining", "0", "Anthropic-Ratelimit-Output-Tokens-Reset", rfcAt(1500 * time.Millisecond)}, 1500 * time.Millisecond, true},
	{"anthropic time with an offset", []string{"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", epoch.Add(time.Minute).In(time.FixedZone("", -5*3600)).Format(time.RFC3339)}, time.Minute, true},
	{"anthropic past time is 0", []string{"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", rfcAt(-time.Hour)}, 0, true},
	{"anthropic reset now is 0", []string{"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", rfcAt(0)}, 0, true},
	{"anthropic longest of four", []string{
		"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", rfcAt(time.Second),
		"Anthropic-Ratelimit-Tokens-Remaining", "0", "Anthropic-Ratelimit-Tokens-Reset", rfcAt(time.Minute),
		"Anthropic-Ratelimit-Input-Tokens-Remaining", "0", "Anthropic-Ratelimit-Input-Tokens-Reset", rfcAt(50 * time.Second),
		"Anthropic-Ratelimit-Output-Tokens-Remaining", "0", "Anthropic-Ratelimit-Output-Tokens-Reset", rfcAt(-time.Minute),
	}, time.Minute, true},
	{"anthropic remaining above 0", []string{"Anthropic-Ratelimit-Tokens-Remaining", "12000", "Anthropic-Ratelimit-Tokens-Reset", rfcAt(time.Minute)}, 0, false},
	{"anthropic not RFC 3339", []string{"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", epoch.Add(time.Minute).Format(http.TimeFormat)}, 0, false},
	{"anthropic seconds are not a time", []string{"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", "30"}, 0, false},
	{"anthropic junk", []string{"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", "2026-13-45T99:00:00Z"}, 0, false},
	{"anthropic far future saturates", []string{"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", "9999-12-31T23:59:59Z"}, maxDuration, true},
	{"anthropic whitespace", []string{"Anthropic-Ratelimit-Requests-Remaining", "\t0", "Anthropic-Ratelimit-Requests-Reset", " " + rfcAt(time.Second) + "\t"}, time.Second, true},

	// The IETF draft, separate fields.
	{"ietf reset seconds", []string{"Ratelimit-Remaining", "0", "Ratelimit-Reset", "30"}, 30 * time.Second, true},
	{"ietf reset fraction", []string{"Ratelimit-Remaining", "0", "Ratelimit-Reset", "1.5"}, 1500 * time.Millisecond, true},
	{"ietf remaining above 0", []string{"Ratelimit-Remaining", "7", "Ratelimit-Reset", "30"}, 0, false},
	{"ietf reset with unit", []string{"Ratelimit-Remaining", "0", "Ratelimit-Reset", "30s"}, 0, false},
	{"ietf reset negative", []string{"Ratelimit-Remaining", "0", "Ratelimit-Reset", "-30"}, 0, false},
	{"ietf reset huge saturates", []string{"Ratelimit-Remaining", "0", "Ratelimit-Reset", "99999999999999999999"}, maxDuration, true},

	// The IETF draft, the structured RateLimit field.
	{"structured", []string{"RateLimit", `"default";r=0;t=30`}, 30 * time.Second, true},
	{"structured token name", []string{"RateLimit", `default;r=0;t=30`}, 30 * time.Second, true},
	{"structured params in any order, with others", []string{"RateLimit", `"day";t=3600;pk=:cHJvamVjdA==:;r=0`}, time.Hour, true},
	{"structured not exhausted", []string{"RateLimit", `"default";r=50;t=30`}, 0, false},
	{"structured several items, longest exhausted", []string{"RateLimit", `"burst";r=0;t=1, "minute";r=0;t=60, "day";r=100;t=86400`}, time.Minute, true},
	{"structured several lines are one list", []string{"RateLimit", `"burst";r=0;t=1`, "RateLimit", `"hour";r=0;t=3600`}, time.Hour, true},
	{"structured comma and semicolon inside a name", []string{"RateLimit", `"a,b;r=9" ; r=0 ; t=5,"c\"d";r=0;t=6`}, 6 * time.Second, true},
	{"structured repeated param: the last counts", []string{"RateLimit", `"p";r=5;t=9;r=0`}, 9 * time.Second, true},
	{"structured whitespace", []string{"RateLimit", " \t\"p\";r=0;t=4 \t,  \"q\";r=1;t=99\t"}, 4 * time.Second, true},
	{"structured missing t", []string{"RateLimit", `"p";r=0`}, 0, false},
	{"structured missing r", []string{"RateLimit", `"p";t=30`}, 0, false},
	{"structured negative r", []string{"RateLimit", `"p";r=-1;t=30`}, 0, false},
	{"structured negative t", []string{"RateLimit", `"p";r=0;t=-30`}, 0, false},
	{"structured bad item does not spoil the others", []string{"RateLimit", `;r=0;t=99, "ok";r=0;t=2, "x"y;r=0;t=99`}, 2 * time.Second, true},
	{"structured unterminated string", []string{"RateLimit", `"p;r=0;t=30`}, 0, false},
	{"structured huge t saturates", []string{"RateLimit", `"p";r=0;t=999999999999999999999`}, maxDuration, true},
	{"structured pre-08 dictionary is not read", []string{"RateLimit", `limit=100, remaining=0, reset=30`}, 0, false},
	{"structured junk", []string{"RateLimit", `;;;,,,"""=`}, 0, false},

	// Every form at once: the longest wins.
	{"longest across providers", []string{
		"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "20s",
		"Anthropic-Ratelimit-Tokens-Remaining", "0", "Anthropic-Ratelimit-Tokens-Reset", rfcAt(40 * time.Second),
		"Ratelimit-Remaining", "0", "Ratelimit-Reset", "10",
		"RateLimit", `"p";r=0;t=30`,
	}, 40 * time.Second, true},

	// Duplicates: the first value, as http.Header.Get.
	{"duplicate remaining: the first counts", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Remaining-Requests", "5", "X-Ratelimit-Reset-Requests", "1s"}, time.Second, true},
	{"duplicate remaining: the first is not 0", []string{"X-Ratelimit-Remaining-Requests", "5", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1s"}, 0, false},
	{"duplicate reset: the first counts", []string{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1s", "X-Ratelimit-Reset-Requests", "1h"}, time.Second, true},

	// Names in any case, through http.Header's canonicalization.
	{"lowercase names", []string{"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "3s"}, 3 * time.Second, true},
	{"uppercase names", []string{"ANTHROPIC-RATELIMIT-REQUESTS-REMAINING", "0", "ANTHROPIC-RATELIMIT-REQUESTS-RESET", rfcAt(time.Second)}, time.Second, true},
}

func TestParseRateLimitReset(t *testing.T) {
	for _, tt := range rateLimitResetTests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRateLimitReset(headerOf(tt.header...), epoch)
			assert.Equal(t, tt.want, got, "ParseRateLimitReset(%q)", tt.header)
			assert.Equal(t, tt.wantOK, ok, "ParseRateLimitReset(%q) ok", tt.header)
		})
	}
}

// TestParseRateLimitResetEdges: a limit is read from its own pair of
// headers only, whatever others the response has (some as long as R18's
// names); a reset is exact to the nanosecond below the largest Duration, a
// count after a unit reads whatever its digits, and a time long past is 0,
// with ok (R18).
func TestParseRateLimitResetEdges(t *testing.T) {
	const remaining, reset = "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"
	for _, tc := range []struct {
		name   string
		header []string // name, value pairs
		want   time.Duration
		wantOK bool
	}{
		{"reset missing, other headers", []string{remaining, "0", "Retry-After", "5", "X-Request-Id", "req_1"}, 0, false},
		{"reset missing, a limit as long as its name", []string{remaining, "0", "X-Ratelimit-Limit-Requests", "5000"}, 0, false},
		{"openai 1m9s", []string{remaining, "0", reset, "1m9s"}, 69 * time.Second, true},
		{"openai nanoseconds just under the largest, exact", []string{remaining, "0", reset, "9223372036854775800ns"}, maxDuration - 7, true},
		{"openai hours to the nanosecond: a 12th digit of an hour is 3.6 ns", []string{remaining, "0", reset, "0.007547562047h"}, 27171223369, true},
		{"openai an hour's nines, floored once", []string{remaining, "0", reset, "0.9999999999999999999999h"}, time.Hour - 1, true},
		{"openai minutes to the nanosecond", []string{remaining, "0", reset, "1.00000000001m"}, time.Minute, true},
		{"openai a minute's nines", []string{remaining, "0", reset, "0.99999999999m"}, time.Minute - 1, true},
		{"anthropic year 0999 is past: 0", []string{"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", "0999-12-31T23:59:59Z"}, 0, true},
	} {
		got, ok := ParseRateLimitReset(headerOf(tc.header...), epoch)
		assert.Equal(t, tc.want, got, tc.name)
		assert.Equal(t, tc.wantOK, ok, tc.name)
	}
}

// TestParseRateLimitResetHandBuilt: a Header map built by hand, not through
// Set or Add, may hold names in any spelling; the canonical one wins, and
// the answer does not depend on the map's order.
func TestParseRateLimitResetHandBuilt(t *testing.T) {
	tests := []struct {
		name   string
		h      http.Header
		want   time.Duration
		wantOK bool
	}{
		{"nil", nil, 0, false},
		{"empty value lists", http.Header{"X-Ratelimit-Remaining-Requests": {}, "X-Ratelimit-Reset-Requests": {}}, 0, false},
		{"lowercase keys", http.Header{"x-ratelimit-remaining-requests": {"0"}, "x-ratelimit-reset-requests": {"2s"}}, 2 * time.Second, true},
		{"mixed case keys", http.Header{"RateLimit": {`"p";r=0;t=8`}}, 8 * time.Second, true},
		{"canonical remaining wins", http.Header{
			"X-Ratelimit-Remaining-Requests": {"5"},
			"x-ratelimit-remaining-requests": {"0"},
			"X-RATELIMIT-REMAINING-REQUESTS": {"0"},
			"x-ratelimit-reset-requests":     {"2s"},
		}, 0, false},
		{"canonical reset wins", http.Header{
			"x-ratelimit-remaining-requests": {"0"},
			"x-ratelimit-reset-requests":     {"1h"},
			"X-Ratelimit-Reset-Requests":     {"2s"},
		}, 2 * time.Second, true},
		{"empty canonical list yields to another spelling", http.Header{
			"X-Ratelimit-Remaining-Requests": {},
			"x-ratelimit-remaining-requests": {"0"},
			"X-Ratelimit-Reset-Requests":     {"2s"},
		}, 2 * time.Second, true},
		{"without the canonical one, the smallest spelling", http.Header{
			"x-ratelimit-remaining-requests": {"0"},
			"X-RATELIMIT-REMAINING-REQUESTS": {"9"}, // smaller: upper case sorts first
			"x-ratelimit-reset-requests":     {"2s"},
		}, 0, false},
		{"a longer name is another header", http.Header{"X-Ratelimit-Remaining-Requests-2": {"0"}, "X-Ratelimit-Reset-Requests": {"1s"}}, 0, false},
		{"a shorter name is another header", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1s"}}, 0, false},
		{"empty key", http.Header{"": {"0"}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 { // map order changes from one range to the next
				got, ok := ParseRateLimitReset(tt.h, epoch)
				assert.Equal(t, tt.want, got)
				assert.Equal(t, tt.wantOK, ok)
			}
		})
	}
}

// TestParseRateLimitResetPure: the function leaves the header as it found it.
func TestParseRateLimitResetPure(t *testing.T) {
	h := http.Header{"x-ratelimit-remaining-requests": {"0"}, "X-Ratelimit-Reset-Requests": {"1s"}, "Ratelimit": {`"p";r=0;t=2`}}
	want := h.Clone()
	_, _ = ParseRateLimitReset(h, epoch)
	assert.Equal(t, want, h)
}

// openAISuccessHeader is what OpenAI sends with a 200: every limit left.
func openAISuccessHeader() http.Header {
	h := http.Header{}
	for _, kv := range [][2]string{
		{"Content-Type", "application/json"}, {"Date", "Mon, 30 Nov 2026 12:00:00 GMT"},
		{"Openai-Organization", "org-1"}, {"Openai-Processing-Ms", "312"}, {"Openai-Version", "2020-10-01"},
		{"X-Ratelimit-Limit-Requests", "5000"}, {"X-Ratelimit-Limit-Tokens", "800000"},
		{"X-Ratelimit-Remaining-Requests", "4999"}, {"X-Ratelimit-Remaining-Tokens", "799975"},
		{"X-Ratelimit-Reset-Requests", "12ms"}, {"X-Ratelimit-Reset-Tokens", "1ms"},
		{"X-Request-Id", "req_123"}, {"Strict-Transport-Security", "max-age=31536000"},
		{"Access-Control-Expose-Headers", "X-Request-ID"}, {"Alt-Svc", `h3=":443"; ma=86400`},
	} {
		h.Set(kv[0], kv[1])
	}
	return h
}

// TestParseRateLimitResetAllocs: the Cooldown reads every response, success
// included (R17), so the usual answers allocate nothing (R16).
func TestParseRateLimitResetAllocs(t *testing.T) {
	exhausted := openAISuccessHeader()
	exhausted.Set("X-Ratelimit-Remaining-Tokens", "0")
	exhausted.Set("Ratelimit", `"default";r=0;t=30, "day";r=9;t=86400`)
	for name, h := range map[string]http.Header{
		"openai success": openAISuccessHeader(),
		"exhausted":      exhausted,
		"nothing":        {},
	} {
		assert.Zero(t, testing.AllocsPerRun(100, func() { ParseRateLimitReset(h, epoch) }), name)
	}
}

func BenchmarkParseRateLimitReset(b *testing.B) {
	h := openAISuccessHeader()
	b.ReportAllocs()
	for b.Loop() {
		ParseRateLimitReset(h, epoch)
	}
}

// fzOpenAIDuration is the grammar of an OpenAI reset with units.
var fzOpenAIDuration = regexp.MustCompile(`^(?:[0-9]+(?:\.[0-9]+)?(?:h|m|s|ms|us|µs|μs|ns))+$`)

// fzOpenAIPart is one count and its unit.
var fzOpenAIPart = regexp.MustCompile(`([0-9.]+)([^0-9.]+)`)

var fzUnits = map[string]int64{"h": int64(time.Hour), "m": int64(time.Minute), "s": int64(time.Second), "ms": int64(time.Millisecond), "us": int64(time.Microsecond), "µs": int64(time.Microsecond), "μs": int64(time.Microsecond), "ns": 1}

// fzOpenAIOracle reads an OpenAI reset with exact arithmetic: lo and hi
// bound the sum of the counts (each truncated or rounded up to a nanosecond),
// saturated. known is false where the oracle declines (giants, other forms).
func fzOpenAIOracle(v string) (lo, hi time.Duration, known bool) {
	if lo, hi, ok := fzDecimal(v, int64(time.Second)); ok {
		return lo, hi, true
	}
	if len(v) > fzGiant || !fzOpenAIDuration.MatchString(v) {
		return 0, 0, false
	}
	sumLo, sumHi := new(big.Int), new(big.Int)
	for _, m := range fzOpenAIPart.FindAllStringSubmatch(v, -1) {
		l, h, ok := fzDecimal(m[1], fzUnits[m[2]])
		if !ok {
			return 0, 0, false
		}
		sumLo.Add(sumLo, big.NewInt(int64(l)))
		sumHi.Add(sumHi, big.NewInt(int64(h)))
	}
	sat := func(x *big.Int) time.Duration {
		if !x.IsInt64() {
			return maxDuration
		}
		return time.Duration(x.Int64())
	}
	return sat(sumLo), sat(sumHi), true
}

// fzRateLimitFamilies are the pairs FuzzParseRateLimitReset fills.
var fzRateLimitFamilies = [][2]string{
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	{"x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"},
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"},
	{"anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"},
	{"Ratelimit-Remaining", "Ratelimit-Reset"},
}

// FuzzParseRateLimitReset: whatever the values of a remaining/reset pair and
// of the structured RateLimit field, and whatever the clock,
// ParseRateLimitReset never panics, never returns a negative wait, returns 0
// when ok is false, finds nothing when no limit is at 0, and reads an OpenAI
// reset exactly: never shorter than asked, saturating.
func FuzzParseRateLimitReset(f *testing.F) {
	rfc := func(d time.Duration) string { return epoch.Add(d).Format(time.RFC3339Nano) }
	for _, seed := range []struct {
		family                       uint8
		remaining, reset, structured string
		offset                       int64
	}{
		// OpenAI and Azure.
		{0, "0", "1s", "", 0}, {0, "0", "6m0s", "", 0}, {0, "0", "20ms", "", 0}, {0, "0", "1m30.5s", "", 0},
		{0, "0", "1h2m3s", "", 0}, {0, "0", "59.123s", "", 0}, {0, "0", "17", "", 0}, {0, "0", "0.5", "", 0},
		{1, "0", "1ms2us3µs4μs5ns", "", 0}, {1, "-1", "1s", "", 0}, {1, "5", "1s", "", 0}, {1, "0", "", "", 0},
		{0, "0", "2562047h47m16.854775807s", "", 0}, {0, "0", "2562047h47m16.854775808s", "", 0},
		{0, "0", "99999999999999999999999h", "", 0}, {0, "0", "99999999999999999999999", "", 0},
		{0, " 0\t", "\t1m 30s ", "", 0}, {0, "0", "-1s", "", 0}, {0, "0", "+1s", "", 0}, {0, "0", "1e3s", "", 0},
		{0, "0", ".5s", "", 0}, {0, "0", "1.s", "", 0}, {0, "0", "1d", "", 0}, {0, "0", "1m30", "", 0},
		// Anthropic.
		{2, "0", rfc(30 * time.Second), "", 0}, {2, "0", rfc(-time.Hour), "", 0}, {3, "0", "9999-12-31T23:59:59Z", "", 0},
		{3, "0", "2026-11-30T12:00:00+05:00", "", 0}, {2, "0", "30", "", 0}, {2, "0", "2026-13-45T99:00:00Z", "", 0},
		{2, "0", rfc(time.Second), "", -1 << 63}, {2, "0", rfc(time.Second), "", 1<<63 - 1},
		// The IETF draft.
		{4, "0", "30", "", 0}, {4, "0", "1.5", "", 0}, {4, "7", "30", "", 0}, {4, "0", "-30", "", 0},
		{4, "", "", `"default";r=0;t=30`, 0}, {4, "", "", `default;r=0;t=30`, 0},
		{4, "", "", `"burst";r=0;t=1, "minute";r=0;t=60, "day";r=100;t=86400`, 0},
		{4, "", "", `"a,b;r=9" ; r=0 ; t=5,"c\"d";r=0;t=6`, 0}, {4, "", "", `"p";r=5;t=9;r=0`, 0},
		{4, "", "", `"p;r=0;t=30`, 0}, {4, "", "", `"p";r=0;t=999999999999999999999`, 0},
		{4, "", "", `;;;,,,"""=`, 0}, {4, "", "", `limit=100, remaining=0, reset=30`, 0},
		// Junk.
		{0, "\x00", "\xff", "\xff\"\\", 0}, {2, "0", "\\", `"\`, 0}, {4, "0", "١٢", `"p";r=٠;t=1`, 0},
	} {
		f.Add(seed.family, seed.remaining, seed.reset, seed.structured, seed.offset)
	}
	f.Fuzz(func(t *testing.T, family uint8, remaining, reset, structured string, offset int64) {
		pair := fzRateLimitFamilies[int(family)%len(fzRateLimitFamilies)]
		h := http.Header{} // set by hand: the fuzzer's bytes need not be valid header values
		if remaining != "" {
			h[pair[0]] = []string{remaining}
		}
		if reset != "" {
			h[pair[1]] = []string{reset}
		}
		if structured != "" {
			h["Ratelimit"] = []string{structured}
		}
		what := fmt.Sprintf("ParseRateLimitReset(%q: %q, %q: %q, RateLimit: %q)", pair[0], remaining, pair[1], reset, structured)
		got, ok := ParseRateLimitReset(h, epoch.Add(time.Duration(offset)))
		if got < 0 {
			t.Fatalf("%s = %v, want never negative", what, got)
		}
		if !ok && got != 0 {
			t.Fatalf("%s = %v, false; want 0 when not ok", what, got)
		}
		rem, v := fzTrim(remaining), fzTrim(reset)
		zero := rem != "" && strings.Trim(rem, "0") == ""
		if structured == "" && !zero && ok {
			t.Fatalf("%s = %v, true; want not ok: no limit is at 0", what, got)
		}
		if structured != "" || !zero {
			return // the oracles below read one pair alone
		}
		switch name := strings.ToLower(pair[0]); {
		case strings.HasPrefix(name, "x-ratelimit-"):
			if lo, hi, known := fzOpenAIOracle(v); known && (!ok || got < lo || got > hi) {
				t.Fatalf("%s = %v (%d ns), %v; want within [%d, %d] ns, true", what, got, int64(got), ok, int64(lo), int64(hi))
			}
		case strings.HasPrefix(name, "anthropic-"):
			when, err := time.Parse(time.RFC3339, v)
			if want := max(when.Sub(epoch.Add(time.Duration(offset))), 0); err == nil && (!ok || got != want) {
				t.Fatalf("%s = %v, %v; want %v, true: the time less now, 0 if past", what, got, ok, want)
			}
			if err != nil && ok {
				t.Fatalf("%s = %v, true; want not ok: not an RFC 3339 time (%v)", what, got, err)
			}
		default: // RateLimit-Reset: seconds
			if lo, hi, known := fzDecimal(v, int64(time.Second)); known && (!ok || got < lo || got > hi) {
				t.Fatalf("%s = %v (%d ns), %v; want within [%d, %d] ns, true", what, got, int64(got), ok, int64(lo), int64(hi))
			}
		}
	})
}
