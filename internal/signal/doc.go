// Package signal reads what a provider says in an answer: how long it asks
// the client to wait (Retry-After and retry-after-ms, a JSON error body's
// retryDelay), which limit it has spent and when that resets (OpenAI's,
// Anthropic's and the IETF draft's rate-limit headers, as counts per lane),
// what an error body says of the limit a 429 hit or of a quota spent, and
// what a JSON request body asks for (its output cap, its model). Each
// reader is a pure function of the header or the bytes, never panics, and
// saturates rather than wraps. The rules it follows are RULES.md's R5 (the
// server's ask in headers), R17 (a key per model), R18 (rate-limit
// headers), R19 (provider error bodies) and R23 (tokens); retryhttp's
// ParseRetryAfter, ParseRateLimitReset, ParseErrorBody and KeyByModel are
// its face.
package signal

import (
	"math"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// NumLanes is how many lanes the readers know: store.Requests to
// store.OutputTokens. A per-lane array is indexed by store.LaneID.
const NumLanes = 4

// Has reports whether l is in the set.
func (m Lanes) Has(l store.LaneID) bool { return m&(1<<l) != 0 }

// maxDuration is the largest time.Duration: what a wait too long to hold
// saturates at.
const maxDuration = time.Duration(math.MaxInt64)
