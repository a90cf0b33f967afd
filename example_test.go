package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"go.uber.org/zap"
)

// flakyServer answers 503 to the first n requests, then 200.
func flakyServer(n int32, header ...string) *httptest.Server {
	var hits atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= n {
			for i := 0; i+1 < len(header); i += 2 {
				w.Header().Set(header[i], header[i+1])
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
}

func Example() {
	srv := flakyServer(1) // one 503, then 200
	defer srv.Close()

	client := &http.Client{Transport: retryhttp.New(http.DefaultTransport,
		retryhttp.WithBackoff(retryhttp.Backoff{Base: time.Millisecond, Factor: 2}), // short, for the example
		retryhttp.WithObserver(func(_ context.Context, a retryhttp.Attempt) {
			fmt.Printf("try %d/%d: %d %s\n", a.Try, a.MaxTries, a.Status, a.Outcome)
		}),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// try 1/3: 503 retrying
	// try 2/3: 200 done
	// 200 hello
}

// A public-tier request carries a Budget. When the provider asks for a wait
// the Budget cannot cover, the call fails at once with ErrRateLimited instead
// of holding the user for 30 seconds.
func ExampleWithBudget() {
	srv := flakyServer(100, "Retry-After", "30")
	defer srv.Close()
	client := &http.Client{Transport: retryhttp.New(nil)}

	ctx := retryhttp.WithBudget(context.Background(), retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	start := time.Now()
	_, err := client.Do(req)

	var rerr *retryhttp.Error
	if errors.Is(err, retryhttp.ErrRateLimited) && errors.As(err, &rerr) {
		fmt.Printf("busy: try again in %v (gave up after %d try, at once: %v)\n",
			rerr.RetryAfter, rerr.Tries, time.Since(start) < time.Second)
	}
	// Output:
	// busy: try again in 30s (gave up after 1 try, at once: true)
}

// Every retry is a Warn entry; the URL is written without its query or
// userinfo.
func ExampleWithLogger() {
	// The provider, scripted with the test kit: a 429, then a 200.
	base := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After-Ms", "20"), retryhttptest.Status(200))
	log := zap.NewExample() // JSON on stdout, no timestamps
	client := &http.Client{Transport: retryhttp.New(base, retryhttp.WithLogger(log),
		retryhttp.WithBackoff(retryhttp.Backoff{Base: time.Millisecond}))}

	resp, err := client.Get("https://user:secret@api.example.com/v1/chat?key=sk-123")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// {"level":"warn","msg":"llm transient failure — retrying","attempt":1,"max":2,"status":429,"wait_ms":20,"wait_from":"retry-after","ask_from":"header","method":"GET","url":"https://api.example.com/v1/chat"}
	// 200
}

// A program that logs with log/slog gets the same entries as slog records.
// Here the provider asks for its wait in a JSON error body, as Gemini does:
// ask_from says so.
func ExampleWithSlog() {
	ask := retryhttptest.Status(429, "Content-Type", "application/json")
	ask.Body = `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.020s"}]}}`
	base := retryhttptest.NewScript(ask, retryhttptest.Status(200))
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // no time, for the example's output
			}
			return a
		},
	}))
	client := &http.Client{Transport: retryhttp.New(base, retryhttp.WithSlog(log),
		retryhttp.WithBackoff(retryhttp.Backoff{Base: time.Millisecond}))}

	resp, err := client.Get("https://user:secret@api.example.com/v1/chat?key=sk-123")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// level=WARN msg="llm transient failure — retrying" attempt=1 max=2 status=429 wait_ms=20 wait_from=retry-after ask_from=body method=GET url=https://api.example.com/v1/chat
	// 200
}

// Tests of code that uses the transport need not wait for real: give it the
// test kit's Clock, on which every wait takes no time and is recorded
// exactly. No goroutine moves it: each wait moves it on by itself.
func ExampleWithClock() {
	srv := flakyServer(2, "Retry-After", "60") // asks for a minute, twice
	defer srv.Close()
	clk := retryhttptest.NewClock()
	client := &http.Client{Transport: retryhttp.New(nil, retryhttp.WithClock(clk))}

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after waiting", clk.Waits())
	// Output:
	// 200 after waiting [1m0s 1m0s]
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, h := range []http.Header{
		{"Retry-After": {"120"}},
		{"Retry-After": {"1.5"}},
		{"Retry-After": {"Mon, 30 Nov 2026 12:00:30 GMT"}},
		{"Retry-After-Ms": {"250"}, "Retry-After": {"1"}},
		{"Retry-After": {"soon"}},
	} {
		d, ok := retryhttp.ParseRetryAfter(h, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 1.5s true
	// 30s true
	// 250ms true
	// 0s false
}

func ExampleBackoff_Delay() {
	b := retryhttp.DefaultBackoff
	for retry := 1; retry <= 3; retry++ {
		fmt.Println(b.Delay(retry, 0.5), "from", b.Delay(retry, 0), "to", b.Delay(retry, 0.999999).Round(time.Millisecond))
	}
	// Output:
	// 400ms from 320ms to 480ms
	// 800ms from 640ms to 960ms
	// 1.6s from 1.28s to 1.92s
}

// A Classifier can add what the default leaves out, here a provider's
// "overloaded" error sent as a 400 with a known body prefix it told us about
// in a header.
func ExampleClassifier() {
	overloaded := func(req *http.Request, resp *http.Response, err error) retryhttp.Class {
		if resp != nil && resp.StatusCode == 400 && strings.EqualFold(resp.Header.Get("X-Error-Type"), "overloaded") {
			return retryhttp.Transient
		}
		return retryhttp.Classify(req, resp, err)
	}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com", nil)
	resp := &http.Response{StatusCode: 400, Header: http.Header{"X-Error-Type": {"overloaded"}}}
	fmt.Println(overloaded(req, resp, nil), retryhttp.Classify(req, resp, nil))
	// Output:
	// transient permanent
}

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
	call("gpt-4o")      // admitted: its answer states gpt-4o's limit, one in 10 s
	call("gpt-4o")      // paced: it waits for its slot (2% under the stated rate), where a 429 would have come
	call("gpt-4o-mini") // another model: not held
	call("gpt-4o")      // paced again
	// Output:
	// https://api.openai.com/gpt-4o: 200 after 0s
	// https://api.openai.com/gpt-4o: 200 after 10.2s
	// https://api.openai.com/gpt-4o-mini: 200 after 0s
	// https://api.openai.com/gpt-4o: 200 after 10.2s
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
