package retryhttp

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestErrorText: an *Error's text says why the transport stopped and after
// how many tries, then only what there was of the rest (R9: Waited,
// Status and RetryAfter are 0 when there was none), then the cause.
func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{Tries: 1, Reason: Exhausted, Err: syscall.ECONNREFUSED},
			"retryhttp: exhausted after 1 try: connection refused"},
		{Error{Tries: 2, Waited: 400 * time.Millisecond, Reason: Canceled, Err: context.Canceled},
			"retryhttp: canceled after 2 tries, waited 400ms: context canceled"},
		{Error{Tries: 1, Status: 429, Reason: OutOfTime, Err: ErrRateLimited},
			"retryhttp: out_of_time after 1 try, status 429: rate limited"},
		{Error{Tries: 1, RetryAfter: time.Minute, Reason: OutOfTime, Err: ErrRateLimited},
			"retryhttp: out_of_time after 1 try, retry-after 1m0s: rate limited"},
		{Error{Reason: OutOfTime, Err: ErrRateLimited},
			"retryhttp: out_of_time after 0 tries: rate limited"},
		{Error{Tries: 3, Reason: Exhausted},
			"retryhttp: exhausted after 3 tries"},
	} {
		assert.EqualError(t, &tc.e, tc.want)
	}
	assert.ErrorIs(t, &Error{Err: syscall.ECONNREFUSED}, syscall.ECONNREFUSED, "Unwrap")
	assert.False(t, errors.Is(&Error{Err: syscall.ECONNREFUSED}, ErrRateLimited))
}
