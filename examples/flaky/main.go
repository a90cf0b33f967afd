// Command flaky shows retryhttp against a local flaky "LLM provider": the
// retries in the logs, the server's Retry-After winning over the backoff, a
// public-tier call failing fast when the provider asks for more time than
// the turn's budget holds, and eight calls meeting one rate limit, with and
// without a shared Cooldown. It needs no network: the provider runs on
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
	"strconv"
	"strings"
	"sync"
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

	fmt.Println("\n== eight calls meet one rate limit: the provider answers the first 429, retry-after-ms 1000")
	for _, shared := range []bool{false, true} {
		requests, err := burst(provider, shared)
		if err != nil {
			return err
		}
		if shared {
			fmt.Printf("with a Cooldown:    8 answers, %d requests: the first 429 held the other seven\n", requests)
		} else {
			fmt.Printf("without a Cooldown: 8 answers, %d requests: each call collected its own 429\n", requests)
		}
	}
	return nil
}

// burst sends one call, and seven more 50 ms later while the provider is
// still limiting, through one Transport, with or without a Cooldown; it
// returns how many requests the provider saw.
func burst(provider *httptest.Server, shared bool) (int64, error) {
	opts := []retryhttp.Option{}
	if shared {
		opts = append(opts, retryhttp.WithCooldown(retryhttp.NewCooldown(nil)))
	}
	client := &http.Client{Transport: retryhttp.New(http.DefaultTransport, opts...)}
	scene := fmt.Sprintf("%s/v1/chat/completions?limited=%v", provider.URL, shared)
	errs := make(chan error, 8)
	for i := range 8 {
		if i == 1 {
			time.Sleep(50 * time.Millisecond) // the first call has met the limit
		}
		go func() {
			_, err := complete(context.Background(), client, scene)
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	return limited.requests(scene), nil
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

// limitedScenes is the provider's state for ?limited=: per scene, when the
// limit ends and how many requests it saw.
type limitedScenes struct {
	mu     sync.Mutex
	until  map[string]time.Time
	counts map[string]int64
}

var limited = limitedScenes{until: map[string]time.Time{}, counts: map[string]int64{}}

// admit counts a request of scene and returns how long it must still wait:
// the first request starts a one-second limit.
func (l *limitedScenes) admit(scene string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[scene]++
	if _, ok := l.until[scene]; !ok {
		l.until[scene] = time.Now().Add(time.Second)
	}
	return time.Until(l.until[scene])
}

func (l *limitedScenes) requests(url string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[url[strings.Index(url, "?")+1:]]
}

// newProvider starts a fake LLM API on 127.0.0.1 that fails the way real
// ones do: an overloaded 503, then a 429 asking for 1.5 s in retry-after-ms,
// then an answer. With ?overloaded=1 it always answers 429, Retry-After: 30.
// With ?limited=... the first request starts a one-second rate limit, and
// every request within it gets a 429 with what is left in retry-after-ms.
func newProvider() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Has("limited") {
			if wait := limited.admit(r.URL.RawQuery); wait > 0 {
				w.Header().Set("retry-after-ms", strconv.FormatInt(wait.Milliseconds()+1, 10))
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, `{"error":{"type":"rate_limit_error"}}`)
				return
			}
			io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
			return
		}
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
