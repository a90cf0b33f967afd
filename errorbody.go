package retryhttp

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
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
func ParseErrorBody(body []byte) BodyHint { return parseErrorBody(body).BodyHint }

// errorHint is what the transport reads of a provider's error body (R19):
// the BodyHint that ParseErrorBody returns, and what only the transport
// acts on (API.md fixes BodyHint's fields).
type errorHint struct {
	BodyHint
	// deadlineExceeded: an error envelope's error.status is exactly
	// DEADLINE_EXCEEDED, as Google's APIs (Gemini, Vertex AI) answer a
	// request that overran Google's own deadline, with a 504. Google's word
	// is to raise the timeout, not to send it again.
	deadlineExceeded bool
	// limits is the limit a rate-limit error names (R23: a 429 cuts or holds
	// only the limit it hit; see errorLimits).
	limits laneMask
	// tooLarge: OpenAI's "Request too large" (errorLimits), one of the
	// reasons for Exhausted, told apart from a spent quota.
	tooLarge bool
}

// parseErrorBody is ParseErrorBody, with what only the transport acts on:
// deadlineExceeded, read as the rest is, from any envelope of an array,
// and only from a string.
func parseErrorBody(body []byte) errorHint {
	// A Decoder reads the first value and leaves any trailing bytes alone;
	// UseNumber keeps a huge number as text instead of failing the decode.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return errorHint{}
	}
	var h errorHint
	switch v := v.(type) {
	case map[string]any:
		h.addEnvelope(v)
	case []any: // Vertex AI
		for _, e := range v {
			if e, ok := e.(map[string]any); ok {
				h.addEnvelope(e)
			}
		}
	}
	return h
}

// addEnvelope adds to h what one {"error": {...}} envelope says. Every type
// is checked where it is read, so a wrong one leaves out only its own field.
func (h *errorHint) addEnvelope(env map[string]any) {
	e, _ := env["error"].(map[string]any)
	if e == nil {
		return
	}
	if e["code"] == "insufficient_quota" || e["type"] == "insufficient_quota" { // OpenAI
		h.Exhausted = true
	}
	if e["status"] == "DEADLINE_EXCEEDED" { // Google: a string, exactly; any other type never equals one
		h.deadlineExceeded = true
	}
	limits, tooLarge := errorLimits(e)
	h.limits |= limits
	h.tooLarge = h.tooLarge || tooLarge
	h.Exhausted = h.Exhausted || tooLarge
	details, _ := e["details"].([]any)
	for _, d := range details {
		d, _ := d.(map[string]any)
		typ, _ := d["@type"].(string)
		switch {
		case strings.HasSuffix(typ, "google.rpc.RetryInfo"):
			if delay, ok := parseProtoDuration(d["retryDelay"]); ok {
				h.RetryAfter = max(h.RetryAfter, delay)
			}
		case strings.HasSuffix(typ, "google.rpc.QuotaFailure"):
			violations, _ := d["violations"].([]any)
			for _, v := range violations {
				v, _ := v.(map[string]any)
				if id, _ := v["quotaId"].(string); strings.Contains(id, "PerDay") {
					h.Exhausted = true
				}
			}
		}
	}
}

// parseProtoDuration reads a google.protobuf.Duration in its JSON form,
// decimal seconds and "s" ("45.837906927s"). Signs and exponents are
// rejected: a negative wait means nothing, and in doubt the body is not
// trusted.
func parseProtoDuration(v any) (time.Duration, bool) {
	s, _ := v.(string)
	secs, ok := strings.CutSuffix(s, "s")
	if !ok {
		return 0, false
	}
	return parseDecimal(secs, time.Second)
}
