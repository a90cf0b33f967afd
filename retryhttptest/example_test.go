package retryhttptest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// A Script answers tries in order and records each request, stamped on its
// clock.
func ExampleNewScript() {
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(retryhttptest.Status(503), retryhttptest.Reply{Body: "hello"}).WithClock(clk)
	start := clk.Now()
	client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk),
		retryhttp.WithBackoff(retryhttp.Backoff{Base: 400 * time.Millisecond}))}

	resp, err := client.Get("https://api.example.com/v1/models")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	for _, r := range script.Requests() {
		fmt.Println(r.Method, r.URL, "at +"+r.At.Sub(start).String())
	}
	// Output:
	// 200 OK hello
	// GET https://api.example.com/v1/models at +0s
	// GET https://api.example.com/v1/models at +400ms
}

// The server's Retry-After wins over a shorter backoff (R4), and the Clock
// records the wait.
func ExampleStatus() {
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "2"), retryhttptest.Status(200))
	client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk))}

	resp, err := client.Get("https://api.example.com/v1/chat")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, clk.Waits())
	// Output:
	// 200 [2s]
}

// Fail makes a try fail as the network would. With no retries left, the
// transport returns an *retryhttp.Error that still matches the cause.
func ExampleFail() {
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(retryhttptest.Fail(syscall.ECONNREFUSED))
	client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk),
		retryhttp.WithBackoff(retryhttp.Backoff{Base: 400 * time.Millisecond, Factor: 2}))}

	_, err := client.Get("https://api.example.com/v1/chat")
	fmt.Println(errors.Is(err, syscall.ECONNREFUSED), clk.Waits(), script.Len())
	// Output:
	// true [400ms 800ms] 3
}

// A try that hangs is cut by WithTryTimeout at exactly the timeout: the
// Script moves the Clock there itself, so the test needs no goroutine.
func ExampleHang() {
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(retryhttptest.Hang(), retryhttptest.Status(200)).WithClock(clk)
	client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk),
		retryhttp.WithTryTimeout(5*time.Second),
		retryhttp.WithObserver(func(_ context.Context, a retryhttp.Attempt) {
			fmt.Printf("try %d: status %d after %v, %v\n", a.Try, a.Status, a.Elapsed, a.Outcome)
		}))}

	resp, err := client.Get("https://api.example.com/v1/chat")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// Output:
	// try 1: status 0 after 5s, retrying
	// try 2: status 200 after 0s, done
}

// A stream that the network cuts mid-body is handed back as it is: the
// transport never retries a body that is the caller's (R6).
func ExampleReply_Cut() {
	script := retryhttptest.NewScript(retryhttptest.Reply{Body: `data: {"delta":"Hel`}.Cut(io.ErrUnexpectedEOF))
	client := &http.Client{Transport: retryhttp.New(script)}

	resp, err := client.Get("https://api.example.com/v1/chat?stream=true")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	fmt.Printf("%s | %v | tries %d\n", got, err, script.Len())
	// Output:
	// data: {"delta":"Hel | unexpected EOF | tries 1
}

// A stream comes in parts, a part a Read, each after its wait: on a
// Script's Clock the Read moves the clock on itself, so a stall of two
// seconds takes none.
func ExampleStream() {
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(retryhttptest.Stream(
		retryhttptest.Chunk{Data: retryhttptest.Event("message_start", `{"type":"message_start"}`)},
		retryhttptest.Chunk{After: 2 * time.Second, Data: retryhttptest.Event("content_block_delta", `{"type":"content_block_delta"}`)},
	)).WithClock(clk)
	start := clk.Now()
	resp, err := script.RoundTrip(&http.Request{Method: http.MethodPost})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	buf := make([]byte, 1024)
	for {
		n, err := resp.Body.Read(buf)
		if err != nil {
			fmt.Printf("+%v %v\n", clk.Since(start), err)
			break
		}
		fmt.Printf("+%v %q\n", clk.Since(start), buf[:n])
	}
	// Output:
	// 200 text/event-stream
	// +0s "event: message_start\ndata: {\"type\":\"message_start\"}\n\n"
	// +2s "event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\n"
	// +2s EOF
}

// Asks writes each form in which a server says how long to wait, relative to
// the Script's clock when the reply is served (here a clock.Mock, for a fixed
// date).
func ExampleReply_Asks() {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	for _, sig := range []retryhttptest.Signal{
		retryhttptest.RetryAfterSeconds, retryhttptest.RetryAfterMs, retryhttptest.RetryAfterDate,
		retryhttptest.OpenAIReset, retryhttptest.AnthropicReset, retryhttptest.RateLimitReset, retryhttptest.RateLimitField,
	} {
		script := retryhttptest.NewScript(retryhttptest.Status(429).Asks(sig, 2*time.Second)).WithClock(mock)
		resp, _ := script.RoundTrip(&http.Request{Method: http.MethodGet})
		fmt.Printf("%-17s", sig)
		for _, name := range []string{"Retry-After", "Retry-After-Ms", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests",
			"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset", "Ratelimit-Remaining", "Ratelimit-Reset", "Ratelimit"} {
			if v := resp.Header.Get(name); v != "" {
				fmt.Printf(" %s: %s", name, v)
			}
		}
		fmt.Println()
	}
	// Output:
	// retry-after       Retry-After: 2
	// retry-after-ms    Retry-After-Ms: 2000
	// retry-after-date  Retry-After: Mon, 30 Nov 2026 12:00:02 GMT
	// openai-reset      X-Ratelimit-Remaining-Requests: 0 X-Ratelimit-Reset-Requests: 2s
	// anthropic-reset   Anthropic-Ratelimit-Requests-Remaining: 0 Anthropic-Ratelimit-Requests-Reset: 2026-11-30T12:00:02Z
	// ratelimit-reset   Ratelimit-Remaining: 0 Ratelimit-Reset: 2
	// ratelimit         Ratelimit: "default";r=0;t=2
}

// A wait on the Clock returns at once; the clock has moved by exactly the
// wait, and remembers it.
func ExampleClock() {
	clk := retryhttptest.NewClock()
	start := clk.Now()
	<-clk.Timer(2 * time.Second).C
	clk.Sleep(400 * time.Millisecond)
	clk.Add(time.Minute) // moves time by hand: not a wait
	fmt.Println(clk.Waits(), clk.Since(start))
	// Output:
	// [2s 400ms] 1m2.4s
}

// The user gives up one second into a two-second wait: AfterFunc runs the
// cancel at that instant on the Clock, and the transport returns at once,
// having waited one second.
func ExampleClock_AfterFunc() {
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(retryhttptest.Status(503, "Retry-After", "2"))
	client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk.AfterFunc(time.Second, cancel)

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/v1/chat", nil)
	_, err := client.Do(req)
	var rerr *retryhttp.Error
	if errors.As(err, &rerr) {
		fmt.Println(rerr.Reason, "after", rerr.Tries, "try; waited", rerr.Waited)
	}
	// Output:
	// canceled after 1 try; waited 1s
}

// A deadline on the Clock: a wait that does not fit it is not taken (R7),
// and the last response comes back at once.
func ExampleClock_WithTimeout() {
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(retryhttptest.Status(503, "Retry-After", "5"), retryhttptest.Status(200))
	client := &http.Client{Transport: retryhttp.New(script, retryhttp.WithClock(clk))}
	ctx, cancel := clk.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/v1/chat", nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, clk.Waits(), script.Len())
	// Output:
	// 503 [] 1
}

// Len tells how many requests reached the Script: 0 when nothing was sent,
// as for a request whose context had already ended.
func ExampleScript_Len() {
	script := retryhttptest.NewScript()
	client := &http.Client{Transport: retryhttp.New(script)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/v1/chat", nil)
	_, err := client.Do(req)
	fmt.Println(errors.Is(err, context.Canceled), script.Len())
	// Output:
	// true 0
}
