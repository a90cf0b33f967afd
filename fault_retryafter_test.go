package retryhttp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every form of Retry-After R5 names, over a real connection: each 429 is
// waited out exactly as long as the server asked.
func TestFaultRetryAfterForms(t *testing.T) {
	const ask = 7 * time.Second
	at := func(layout string) func(now time.Time) http.Header {
		return func(now time.Time) http.Header {
			v := now.Add(ask).UTC().Format(layout)
			return http.Header{"Retry-After": {strings.Replace(v, "UTC", "GMT", 1)}}
		}
	}
	fixed := func(kv ...string) func(time.Time) http.Header {
		return func(time.Time) http.Header {
			return headerOf(kv...)
		}
	}
	for _, tc := range []struct {
		name     string
		header   func(now time.Time) http.Header
		wantWait time.Duration
		wantFrom WaitSource
	}{
		{"delay-seconds", fixed("Retry-After", "7"), ask, FromRetryAfter},
		{"decimal seconds", fixed("Retry-After", "1.5"), 1500 * time.Millisecond, FromRetryAfter},
		{"IMF-fixdate", at(http.TimeFormat), ask, FromRetryAfter},
		{"RFC 850 date", at(time.RFC850), ask, FromRetryAfter},
		{"asctime date", at(time.ANSIC), ask, FromRetryAfter},
		{"retry-after-ms", fixed("Retry-After-Ms", "1500"), 1500 * time.Millisecond, FromRetryAfter},
		{"retry-after-ms wins", fixed("Retry-After-Ms", "250", "Retry-After", "30"), 250 * time.Millisecond, FromRetryAfter},
		{"invalid retry-after-ms falls back", fixed("Retry-After-Ms", "soon", "Retry-After", "3"), 3 * time.Second, FromRetryAfter},
		{"date in the past: the backoff", func(now time.Time) http.Header {
			return http.Header{"Retry-After": {now.Add(-time.Hour).UTC().Format(http.TimeFormat)}}
		}, 10 * time.Millisecond, FromBackoff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			clk := retryhttptest.NewClock() // today: an RFC 850 date's two-digit year names no other century
			var n atomic.Int32
			srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) <= 2 {
					for k, v := range tc.header(clk.Now()) {
						w.Header()[k] = v
					}
					w.WriteHeader(http.StatusTooManyRequests)
					io.WriteString(w, "slow down")
					return
				}
				io.WriteString(w, "ok")
			})
			var seen ttAttempts
			// The backoff stays below every ask: 10 ms, then 10 ms again.
			tr := New(faultBase(t), WithClock(clk), WithBackoff(Backoff{Base: 10 * time.Millisecond}), WithObserver(seen.observe))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
			require.NoError(t, err, "the 200")
			resp.Body.Close()
			assertWaits(t, []time.Duration{tc.wantWait, tc.wantWait}, clk.Waits())
			attempts := seen.list()
			require.Len(t, attempts, 3)
			for _, a := range attempts[:2] {
				assert.Equal(t, Throttled, a.Class, "try %d", a.Try)
				assert.Equal(t, tc.wantFrom, a.From, "try %d", a.Try)
				assert.Equal(t, tc.wantWait, a.Wait, "try %d", a.Try)
			}
		})
	}
}
