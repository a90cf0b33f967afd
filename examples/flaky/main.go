// Command flaky shows retryhttp against a local flaky "LLM provider": the
// retries in the logs, the server's Retry-After winning over the backoff,
// and a public-tier call failing fast when the provider asks for more time
// than the turn's budget holds. It needs no network: the provider runs on
// 127.0.0.1 inside the program.
//
//	go run ./examples/flaky
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
	"go.uber.org/zap"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flaky:", err)
		os.Exit(1)
	}
}

func run() error {
	provider := newProvider()
	defer provider.Close()

	cfg := zap.NewDevelopmentConfig() // readable console lines on stdout
	cfg.OutputPaths, cfg.DisableStacktrace, cfg.DisableCaller = []string{"stdout"}, true, true
	log, err := cfg.Build()
	if err != nil {
		return err
	}
	defer log.Sync()

	var tries atomic.Int64
	client := &http.Client{Transport: retryhttp.New(http.DefaultTransport,
		retryhttp.WithLogger(log),
		retryhttp.WithObserver(func(context.Context, retryhttp.Attempt) { tries.Add(1) }), // metrics hook
	)}

	fmt.Println("== paid tier: 503, then 429 with retry-after-ms 1500, then an answer")
	start := time.Now()
	answer, err := complete(context.Background(), client, provider.URL+"/v1/chat/completions?api-key=sk-demo-secret")
	if err != nil {
		return err
	}
	fmt.Printf("answer %s after %d tries in %v\n\n", answer, tries.Load(), time.Since(start).Round(10*time.Millisecond))

	fmt.Println("== public tier: the provider asks for 30 s, the turn's budget is 10 s")
	ctx := retryhttp.WithBudget(context.Background(), retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
	start = time.Now()
	_, err = complete(ctx, client, provider.URL+"/v1/chat/completions?overloaded=1")
	var rerr *retryhttp.Error
	switch {
	case errors.Is(err, retryhttp.ErrRateLimited) && errors.As(err, &rerr):
		fmt.Printf("busy: try again in %v (failed fast, in %v, without sleeping)\n", rerr.RetryAfter, time.Since(start).Round(time.Millisecond))
	case err != nil:
		return fmt.Errorf("public tier: want ErrRateLimited, got %w", err)
	default:
		return errors.New("public tier: want ErrRateLimited, got an answer")
	}
	return nil
}

// complete sends one chat request and returns the answer's body.
func complete(ctx context.Context, client *http.Client, url string) (string, error) {
	body := `{"model":"demo","messages":[{"role":"user","content":"hello"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body)) // GetBody set: replayable
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-demo-secret") // never logged
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), nil
}

// newProvider starts a fake LLM API on 127.0.0.1 that fails the way real
// ones do: an overloaded 503, then a 429 asking for 1.5 s in retry-after-ms,
// then an answer. With ?overloaded=1 it always answers 429, Retry-After: 30.
func newProvider() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("overloaded") != "" {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"type":"rate_limit_error"}}`)
			return
		}
		switch n.Add(1) {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"type":"overloaded_error"}}`)
		case 2:
			w.Header().Set("retry-after-ms", "1500")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"type":"rate_limit_error"}}`)
		default:
			io.WriteString(w, `{"choices":[{"message":{"content":"Hello! The retries were invisible to me."}}]}`)
		}
	}))
}
