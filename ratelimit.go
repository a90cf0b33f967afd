package retryhttp

import (
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/signal"
)

// ParseRateLimitReset returns how long until an exhausted rate limit resets,
// read from h at the instant now (R18). It is a pure function.
//
// A limit is exhausted when its remaining count is 0. It is read from:
//
//   - OpenAI and Azure: x-ratelimit-remaining-requests with
//     x-ratelimit-reset-requests, and the same pair for -tokens. The reset is
//     a duration as OpenAI writes it: decimal counts with the units h, m, s,
//     ms, us (or µs) and ns ("1s", "6m0s", "20ms", "1m30.5s", "1h2m3s"), or
//     bare seconds ("17", "0.5").
//   - Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-remaining
//     with the matching anthropic-ratelimit-...-reset, an RFC 3339 time,
//     relative to now; a time in the past is 0.
//   - The IETF draft: RateLimit-Remaining with RateLimit-Reset in seconds
//     ("30", "1.5"); and each item of the structured RateLimit field
//     (draft-ietf-httpapi-ratelimit-headers-08 and later, e.g.
//     `"default";r=0;t=30`, items separated by commas) whose r is 0 and
//     whose t is its reset in seconds.
//
// The longest reset of the exhausted limits wins, and ok is true. A remaining
// count above 0, negative (Azure sends -1) or not a plain integer, a missing
// reset, or a reset that does not parse (a sign, an exponent, an unknown unit,
// anything else) leaves that limit out; ok is false when no limit is left, and
// the wait is then 0. An exhausted limit whose reset is 0 or in the past gives
// 0 with ok true: it resets now. Header names match in any case, even in a
// hand-built Header map (the canonical spelling wins over the others); a
// header given more than once counts by its first value, as http.Header.Get
// does, except RateLimit, whose lines are read as one list. Spaces and tabs
// around values are ignored. A reset too large for a Duration saturates at
// the largest Duration; the result is never negative, and no input makes it
// panic.
func ParseRateLimitReset(h http.Header, now time.Time) (d time.Duration, ok bool) {
	return signal.RateLimitReset(h, now)
}
