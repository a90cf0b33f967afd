package retryhttp

import (
	"time"

	"github.com/retryhttp/retryhttp/internal/signal"
)

// BodyHint is what a provider's error body says about coming back (R19).
type BodyHint struct {
	RetryAfter time.Duration // the wait the body asks for (Google RetryInfo.retryDelay); 0 when none
	Exhausted  bool          // a quota that will not come back soon (OpenAI insufficient_quota, Google per-day quota)
}

// ParseErrorBody reads what a provider's JSON error body says about coming
// back (R19). It is a pure function.
//
// The body is an error envelope, {"error": {...}}, as the Gemini API and
// OpenAI send, or a JSON array of them, as Vertex AI sends; the hints of every
// element of an array combine. RetryAfter is the retryDelay of an
// error.details entry whose "@type" ends in google.rpc.RetryInfo: a protobuf
// JSON duration, decimal seconds with an "s" suffix ("45.837906927s"), digits
// below a nanosecond dropped, a value too large for a Duration saturated at
// the largest Duration, as Retry-After is (R5); of several, the largest. A
// retryDelay that is negative, has an exponent, lacks its "s", or is not a
// string is ignored. Exhausted is true for OpenAI's insufficient_quota in
// error.code or error.type, for an error.details entry whose "@type" ends
// in google.rpc.QuotaFailure with a violation whose quotaId names a per-day
// quota (contains "PerDay"), and for OpenAI's "Request too large ... on
// tokens per min" (its message, with error.type "tokens"): a call that asks
// for more than the whole token limit can never succeed (R23), so it is
// handed back at once, as a spent quota is.
//
// Everything else is ignored: other fields, fields of the wrong type (which do
// not spoil what the others say), bytes after the first JSON value. Empty,
// non-JSON or truncated input, and input nested deeper than encoding/json
// allows (10000 levels), give the zero BodyHint. RetryAfter is never
// negative, and no input makes it panic.
//
// The transport reads one thing more, which BodyHint has no field for: a
// Google error whose error.status is DEADLINE_EXCEEDED. On a 504 that makes
// the try Permanent (R19): the request overran Google's own deadline, and
// sent again unchanged it spends another.
func ParseErrorBody(body []byte) BodyHint {
	h := signal.ErrorBody(body)
	return BodyHint{RetryAfter: h.RetryAfter, Exhausted: h.Exhausted}
}
