package signal

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// Hint is what the transport reads of a provider's error body (R19): what
// retryhttp.ParseErrorBody returns (RetryAfter, Exhausted), and what only
// the transport acts on. The zero Hint says nothing.
type Hint struct {
	RetryAfter time.Duration // the wait the body asks for (Google RetryInfo.retryDelay); 0 when none
	Exhausted  bool          // a quota that will not come back soon (OpenAI insufficient_quota, Google per-day quota, a request too large)
	// DeadlineExceeded: an error envelope's error.status is exactly
	// DEADLINE_EXCEEDED, as Google's APIs (Gemini, Vertex AI) answer a
	// request that overran Google's own deadline, with a 504. Google's word
	// is to raise the timeout, not to send it again.
	DeadlineExceeded bool
	// Limits is the limit a rate-limit error names (R23: a 429 cuts or holds
	// only the limit it hit; see errorLimits).
	Limits Lanes
	// TooLarge: OpenAI's "Request too large" (errorLimits), one of the
	// reasons for Exhausted, told apart from a spent quota.
	TooLarge bool
}

// ErrorBody reads a provider's JSON error body: retryhttp.ParseErrorBody's
// rules (R19), with what only the transport acts on (DeadlineExceeded,
// read as the rest is, from any envelope of an array, and only from a
// string; Limits and TooLarge, R23).
func ErrorBody(body []byte) Hint {
	// A Decoder reads the first value and leaves any trailing bytes alone;
	// UseNumber keeps a huge number as text instead of failing the decode.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return Hint{}
	}
	var h Hint
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
func (h *Hint) addEnvelope(env map[string]any) {
	e, _ := env["error"].(map[string]any)
	if e == nil {
		return
	}
	if e["code"] == "insufficient_quota" || e["type"] == "insufficient_quota" { // OpenAI
		h.Exhausted = true
	}
	if e["status"] == "DEADLINE_EXCEEDED" { // Google: a string, exactly; any other type never equals one
		h.DeadlineExceeded = true
	}
	limits, tooLarge := errorLimits(e)
	h.Limits |= limits
	h.TooLarge = h.TooLarge || tooLarge
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
