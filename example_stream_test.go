package retryhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// A stream that fails with an error event after its 200 is retried, as a
// 529 would be, until one brings its first token; the caller reads that
// stream alone. Each try says how long its first token took, or the type
// of the error it began with.
func ExampleWithStreamRetry() {
	start := retryhttptest.Event("message_start", `{"type":"message_start","message":{"role":"assistant"}}`)
	overloaded := retryhttptest.Event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	delta := retryhttptest.Event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`)
	clk := retryhttptest.NewClock()
	provider := retryhttptest.NewScript(
		retryhttptest.Stream(retryhttptest.Chunk{Data: start}, retryhttptest.Chunk{After: 300 * time.Millisecond, Data: overloaded}),
		retryhttptest.Stream(retryhttptest.Chunk{Data: start}, retryhttptest.Chunk{After: 30 * time.Second, Data: delta}), // stalls
		retryhttptest.Stream(retryhttptest.Chunk{Data: start}, retryhttptest.Chunk{After: 200 * time.Millisecond, Data: delta}),
	).WithClock(clk)
	client := &http.Client{Transport: retryhttp.New(provider, retryhttp.WithClock(clk),
		retryhttp.WithStreamRetry(2*time.Second),
		retryhttp.WithMaxRetries(3),
		retryhttp.WithBackoff(retryhttp.Backoff{Base: 100 * time.Millisecond}),
		retryhttp.WithObserver(func(_ context.Context, a retryhttp.Attempt) {
			fmt.Printf("try %d: %s %q first token %v, error %v\n", a.Try, a.Outcome, a.StreamError, a.FirstToken, a.Err)
		}))}

	resp, err := client.Post("https://api.anthropic.com/v1/messages", "application/json", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body) == start+delta)
	// Output:
	// try 1: retrying "overloaded_error" first token 0s, error <nil>
	// try 2: retrying "" first token 0s, error retryhttp: no first token within 2s of the try's send
	// try 3: done "" first token 200ms, error <nil>
	// true
}
