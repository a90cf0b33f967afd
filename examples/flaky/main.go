// Command flaky shows retryhttp against local flaky "LLM providers": the
// retries in the logs, the server's Retry-After winning over the backoff, a
// public-tier call failing fast when the provider asks for more time than
// the turn's budget holds, eight workers meeting one rate limit, with
// and without a shared Cooldown, and a provider down for a second, with a
// circuit and a fallback model. It needs no network: the providers run on
// 127.0.0.1 inside the program; the rate-limited ones are retryhttptest's
// fake provider (retryhttptest.Provider), which tests can use too.
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
	"github.com/retryhttp/retryhttp/retryhttptest"
	"go.uber.org/zap"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flaky:", err)
		os.Exit(1)
	}
}

func run() error {
	paid := newPaidTier()
	defer paid.Close()
	// The public tier's provider (retryhttptest's fake provider, speaking as
	// a gateway does: Retry-After alone) will be down for 30 s.
	down := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: retryhttptest.RetryAfterDialect})
	busy := httptest.NewServer(down)
	defer busy.Close()

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
	answer, err := complete(context.Background(), client, paid.URL+"/v1/chat/completions?api-key=sk-demo-secret")
	if err != nil {
		return err
	}
	fmt.Printf("answer %s after %d tries in %v\n", answer, tries.Load(), time.Since(start).Round(10*time.Millisecond))
	fmt.Println(`(a try is each request sent: the first, then the retries; a retry's log line says which retry it is,
"attempt": 2, "max": 2 is the second of at most two retries, so the third try)`)
	fmt.Println()

	fmt.Println("== public tier: the provider asks for 30 s, the turn's budget is 10 s")
	ctx := retryhttp.WithBudget(context.Background(), retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
	down.Outage(time.Now().Add(30 * time.Second)) // a 429 with Retry-After: 30 to every request
	start = time.Now()
	_, err = complete(ctx, client, busy.URL+"/v1/chat/completions")
	var rerr *retryhttp.Error
	switch {
	case errors.Is(err, retryhttp.ErrRateLimited) && errors.As(err, &rerr):
		fmt.Printf("busy: try again in %v (failed fast, in %v, without sleeping)\n", rerr.RetryAfter, time.Since(start).Round(time.Millisecond))
	case err != nil:
		return fmt.Errorf("public tier: want ErrRateLimited, got %w", err)
	default:
		return errors.New("public tier: want ErrRateLimited, got an answer")
	}

	fmt.Println("\n== eight workers, 24 calls, one rate limit: 20 requests a second, 4 at once (OpenAI's headers)")
	for _, shared := range []bool{false, true} {
		s, took, err := workers(shared)
		if err != nil {
			return err
		}
		how := "without a Cooldown:"
		if shared {
			how = "with a Cooldown:   "
		}
		fmt.Printf("%s 24 answers, %d requests (%d refused) in %v\n", how, s.Requests, s.Refused, took.Round(10*time.Millisecond))
	}
	fmt.Println("(the Cooldown learns the rate from the first 429 and the provider's counts, and paces the calls under it)")

	fmt.Println("\n== a provider down, not just busy: a circuit, and a fallback model")
	return outage()
}

// workers sends 24 calls from eight goroutines through one Transport, with
// or without a Cooldown, to a fresh provider that admits 20 requests a
// second, 4 at once (retryhttptest's fake provider, in OpenAI's dialect);
// it returns what the provider counted and how long the calls took.
func workers(shared bool) (retryhttptest.ProviderStats, time.Duration, error) {
	provider := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 20, Size: 4}})
	srv := httptest.NewServer(provider)
	defer srv.Close()
	opts := []retryhttp.Option{retryhttp.WithMaxRetries(10)}
	if shared {
		opts = append(opts, retryhttp.WithCooldown(retryhttp.NewCooldown(nil)))
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: retryhttp.New(base, opts...)}
	start := time.Now()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 3 {
				if _, err := complete(context.Background(), client, srv.URL+"/v1/chat/completions"); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			return retryhttptest.ProviderStats{}, 0, err
		}
	}
	return provider.Stats(), time.Since(start), nil
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

// newPaidTier starts a fake LLM API on 127.0.0.1 that fails the way real
// ones do: an overloaded 503, then a 429 asking for 1.5 s in
// retry-after-ms, then an answer.
func newPaidTier() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
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
