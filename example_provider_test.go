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

// modelKey is the context key an app puts the model of a call under.
type modelKey struct{}

// A Cooldown keyed by model: an OpenAI organization's limits are per model,
// so a 429 for one model holds the calls to that model only. This key
// function of the app's own reads the model the app put in the request's
// context (KeyByModel reads it from the request itself).
func ExampleNewCooldown() {
	cooldown := retryhttp.NewCooldown(func(r *http.Request) string {
		model, _ := r.Context().Value(modelKey{}).(string)
		return r.URL.Host + "/" + model
	})
	clk := retryhttptest.NewClock()
	provider := retryhttptest.NewScript(
		retryhttptest.Status(429, "Retry-After", "20"), // gpt-4o is rate limited for 20 s
		retryhttptest.Reply{Body: "ok"},
	).WithClock(clk)
	// Every Transport of the app shares the Cooldown (and the clock).
	transport := retryhttp.New(provider, retryhttp.WithClock(clk), retryhttp.WithCooldown(cooldown), retryhttp.WithMaxRetries(0))

	call := func(model string) {
		ctx := context.WithValue(context.Background(), modelKey{}, model)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.openai.com/v1/chat/completions", strings.NewReader("{}"))
		before := clk.Now()
		resp, err := transport.RoundTrip(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Printf("%s: %d after %v\n", model, resp.StatusCode, clk.Since(before))
	}
	call("gpt-4o")      // the 429 arms gpt-4o's cooldown
	call("gpt-4o-mini") // another model: not held
	call("gpt-4o")      // held until the provider's 20 s are over, then sent
	fmt.Println("waits:", clk.Waits())
	// Output:
	// gpt-4o: 429 after 0s
	// gpt-4o-mini: 200 after 0s
	// gpt-4o: 200 after 20s
	// waits: [20s]
}

// OpenAI's limits are per model, and its SDK puts the model only in the
// JSON body: a Cooldown keyed by KeyByModel reads it there (Gemini's from
// the path), so that a 429 for gpt-4o holds the next gpt-4o call until the
// provider has room, and none of gpt-4o-mini's.
func ExampleKeyByModel() {
	clk := retryhttptest.NewClock()
	provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Clock: clk, Models: map[string]retryhttptest.ModelLimits{
		"gpt-4o":      {Requests: retryhttptest.Limit{Rate: 0.1, Size: 1}}, // one at once, then one in 10 s
		"gpt-4o-mini": {Requests: retryhttptest.PerMinute(500)},
	}})
	cooldown := retryhttp.NewCooldown(retryhttp.KeyByModel)
	transport := retryhttp.New(provider, retryhttp.WithClock(clk), retryhttp.WithCooldown(cooldown), retryhttp.WithMaxRetries(0))

	call := func(model string) {
		req, _ := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/chat/completions", strings.NewReader(`{"model":"`+model+`","messages":[]}`))
		key := retryhttp.KeyByModel(req)
		before := clk.Now()
		resp, err := transport.RoundTrip(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Printf("%s: %d after %v\n", key, resp.StatusCode, clk.Since(before))
	}
	call("gpt-4o")      // admitted
	call("gpt-4o")      // refused: the 429 holds gpt-4o's key for the 10 s the provider asks
	call("gpt-4o-mini") // another model: not held
	call("gpt-4o")      // held, then admitted
	// Output:
	// https://api.openai.com/gpt-4o: 200 after 0s
	// https://api.openai.com/gpt-4o: 429 after 0s
	// https://api.openai.com/gpt-4o-mini: 200 after 0s
	// https://api.openai.com/gpt-4o: 200 after 10s
}

// Some SDKs (langchaingo among them) replace the transport's error with text
// of their own, so errors.Is cannot find ErrRateLimited in what they return.
// The Budget still knows: after the call, Err says the provider was busy,
// and for how long.
func ExampleBudget_Err() {
	provider := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "30"))
	client := &http.Client{Transport: retryhttp.New(provider)}
	sdkCall := func(ctx context.Context) error { // an SDK that hides the cause
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/v1/chat", strings.NewReader("{}"))
		if _, err := client.Do(req); err != nil {
			return errors.New("network error: failed to reach API server")
		}
		return nil
	}

	budget := retryhttp.NewBudget(retryhttp.PublicTierMaxWait)
	err := sdkCall(retryhttp.WithBudget(context.Background(), budget))
	fmt.Println("the SDK says:", err)
	fmt.Println("errors.Is finds it:", errors.Is(err, retryhttp.ErrRateLimited))
	var busy *retryhttp.Error
	if errors.As(budget.Err(), &busy) {
		fmt.Printf("the Budget says: busy, come back in %v\n", busy.RetryAfter.Round(time.Second))
	}
	// Output:
	// the SDK says: network error: failed to reach API server
	// errors.Is finds it: false
	// the Budget says: busy, come back in 30s
}
