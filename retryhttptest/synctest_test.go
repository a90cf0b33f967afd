package retryhttptest_test

import (
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// In a testing/synctest bubble the transport's default clock is the bubble's:
// with a Script as the base and no WithClock at all, waits take no real time
// and are exact in bubble time.
func TestSynctestBubble(t *testing.T) {
	tests := []struct {
		name    string
		opts    []retryhttp.Option
		replies []retryhttptest.Reply
		gaps    []time.Duration
	}{
		{"503, 503, 200", nil,
			[]retryhttptest.Reply{retryhttptest.Status(503), retryhttptest.Status(503), retryhttptest.Status(200)},
			[]time.Duration{400 * ms, 800 * ms}},
		{"Retry-After as a date", nil,
			[]retryhttptest.Reply{retryhttptest.Status(429).Asks(retryhttptest.RetryAfterDate, 3*time.Second), retryhttptest.Status(200)},
			[]time.Duration{3 * time.Second}},
		{"a hanging try is cut by the try timeout", []retryhttp.Option{retryhttp.WithTryTimeout(5 * time.Second)},
			[]retryhttptest.Reply{retryhttptest.Hang(), retryhttptest.Status(200)},
			[]time.Duration{5*time.Second + 400*ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			realStart := time.Now()
			synctest.Test(t, func(t *testing.T) {
				script := retryhttptest.NewScript(tt.replies...)
				client := &http.Client{Transport: retryhttp.New(script,
					append([]retryhttp.Option{retryhttp.WithBackoff(noJitter)}, tt.opts...)...)}
				start := time.Now()
				resp, err := client.Get("https://api.example.com/v1/chat")
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, 200, resp.StatusCode)

				var total time.Duration
				for _, g := range tt.gaps {
					total += g
				}
				assert.Equal(t, total, time.Since(start), "exact in bubble time")
				assert.Equal(t, tt.gaps, gaps(script.Requests()))
			})
			assert.Less(t, time.Since(realStart), time.Second, "no real wait")
		})
	}
}
