package pace

import (
	"math"
	"time"
)

// DurNs converts nanoseconds to a Duration, rounded, saturating at the
// largest Duration either way: a float too large for an int64 converts to
// an undefined value in Go (on amd64, the smallest: a pace of one send per
// 292 years once came out as one per 100 µs).
func DurNs(ns float64) time.Duration {
	switch {
	case ns != ns: // NaN
		return 0
	case ns >= maxDurationF:
		return math.MaxInt64
	case ns <= -maxDurationF:
		return -math.MaxInt64
	}
	return time.Duration(math.Round(ns))
}

const maxDurationF = float64(math.MaxInt64)
