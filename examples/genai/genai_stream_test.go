package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"google.golang.org/genai"
)

// TestStream: a streamed answer (GenerateContentStream, alt=sse) is retried
// by retryhttp only before its first byte; once a chunk is handed over,
// nothing is re-sent (R6), and a connection dropped mid-stream surfaces as
// the stream's error. The SDK's own automatic continuation may send a new
// request, carrying the stream's continuation token: a new call, not a
// retry (the transport sees its first try).
func TestStream(t *testing.T) {
	full := strings.Join(answer, "")
	tests := []struct {
		name       string
		plan       []reply
		config     *genai.GenerateContentConfig
		wantText   string
		wantErr    bool
		wantTokens []string // continuationToken each try sent
	}{
		{name: "to the end", plan: []reply{ok()}, wantText: full, wantTokens: []string{""}},
		{name: "after a 429, before the first byte", plan: []reply{rateLimited("1s"), ok()},
			wantText: full, wantTokens: []string{"", ""}},
		{name: "after a 503, before the first byte", plan: []reply{fail(503), ok()},
			wantText: full, wantTokens: []string{"", ""}},
		{name: "cut after the first chunk is not re-sent", plan: []reply{{cut: true}, ok()},
			wantText: answer[0], wantErr: true, wantTokens: []string{""}},
		{name: "cut after a checkpoint: the SDK continues", plan: []reply{{cut: true, token: true}, ok()},
			wantText: full, wantTokens: []string{"", "Y2hlY2twb2ludC0x"}},
		{name: "cut after a checkpoint, continuation off", plan: []reply{{cut: true, token: true}, ok()},
			config:   &genai.GenerateContentConfig{AutomaticContinuation: genai.Ptr(false)},
			wantText: answer[0], wantErr: true, wantTokens: []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.plan, smallBackoff)
			var text strings.Builder
			var err error
			for chunk, cerr := range r.client.Models.GenerateContentStream(context.Background(), model, genai.Text("Say hello."), tt.config) {
				if cerr != nil {
					err = cerr
					break
				}
				text.WriteString(chunk.Text())
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("stream error %v, want error: %t", err, tt.wantErr)
			}
			if _, ok := apiError(err); ok {
				t.Errorf("stream error %v is a genai.APIError, want the dropped connection's", err)
			}
			if got := text.String(); got != tt.wantText {
				t.Errorf("streamed %q, want %q", got, tt.wantText)
			}
			tries := r.p.Tries()
			var tokens []string
			for i, try := range tries {
				tokens = append(tokens, try.continuationToken)
				if !try.stream {
					t.Errorf("try %d did not ask for a stream", i+1)
				}
			}
			if !slices.Equal(tokens, tt.wantTokens) {
				t.Errorf("provider saw %d tries with continuation tokens %q, want %q", len(tries), tokens, tt.wantTokens)
			}
			// A retry by the transport is a try > 1 of one call; the SDK's
			// continuation is a new call (Try 1 again).
			var retries int
			for _, a := range r.Attempts() {
				if a.Try > 1 {
					retries++
				}
			}
			wantRetries := 0
			if tt.plan[0].status != 0 {
				wantRetries = 1
			}
			if retries != wantRetries {
				t.Errorf("transport re-sent %d times, want %d", retries, wantRetries)
			}
		})
	}
}

// TestStreamErrorEventRetried: Gemini fails a stream it has answered 200
// with an error chunk (UNAVAILABLE) before its first text. With
// WithStreamRetry the transport retries it (R26) and the SDK reads the
// whole answer of the retried stream, with no error; the Attempt says the
// error's status. Without it, the SDK's stream fails with the APIError.
func TestStreamErrorEventRetried(t *testing.T) {
	for _, tt := range []struct {
		name      string
		opts      []retryhttp.Option
		wantTries int
		wantErr   bool
	}{
		{"WithStreamRetry", []retryhttp.Option{retryhttp.WithStreamRetry(10 * time.Second)}, 2, false},
		{"without it", nil, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []reply{streamFail(), ok()}, append([]retryhttp.Option{smallBackoff}, tt.opts...)...)
			var text strings.Builder
			var err error
			for chunk, cerr := range r.client.Models.GenerateContentStream(context.Background(), model, genai.Text("Say hello."), nil) {
				if cerr != nil {
					err = cerr
					break
				}
				text.WriteString(chunk.Text())
			}
			if got := len(r.p.Tries()); got != tt.wantTries {
				t.Errorf("provider saw %d tries, want %d", got, tt.wantTries)
			}
			if tt.wantErr {
				if e, ok := apiError(err); !ok || e.Status != "UNAVAILABLE" {
					t.Errorf("stream error %v, want the APIError UNAVAILABLE the SDK read", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("stream error %v, want none: the retried stream is the SDK's", err)
			}
			if got := text.String(); got != strings.Join(answer, "") {
				t.Errorf("streamed %q, want the whole answer", got)
			}
			if a := r.Attempts(); len(a) != 2 || a[0].StreamError != "UNAVAILABLE" || a[0].Outcome != retryhttp.Retrying {
				t.Errorf("attempts %+v, want the first retried for its UNAVAILABLE", a)
			}
		})
	}
}
