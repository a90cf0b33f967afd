package bench

import (
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/retryhttp/retryhttp"
)

// FirstWait returns the wait before the first retry that lib computes for a
// 429 response carrying h, read at now (go-retryablehttp reads the real
// clock itself), and whether the server's ask set it (false: the library
// ignored the header and used its own backoff). It calls each library's own
// function for this, with no network and no waiting: retryhttp's
// ParseRetryAfter (the wait is the larger of it and the backoff, R4),
// go-retryablehttp's DefaultBackoff and failsafehttp's DelayFunc.
func FirstWait(lib Lib, h http.Header, now time.Time) (wait time.Duration, honoured bool) {
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: http.NoBody}
	switch lib.Name {
	case RetryHTTP.Name:
		backoff := retryhttp.DefaultBackoff.Delay(1, 0.5)
		ask, ok := retryhttp.ParseRetryAfter(h, now)
		return max(ask, backoff), ok && ask >= backoff
	case Retryablehttp.Name:
		backoff := retryablehttp.DefaultBackoff(400*time.Millisecond, 30*time.Second, 0, &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}})
		d := retryablehttp.DefaultBackoff(400*time.Millisecond, 30*time.Second, 0, resp)
		return d, d != backoff
	case Failsafe.Name:
		if d := failsafehttp.DelayFunc(attempt{resp: resp}); d >= 0 {
			return d, true // before jitter, which failsafe-go applies to this delay too
		}
		return 400 * time.Millisecond, false
	}
	return 0, false
}

// attempt is the one part of a failsafe execution that DelayFunc reads.
type attempt struct {
	failsafe.ExecutionAttempt[*http.Response]
	resp *http.Response
}

func (a attempt) LastResult() *http.Response { return a.resp }
