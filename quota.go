package retryhttp

import (
	"math"
	"sync"
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
	mu     sync.Mutex
	max    float64
	ratio  float64
	tokens float64
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
	return &Quota{max: maxTokens, ratio: ratio, tokens: maxTokens}
}

// record accounts for one try of class c and reports whether a retry after
// it is allowed.
func (q *Quota) record(c Class) (retryAllowed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c == Transient || c == Throttled {
		q.tokens = max(q.tokens-1, 0)
	} else {
		q.tokens = min(q.tokens+q.ratio, q.max)
	}
	return q.max > 0 && q.tokens > q.max/2
}
