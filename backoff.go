package retryhttp

import (
	"math"
	"time"
)

// Backoff computes the transport's own delay before a retry: exponential
// growth from Base by Factor per retry, capped at Max, then spread by Jitter.
// The zero Backoff waits 0 before every retry. A Backoff is a plain value and
// safe for concurrent use by multiple goroutines.
type Backoff struct {
	Base   time.Duration // delay before the first retry; <= 0 means 0
	Factor float64       // growth per retry; < 1 (or NaN) counts as 1
	Max    time.Duration // cap on the computed delay (never on a server's Retry-After); <= 0 means no cap
	Jitter float64       // spread, 0..1: the delay is drawn from [d*(1-Jitter), d*(1+Jitter)]; clamped to 0..1
}

// DefaultBackoff is the backoff of a Transport made without WithBackoff:
// 400 ms before the first retry, 800 ms before the second, each spread by 20%.
var DefaultBackoff = Backoff{Base: 400 * time.Millisecond, Factor: 2, Max: 30 * time.Second, Jitter: 0.2}

// maxDuration is the largest time.Duration: every computed wait saturates
// here instead of wrapping negative (R4, R5).
const maxDuration = time.Duration(math.MaxInt64)

// Delay returns the wait before retry number retry (1 for the first retry),
// given random in [0, 1). It is a pure function (R4):
//
//	d = min(Base * Factor^(retry-1), Max)
//	Delay = d * (1 - Jitter + 2*Jitter*random)
//
// so Delay(n, 0.5) is d exactly. A retry below 1 counts as 1, a random outside
// [0, 1) is clamped into it, and the result saturates at the largest Duration;
// it is never negative.
func (b Backoff) Delay(retry int, random float64) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	retry = max(retry, 1)
	factor := b.Factor
	if !(factor >= 1) { // also catches NaN
		factor = 1
	}
	d := float64(b.Base) * math.Pow(factor, float64(retry-1)) // never NaN: Base > 0, factor >= 1
	if b.Max > 0 {
		d = min(d, float64(b.Max))
	}
	d = min(d, float64(maxDuration)) // also +Inf: keeps the jitter step below free of Inf-Inf
	jitter := b.Jitter
	switch {
	case !(jitter > 0): // also catches NaN
		jitter = 0
	case jitter > 1:
		jitter = 1
	}
	switch {
	case !(random >= 0): // also catches NaN
		random = 0
	case random >= 1:
		random = math.Nextafter(1, 0)
	}
	// d + d*J*(2r-1) rather than d*(1-J+2Jr): at r = 0.5 the spread term is
	// exactly zero, so Delay(n, 0.5) == d with no rounding.
	d += d * jitter * (2*random - 1)
	return saturate(d)
}

// saturate converts nanoseconds held in a float64 to a Duration, clamping
// instead of overflowing.
func saturate(ns float64) time.Duration {
	switch {
	case ns >= float64(maxDuration):
		return maxDuration
	case !(ns > 0):
		return 0
	}
	return time.Duration(ns)
}
