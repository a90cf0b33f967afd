package main

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"google.golang.org/genai"
)

// sdkRetries turns on the SDK's own retry loop (HTTPOptions.RetryOptions)
// with its default 5 attempts, but 1 ms between them with no jitter (by
// default: 1 s, 2 s, 4 s, 8 s, each plus up to 1 s of jitter, on the real
// clock), so the tests below do not sleep.
func sdkRetries() *genai.HTTPRetryOptions {
	return &genai.HTTPRetryOptions{InitialDelay: genai.Ptr(0.001), Jitter: genai.Ptr(0.0)}
}

// TestStackedRetries counts what the provider sees of one call against a
// Gemini API that always answers 503 when the SDK's retries (off by default
// in v1.77.0; 5 attempts when RetryOptions is set) are stacked on
// retryhttp's (3 tries): 5 x 3 = 15 tries.
func TestStackedRetries(t *testing.T) {
	tests := []struct {
		name      string
		retryhttp bool
		sdk       *genai.HTTPRetryOptions
		wantTries int
	}{
		{"SDK retries off (default), retryhttp on", true, nil, 3},
		{"SDK retries on, retryhttp on", true, sdkRetries(), 15},
		{"SDK retries on with Attempts 1, retryhttp on", true, &genai.HTTPRetryOptions{Attempts: genai.Ptr[int32](1)}, 3},
		{"SDK retries on, no retryhttp", false, sdkRetries(), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(fail(503))
			defer p.Close()
			base := http.DefaultTransport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			var rt http.RoundTripper = base
			if tt.retryhttp {
				rt = retryhttp.New(base, retryhttp.WithBackoff(retryhttp.Backoff{Base: time.Millisecond}))
			}
			client, err := newClient(context.Background(), p.URL, rt, tt.sdk)
			if err != nil {
				t.Fatalf("genai.NewClient: %v", err)
			}
			_, err = client.Models.GenerateContent(context.Background(), model, genai.Text("Say hello."), nil)
			if apiErr, ok := apiError(err); !ok || apiErr.Code != 503 {
				t.Errorf("error %v, want a genai.APIError with code 503", err)
			}
			if n := len(p.Tries()); n != tt.wantTries {
				t.Errorf("provider saw %d tries, want %d", n, tt.wantTries)
			}
		})
	}
}

// TestSDKRetriesDefeatFailFast [R19]: with the SDK's retries on, the public
// tier's fail-fast is lost. retryhttp returns ErrRateLimited at once, but the
// SDK retries every transport error (common.go shouldRetryHTTPRequest): the
// provider gets 5 tries inside the 30 s it asked for.
func TestSDKRetriesDefeatFailFast(t *testing.T) {
	tests := []struct {
		name      string
		sdk       *genai.HTTPRetryOptions
		wantTries int
	}{
		{"SDK retries off", nil, 1},
		{"SDK retries on", sdkRetries(), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(rateLimited("30s"))
			defer p.Close()
			base := http.DefaultTransport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			client, err := newClient(context.Background(), p.URL,
				retryhttp.New(base, retryhttp.WithBackoff(retryhttp.Backoff{Base: time.Millisecond})), tt.sdk)
			if err != nil {
				t.Fatalf("genai.NewClient: %v", err)
			}
			ctx := retryhttp.WithBudget(context.Background(), retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
			_, err = client.Models.GenerateContent(ctx, model, genai.Text("Say hello."), nil)
			if !errors.Is(err, retryhttp.ErrRateLimited) {
				t.Errorf("error %v, want one that errors.Is ErrRateLimited", err)
			}
			if n := len(p.Tries()); n != tt.wantTries {
				t.Errorf("provider saw %d tries, want %d", n, tt.wantTries)
			}
		})
	}
}
