package retryhttp

import (
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/signal"
)

// ParseRetryAfter returns how long the server asked the client to wait before
// it tries again, read from h at the instant now (R5). It is a pure function.
//
// A valid `retry-after-ms` header (milliseconds, as OpenAI and Anthropic
// send) wins. Otherwise `Retry-After` is read as delay-seconds (digits, with
// an optional decimal fraction such as "1.5") or as an HTTP-date in any of
// the three forms http.ParseTime accepts, relative to now; a date in the past
// is 0. Spaces and tabs around a value are ignored. When neither header holds
// such a value (absent, empty, negative, or anything else) ok is false. A
// value too large for a Duration saturates at the largest Duration; the result
// is never negative, and no input makes it panic.
func ParseRetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	return signal.RetryAfter(h, now)
}
