package retryhttptest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// A test of an app's Cooldown set-up: 40 calls to a provider that admits 10
// requests a second, 5 at once, with the set-up and without it. Without a
// Cooldown, each call that meets the limit spends a 429 on finding it; with
// one, the first 429 and the provider's counts give it the rate, and the
// calls after it are paced (R17). Calls from many goroutines are for a
// testing/synctest bubble (see the package doc); an Example runs them one
// after another, on a Clock, so that its output is exact.
func ExampleProvider() {
	for _, cooldown := range []bool{false, true} {
		clk := retryhttptest.NewClock()
		provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{
			Requests: retryhttptest.Limit{Rate: 10, Size: 5},
			Clock:    clk,
		})
		opts := []retryhttp.Option{retryhttp.WithClock(clk), retryhttp.WithMaxRetries(10)}
		if cooldown {
			opts = append(opts, retryhttp.WithCooldown(retryhttp.NewCooldown(nil)))
		}
		client := &http.Client{Transport: retryhttp.New(provider, opts...)}

		ok := 0
		for range 40 {
			resp, err := client.Post("https://api.openai.com/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-4o"}`))
			if err == nil && resp.StatusCode == http.StatusOK {
				ok++
			}
			if err == nil {
				resp.Body.Close()
			}
		}
		perSuccess := float64(provider.Stats().Requests) / float64(ok)
		fmt.Printf("cooldown %-5v: %d of 40 ok; at most 1.1 requests per success: %v\n", cooldown, ok, perSuccess <= 1.1)
	}
	// Output:
	// cooldown false: 40 of 40 ok; at most 1.1 requests per success: false
	// cooldown true : 40 of 40 ok; at most 1.1 requests per success: true
}

// A token limit of 50,000 a minute, in OpenAI's words: a request of 30,000
// tokens is admitted; the next is refused as soon as the 20,000 left are
// fewer than it asks for, and told when there will be room.
func ExampleNewProvider() {
	mock := clock.NewMock() // a fixed clock: nothing refills
	provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{
		Tokens: retryhttptest.PerMinute(50000),
		Clock:  mock,
	})
	prompt := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("word ", 23988) + `"}]}`
	fmt.Println("cost:", retryhttptest.DefaultCost([]byte(prompt)).Tokens, "tokens")
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/chat/completions", strings.NewReader(prompt))
		resp, _ := provider.RoundTrip(req)
		var body struct{ Error struct{ Message string } }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		fmt.Printf("%d, remaining %s, retry-after-ms %q\n", resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining-Tokens"), resp.Header.Get("Retry-After-Ms"))
		if body.Error.Message != "" {
			fmt.Println(body.Error.Message)
		}
	}
	// Output:
	// cost: 30000 tokens
	// 200, remaining 20000, retry-after-ms ""
	// 429, remaining 20000, retry-after-ms "12000"
	// Rate limit reached for gpt-4o in organization org-fake on tokens per min (TPM): Limit 50000, Used 30000, Requested 30000. Please try again in 12s. Visit https://platform.openai.com/account/rate-limits to learn more.
}

// Each dialect says something else about the same refusal: here, a request
// 250 ms before the provider has room for it. What retryhttp reads of it
// (ParseRetryAfter, ParseErrorBody) is the wait it takes at least.
func ExampleDialect() {
	for _, d := range retryhttptest.Dialects() {
		mock := clock.NewMock()
		provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: d, Clock: mock,
			Requests: retryhttptest.Limit{Rate: 4, Size: 1}})
		var resp *http.Response
		for range 2 {
			req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat", strings.NewReader("{}"))
			resp, _ = provider.RoundTrip(req)
		}
		body, _ := io.ReadAll(resp.Body)
		wait, _ := retryhttp.ParseRetryAfter(resp.Header, mock.Now())
		wait = max(wait, retryhttp.ParseErrorBody(body).RetryAfter)
		fmt.Printf("%-12s %d, Retry-After %q, retry-after-ms %q, %s: waits %v\n", d, resp.StatusCode,
			resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"), resp.Header.Get("Content-Type"), wait)
	}
	// Output:
	// openai       429, Retry-After "1", retry-after-ms "250", application/json: waits 250ms
	// anthropic    429, Retry-After "1", retry-after-ms "", application/json: waits 1s
	// retry-after  429, Retry-After "1", retry-after-ms "", application/json: waits 1s
	// gemini       429, Retry-After "", retry-after-ms "", application/json: waits 250ms
	// bare         429, Retry-After "", retry-after-ms "", text/plain; charset=utf-8: waits 0s
}

// An outage: the provider refuses everything for 5 s and says so; the
// transport waits it out and the call succeeds when the provider is back.
func ExampleProvider_Outage() {
	clk := retryhttptest.NewClock()
	provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Clock: clk})
	provider.Outage(clk.Now().Add(5 * time.Second))
	client := &http.Client{Transport: retryhttp.New(provider, retryhttp.WithClock(clk))}

	resp, err := client.Get("https://api.openai.com/v1/models")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, clk.Waits(), "refused during the outage:", provider.Stats().RefusedOutage)
	// Output:
	// 200 [5s] refused during the outage: 1
}

// A Provider is an http.Handler too: on a loopback server it answers as
// over the network, for a client that must dial (an SDK with its own
// transport).
func ExampleProvider_ServeHTTP() {
	provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 1, Size: 2}})
	srv := httptest.NewServer(provider)
	defer srv.Close()

	for range 3 {
		resp, err := srv.Client().Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader("{}"))
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining-Requests"))
	}
	// Output:
	// 200 1
	// 200 0
	// 429 0
}

// Limits per model, as OpenAI and Anthropic enforce them: gpt-4o has 100
// requests a second with a burst of 10, and 30,000 tokens a second;
// gpt-4o-mini has limits of its own; every other model shares the
// provider's. Spending gpt-4o's burst refuses gpt-4o alone, and each answer
// counts its own model's buckets.
func ExampleModelLimits() {
	mock := clock.NewMock() // a fixed clock: nothing refills
	provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{
		Requests: retryhttptest.PerMinute(500),
		Models: map[string]retryhttptest.ModelLimits{
			"gpt-4o":      {Requests: retryhttptest.Limit{Rate: 100, Size: 10}, Tokens: retryhttptest.Limit{Rate: 30000}},
			"gpt-4o-mini": {Requests: retryhttptest.Limit{Rate: 500, Size: 50}, Tokens: retryhttptest.Limit{Rate: 200000}},
		},
		Clock: mock,
	})
	call := func(model string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, "https://api.openai.com/v1/chat/completions", strings.NewReader(`{"model":"`+model+`","messages":[]}`))
		resp, _ := provider.RoundTrip(req)
		resp.Body.Close()
		return resp
	}
	for range 10 {
		call("gpt-4o")
	}
	for _, model := range []string{"gpt-4o", "gpt-4o-mini", "o3"} {
		resp := call(model)
		h := resp.Header
		fmt.Printf("%-11s %d, requests %s of %s, tokens %q of %q, retry-after-ms %q\n", model, resp.StatusCode,
			h.Get("X-Ratelimit-Remaining-Requests"), h.Get("X-Ratelimit-Limit-Requests"),
			h.Get("X-Ratelimit-Remaining-Tokens"), h.Get("X-Ratelimit-Limit-Tokens"), h.Get("Retry-After-Ms"))
	}
	s := provider.ModelStats("gpt-4o")
	fmt.Printf("gpt-4o: %d requests, %d admitted, %d refused by its requests limit; all models: %d requests\n",
		s.Requests, s.Admitted, s.RefusedRequests, provider.Stats().Requests)
	// Output:
	// gpt-4o      429, requests 0 of 10, tokens "29920" of "30000", retry-after-ms "10"
	// gpt-4o-mini 200, requests 49 of 50, tokens "199990" of "200000", retry-after-ms ""
	// o3          200, requests 499 of 500, tokens "" of "", retry-after-ms ""
	// gpt-4o: 11 requests, 10 admitted, 1 refused by its requests limit; all models: 13 requests
}
