// Command anthropic runs the Anthropic Go SDK over retryhttp against a fake
// Anthropic API on 127.0.0.1. The fake answers the first call with a 429 and
// retry-after-ms; the SDK's own retries are off, so retryhttp alone retries,
// logs the retry, and the answer is printed.
//
//	go run .
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/retryhttp/retryhttp"
	"go.uber.org/zap"
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
		fmt.Fprintln(os.Stderr, "anthropic example:", err)
		os.Exit(1)
	}
}

// run starts the fake provider, makes one Messages call that is rate limited
// once, and writes the answer to out.
func run(ctx context.Context, out io.Writer, opts ...retryhttp.Option) error {
	p := newProvider(fail(http.StatusTooManyRequests, "retry-after-ms", "600"), ok())
	defer p.Close()

	transport := retryhttp.New(http.DefaultTransport, opts...)
	defer transport.CloseIdleConnections()
	client := newClient(p.URL, transport)

	// One user turn of the public tier: at most 10 s of waiting in all.
	ctx = retryhttp.WithBudget(ctx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
	msg, err := client.Messages.New(ctx, params())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, msg.Content[0].Text)
	return err
}

// params is the request of every call here: one short user message.
func params() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeHaiku4_5,
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
	}
}

// newClient returns an Anthropic client that sends every request through rt
// to baseURL. The SDK's own retries are off: retryhttp is the one owner of
// retries (the SDK's would multiply ours: 3 x 3 tries per call). opts come
// last, so they override.
func newClient(baseURL string, rt http.RoundTripper, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithAPIKey(apiKey),
		option.WithHTTPClient(&http.Client{Transport: rt}),
		option.WithMaxRetries(0),
	}, opts...)...)
}
