package retryhttp

import (
	"net/http"
	"time"
)

// ParseRateLimitReset returns how long until an exhausted rate limit resets
// (R18). Not built yet.
func ParseRateLimitReset(h http.Header, now time.Time) (time.Duration, bool) {
	return 0, false
}
