package retryhttp

import "time"

// BodyHint is what a provider's error body says about coming back (R19).
type BodyHint struct {
	RetryAfter time.Duration // the wait the body asks for (Google RetryInfo.retryDelay); 0 when none
	Exhausted  bool          // a quota that will not come back soon (OpenAI insufficient_quota, Google per-day quota)
}

// ParseErrorBody reads a provider's JSON error body (R19). Not built yet.
func ParseErrorBody(body []byte) BodyHint {
	return BodyHint{}
}
