package bench

// What the fake provider says about its limit, in the words of the APIs a
// retryhttp user calls: OpenAI's and Anthropic's headers, a bare Retry-After,
// Gemini's error body, or nothing. Each dialect tells a client a different
// amount, so each tests a different path of a retrying client: the exact
// wait (retry-after-ms, retryDelay), a coarse one (whole seconds), the
// provider's counts, or only its backoff.

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// A Dialect is what a Provider says about its limit: the headers it sends on
// every response and what a 429 carries. The zero Dialect is OpenAIDialect.
type Dialect int

const (
	// OpenAIDialect answers a 429 with retry-after-ms (until the next token,
	// rounded up to the millisecond, at least 1), Retry-After (the same in
	// whole seconds, rounded up, at least 1) and an OpenAI error body, and
	// sends x-ratelimit-limit-requests, x-ratelimit-remaining-requests and
	// x-ratelimit-reset-requests (until the bucket is full, as FormatReset
	// writes it) on every response.
	//
	// The limit is the bucket's capacity (Burst), not its rate: OpenAI's
	// limit is a bucket too (the RPM, refilled over a minute), and with the
	// capacity (limit − remaining) / reset is the refill rate, as a client
	// could compute it.
	OpenAIDialect Dialect = iota
	// AnthropicDialect answers a 429 with Retry-After (whole seconds, rounded
	// up, at least 1) and an Anthropic error body, and sends
	// anthropic-ratelimit-requests-limit (Burst),
	// anthropic-ratelimit-requests-remaining and
	// anthropic-ratelimit-requests-reset on every response. The reset is the
	// time the bucket is full again, in RFC 3339 at whole seconds as
	// Anthropic writes it, rounded up so that it is never early. No
	// retry-after-ms.
	AnthropicDialect
	// RetryAfterDialect answers a 429 with Retry-After alone (whole seconds,
	// rounded up, at least 1), as many gateways do, and sends no counts.
	RetryAfterDialect
	// GeminiDialect answers a 429 with no rate-limit header and Google's
	// error body, whose google.rpc.RetryInfo retryDelay is the exact time
	// until the next token as a protobuf duration ("0.013000001s"), and
	// sends no counts.
	GeminiDialect
	// BareDialect answers a 429 with no hint at all: no header, a short
	// body. A client has only its own backoff to go by.
	BareDialect
)

var dialectNames = [...]string{"openai", "anthropic", "retry-after", "gemini", "bare"}

// String returns the dialect's name on the command line and in the tables.
func (d Dialect) String() string {
	if d < 0 || int(d) >= len(dialectNames) {
		return "Dialect(" + strconv.Itoa(int(d)) + ")"
	}
	return dialectNames[d]
}

// Dialects returns every dialect, in the order of the tables.
func Dialects() []Dialect {
	return []Dialect{OpenAIDialect, AnthropicDialect, RetryAfterDialect, GeminiDialect, BareDialect}
}

// DialectByName returns the dialect whose String is name.
func DialectByName(name string) (Dialect, bool) {
	for _, d := range Dialects() {
		if d.String() == name {
			return d, true
		}
	}
	return 0, false
}

// Description says in a line of markdown what the dialect sends, for the
// tables.
func (d Dialect) Description() string {
	switch d {
	case OpenAIDialect:
		return "429 with `retry-after-ms` (exact, ms), `Retry-After` (whole seconds, at least 1); `x-ratelimit-{limit,remaining,reset}-requests` on every response (limit = B)"
	case AnthropicDialect:
		return "429 with `Retry-After` (whole seconds, at least 1); `anthropic-ratelimit-requests-{limit,remaining,reset}` on every response (limit = B, reset an RFC 3339 time rounded up to the second)"
	case RetryAfterDialect:
		return "429 with `Retry-After` alone (whole seconds, at least 1); no counts"
	case GeminiDialect:
		return "429 with no rate-limit header and Google's JSON error, `RetryInfo.retryDelay` exact (\"0.013000001s\"); no counts"
	case BareDialect:
		return "429 with no hint at all; no counts"
	}
	return d.String()
}

// Error bodies of a 429, shaped like each provider's.
var (
	// RateLimitBody is OpenAI's.
	RateLimitBody       = []byte(`{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	anthropicLimitBody  = []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit."}}`)
	retryAfterLimitBody = []byte(`{"error":{"message":"Too many requests"}}`)
	bareLimitBody       = []byte("Too Many Requests\n")
)

// answer sets on h what d says about dec, the bucket's answer at now to a
// request, and returns the body of the 429 (nil when dec.OK). The counts are
// the bucket's when the request arrived, however long the answer then takes,
// as a real provider's are when it admits a request.
func (d Dialect) answer(h http.Header, dec Decision, burst int, now time.Time) []byte {
	switch d {
	case OpenAIDialect:
		h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(burst))
		h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(dec.Remaining))
		h.Set("X-Ratelimit-Reset-Requests", FormatReset(dec.Reset))
	case AnthropicDialect:
		h.Set("Anthropic-Ratelimit-Requests-Limit", strconv.Itoa(burst))
		h.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.Itoa(dec.Remaining))
		h.Set("Anthropic-Ratelimit-Requests-Reset", FormatResetTime(now.Add(dec.Reset)))
	}
	if dec.OK {
		return nil
	}
	retryAfter := strconv.FormatInt(ceilUnits(dec.Next, time.Second), 10)
	switch d {
	case OpenAIDialect:
		h.Set("Retry-After-Ms", strconv.FormatInt(ceilUnits(dec.Next, time.Millisecond), 10))
		h.Set("Retry-After", retryAfter)
		h.Set("Content-Type", "application/json")
		return RateLimitBody
	case AnthropicDialect:
		h.Set("Retry-After", retryAfter)
		h.Set("Content-Type", "application/json")
		return anthropicLimitBody
	case RetryAfterDialect:
		h.Set("Retry-After", retryAfter)
		h.Set("Content-Type", "application/json")
		return retryAfterLimitBody
	case GeminiDialect:
		h.Set("Content-Type", "application/json")
		return GeminiLimitBody(dec.Next)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	return bareLimitBody
}

// GeminiLimitBody is the Gemini API's 429 body asking the client to come
// back after delay.
func GeminiLimitBody(delay time.Duration) []byte {
	return fmt.Appendf(nil, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":%q}]}}`,
		FormatProtoDuration(delay))
}

// FormatProtoDuration writes d as protobuf's JSON writes a
// google.protobuf.Duration: seconds with 0, 3, 6 or 9 fractional digits and
// an "s" ("13s", "0.013s", "0.013000001s"). d must not be negative.
func FormatProtoDuration(d time.Duration) string {
	s, ns := int64(d/time.Second), int64(d%time.Second)
	switch {
	case ns == 0:
		return fmt.Sprintf("%ds", s)
	case ns%1e6 == 0:
		return fmt.Sprintf("%d.%03ds", s, ns/1e6)
	case ns%1e3 == 0:
		return fmt.Sprintf("%d.%06ds", s, ns/1e3)
	}
	return fmt.Sprintf("%d.%09ds", s, ns)
}

// FormatResetTime writes t as Anthropic writes its reset times: RFC 3339 in
// UTC at whole seconds, rounded up so that it is never earlier than t.
func FormatResetTime(t time.Time) string {
	if s := t.Truncate(time.Second); s.Before(t) {
		t = s.Add(time.Second)
	}
	return t.UTC().Format(time.RFC3339)
}
