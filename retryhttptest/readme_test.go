package retryhttptest_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSummarize is the test docs/testing.md describes: kept here so that it
// keeps compiling and passing.
func TestSummarize(t *testing.T) {
	ok, s503 := retryhttptest.Reply{Body: "a summary"}, retryhttptest.Status(503)
	noJitter := retryhttp.Backoff{Base: 400 * time.Millisecond, Factor: 2}
	tests := []struct {
		name    string
		replies []retryhttptest.Reply
		want    string
		waits   []time.Duration // each wait between tries, exactly
		took    time.Duration   // in all
	}{
		{"first try", []retryhttptest.Reply{ok}, "a summary", nil, 0},
		{"two 503s", []retryhttptest.Reply{s503, s503, ok}, "a summary", []time.Duration{400 * time.Millisecond, 800 * time.Millisecond}, 1200 * time.Millisecond},
		{"asks 2s", []retryhttptest.Reply{retryhttptest.Status(429, "Retry-After", "2"), ok}, "a summary", []time.Duration{2 * time.Second}, 2 * time.Second},
		{"asks 30s", []retryhttptest.Reply{retryhttptest.Status(429, "Retry-After", "30")}, "busy", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { // on the kit's Clock
			clk := retryhttptest.NewClock()
			script := retryhttptest.NewScript(tt.replies...).WithClock(clk)
			client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk), retryhttp.WithBackoff(noJitter))}
			got, err := Summarize(t.Context(), client, "a long text")
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.waits, clk.Waits())
		})
		t.Run(tt.name+"/synctest", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { // no WithClock at all
				client := &http.Client{Transport: retryhttp.New(retryhttptest.NewScript(tt.replies...), retryhttp.WithBackoff(noJitter))}
				start := time.Now()
				got, err := Summarize(t.Context(), client, "a long text")
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				assert.Equal(t, tt.took, time.Since(start))
			})
		})
	}
}
