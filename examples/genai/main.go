// Command genai runs Google's Gemini Go SDK (google.golang.org/genai) over
// retryhttp against a fake Gemini API on 127.0.0.1. The fake answers the
// first call with Gemini's 429: no Retry-After header, the wait only in the
// body's google.rpc.RetryInfo (R19). The SDK's own retries are off (its
// default), so retryhttp alone retries, logs the retry, and the answer is
// printed.
//
//	go run .
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/retryhttp/retryhttp"
	"go.uber.org/zap"
	"google.golang.org/genai"
)

func main() {
	cfg := zap.NewDevelopmentConfig()
	cfg.DisableStacktrace = true
	cfg.DisableCaller = true
	log, err := cfg.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer func() { _ = log.Sync() }()
	if err := run(context.Background(), os.Stdout, retryhttp.WithLogger(log)); err != nil {
		fmt.Fprintln(os.Stderr, "genai example:", err)
		os.Exit(1)
	}
}

// runRetryDelay is the wait the fake Gemini API asks for in run: longer than
// any first backoff of DefaultBackoff (at most 480 ms), so the server's ask
// sets the wait (R4).
const runRetryDelay = "1.2s"

// run starts the fake Gemini API, makes one GenerateContent call that is
// rate limited once, and writes the answer to out.
func run(ctx context.Context, out io.Writer, opts ...retryhttp.Option) error {
	p := newProvider(rateLimited(runRetryDelay), ok())
	defer p.Close()

	transport := retryhttp.New(http.DefaultTransport, opts...)
	defer transport.CloseIdleConnections()
	client, err := newClient(ctx, p.URL, transport, nil)
	if err != nil {
		return err
	}

	// One user turn of the public tier: at most 10 s of waiting in all.
	ctx = retryhttp.WithBudget(ctx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
	resp, err := client.Models.GenerateContent(ctx, model, genai.Text("Say hello."), nil)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, resp.Text())
	return err
}

// newClient returns a Gemini API client that sends every request through rt
// to baseURL. retry is the SDK's own retry loop: nil (the SDK's default)
// leaves retryhttp the one owner of retries; the SDK's would multiply ours
// (5 x 3 tries per call) and retry the public tier's fail-fast error.
func newClient(ctx context.Context, baseURL string, rt http.RoundTripper, retry *genai.HTTPRetryOptions) (*genai.Client, error) {
	return genai.NewClient(ctx, &genai.ClientConfig{
		APIKey:      apiKey,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{Transport: rt},
		HTTPOptions: genai.HTTPOptions{BaseURL: baseURL, RetryOptions: retry},
	})
}
