package retryhttptest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// Summarize is the app code under test. It asks a provider for a summary on
// the public tier: when the provider is rate limited for longer than the
// user's turn can wait, it answers "busy" rather than an error.
func Summarize(ctx context.Context, client *http.Client, text string) (string, error) {
	ctx = retryhttp.WithBudget(ctx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/v1/summarize", strings.NewReader(text))
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if errors.Is(err, retryhttp.ErrRateLimited) {
		return "busy", nil
	}
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("summarize: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// A table-driven test of Summarize: each case scripts the provider's replies
// and checks the answer, the exact waits, and how many requests were sent.
// In a test file, the loop body is a t.Run with assert.Equal in place of
// Printf.
func Example() {
	noJitter := retryhttp.Backoff{Base: 400 * time.Millisecond, Factor: 2}
	ok := retryhttptest.Reply{Body: "a short summary"}
	tests := []struct {
		name    string
		replies []retryhttptest.Reply
	}{
		{"first try", []retryhttptest.Reply{ok}},
		{"two 503s", []retryhttptest.Reply{retryhttptest.Status(503), retryhttptest.Status(503), ok}},
		{"reset", []retryhttptest.Reply{retryhttptest.Fail(syscall.ECONNRESET), ok}},
		{"asks 2s", []retryhttptest.Reply{retryhttptest.Status(429, "Retry-After", "2"), ok}},
		{"asks 30s", []retryhttptest.Reply{retryhttptest.Status(429, "Retry-After", "30")}},
		{"down", []retryhttptest.Reply{retryhttptest.Status(503)}},
	}
	for _, tt := range tests {
		clk := retryhttptest.NewClock()
		script := retryhttptest.NewScript(tt.replies...).WithClock(clk)
		client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk), retryhttp.WithBackoff(noJitter))}

		got, err := Summarize(context.Background(), client, "a long text")
		fmt.Printf("%-9s %q err=%v waits=%v tries=%d\n", tt.name, got, err, clk.Waits(), script.Len())
	}
	// Output:
	// first try "a short summary" err=<nil> waits=[] tries=1
	// two 503s  "a short summary" err=<nil> waits=[400ms 800ms] tries=3
	// reset     "a short summary" err=<nil> waits=[400ms] tries=2
	// asks 2s   "a short summary" err=<nil> waits=[2s] tries=2
	// asks 30s  "busy" err=<nil> waits=[] tries=1
	// down      "" err=summarize: 503 Service Unavailable waits=[400ms 800ms] tries=3
}
