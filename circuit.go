package retryhttp

import (
	"time"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/store"
)

// Circuit sets a Cooldown's breaker (R25): when a key's provider is down,
// not just busy, its calls fail at once with ErrUnavailable instead of
// paying for their retries, so that the caller falls back to another model
// at once and the provider is not sent a fleet's retries while it comes
// back.
type Circuit struct {
	// Failures is how many failed tries in a row, with no sign of life
	// between them, open a key's circuit; 0 or less: 5. A failure is a try
	// the Classifier calls Transient (a 5xx it retries, a transport error,
	// a try that ran out of WithTryTimeout); any other answer (a success, a
	// 4xx, a 429) is a sign of life, and the caller's own cancel is no news.
	Failures int
	// Open is how long the circuit stays open before one try, the probe,
	// goes; 0 or less: 1 s. A sign of life closes it; a failed probe opens
	// it for Open again.
	Open time.Duration
}

// WithCircuit gives the Cooldown a breaker per key (R25; see Circuit).
// While a key's circuit is open every call of the key fails at once,
// sending nothing, sleeping nothing and charged nothing, with an *Error of
// Reason Unavailable (errors.Is(err, ErrUnavailable) holds, and Budget.Err
// reports it); a call whose retry would go ends as when its retries run
// out. Once Open has passed, the next try is the probe. With a Store the
// circuit is the fleet's: one row of failures of two processes at least,
// one probe for them all. One Warn entry when a key's circuit opens, one
// Info when it closes. Without WithCircuit a call tries as R2 to R9 say.
func WithCircuit(c Circuit) CooldownOption {
	if c.Failures <= 0 {
		c.Failures = store.DefaultFailures
	}
	if c.Open <= 0 {
		c.Open = store.DefaultOpen
	}
	return func(cfg *cooldownConfig) { cfg.circuit = &cooldown.Circuit{Failures: c.Failures, Open: c.Open} }
}

// Down reports whether key's circuit refuses a call now, as far as this
// process knows (R25): it is open, or waits for its probe's answer. Once
// Open has passed with no probe out it is false: the next call is the
// probe (an app that routes by Down comes back to its provider). It is
// false without WithCircuit.
func (c *Cooldown) Down(key string) bool {
	if c == nil {
		return false
	}
	return c.eng.Down(cooldown.BoundKey(key))
}
