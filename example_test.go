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
