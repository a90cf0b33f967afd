package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// A circuit per model, and a fallback: while Anthropic's model answers
// 529 overloaded (a provider down, not just busy), its calls fail at once
// with ErrUnavailable, and the app sends them to another model instead of
// waiting for retries that will fail too. The key function reads the model
// from the request's path here; a per-model key for JSON bodies reads the
// body's "model".
func ExampleWithCircuit() {
	clk := retryhttptest.NewClock()
	overloaded := retryhttptest.NewScript(retryhttptest.Status(529)).WithClock(clk)
	fallback := retryhttptest.NewScript(retryhttptest.Reply{Body: "ok"}).WithClock(clk)
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if strings.Contains(r.URL.Path, "claude") {
			return overloaded.RoundTrip(r)
		}
		return fallback.RoundTrip(r)
	})
	cooldown := retryhttp.NewCooldown(func(r *http.Request) string { return r.URL.Path },
		retryhttp.WithCircuit(retryhttp.Circuit{Failures: 3, Open: 30 * time.Second}))
	transport := retryhttp.New(base, retryhttp.WithClock(clk), retryhttp.WithCooldown(cooldown), retryhttp.WithMaxRetries(2),
		retryhttp.WithBackoff(retryhttp.Backoff{Base: 400 * time.Millisecond, Factor: 2}))

	call := func(model string) (int, error) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://llm.example.com/v1/"+model, strings.NewReader("{}"))
		resp, err := transport.RoundTrip(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for i := range 4 {
		status, err := call("claude")
		if errors.Is(err, retryhttp.ErrUnavailable) {
			status, err = call("gpt-4o-mini") // down: fall back at once
			fmt.Printf("call %d: claude down, gpt-4o-mini answered %d %v\n", i, status, err)
			continue
		}
		fmt.Printf("call %d: claude answered %d %v\n", i, status, err)
	}
	fmt.Println("claude got", overloaded.Len(), "requests; the waits:", clk.Waits())
	// Output:
	// call 0: claude answered 529 <nil>
	// call 1: claude down, gpt-4o-mini answered 200 <nil>
	// call 2: claude down, gpt-4o-mini answered 200 <nil>
	// call 3: claude down, gpt-4o-mini answered 200 <nil>
	// claude got 3 requests; the waits: [400ms 800ms]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
