package retryhttp

import (
	"math"
	"sync/atomic"
)

// A Quota keeps retries from multiplying an outage: a token bucket shared by
// every request of every Transport given it with WithQuota, as in gRPC's
// retry throttling (R12). It starts full at maxTokens. Every Transient or
// Throttled try takes one token; every other try puts back ratio tokens, up
// to maxTokens. A retry is allowed only while more than maxTokens/2 tokens
// remain, so when a provider is down the transport soon sends each call once,
// and successes refill the bucket when it recovers.
//
// A Quota is safe for concurrent use by multiple goroutines.
type Quota struct {
	max    float64
	ratio  float64
	full   uint64        // math.Float64bits(max)
	tokens atomic.Uint64 // math.Float64bits of the tokens left
}

// NewQuota returns a full Quota of maxTokens that every successful or
// Permanent try refills by ratio. maxTokens <= 0 (or NaN) refuses every
// retry; a ratio <= 0 (or NaN) never refills. gRPC's usual values are
// maxTokens 10 and ratio 0.1: about one retry per ten successes once the
// bucket has been drained.
func NewQuota(maxTokens, ratio float64) *Quota {
	switch {
	case !(maxTokens > 0):
		maxTokens = 0
	case math.IsInf(maxTokens, 1):
		maxTokens = math.MaxFloat64
	}
	if !(ratio > 0) {
		ratio = 0
	}
	q := &Quota{max: maxTokens, ratio: ratio, full: math.Float64bits(maxTokens)}
	q.tokens.Store(math.Float64bits(maxTokens))
	return q
}

// record accounts for one try of class c and reports whether a retry after
// it is allowed. It takes no lock, and a success that finds the bucket full
// writes nothing, so that a Quota shared by every call scales with cores
// (R16), as gRPC's retry throttling does with atomics.
func (q *Quota) record(c Class) (retryAllowed bool) {
	for {
		old := q.tokens.Load()
		tokens := math.Float64frombits(old)
		next := min(tokens+q.ratio, q.max)
		if c == Transient || c == Throttled {
			next = max(tokens-1, 0)
		}
		if next == tokens || q.tokens.CompareAndSwap(old, math.Float64bits(next)) {
			return q.max > 0 && next > q.max/2
		}
	}
}

// succeeded records a successful try: a full bucket, the usual case, is
// read and not written (R16).
func (q *Quota) succeeded() {
	if q.tokens.Load() != q.full {
		q.record(Permanent)
	}
}

// left returns the tokens in the bucket.
func (q *Quota) left() float64 { return math.Float64frombits(q.tokens.Load()) }
