package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"google.golang.org/genai"
)

// TestTransient: plain Transient statuses, in Gemini's error envelope, are
// retried after the backoff; a 400 is not, nor a 504 whose body says
// DEADLINE_EXCEEDED (the request overran Google's own deadline: repeated
// unchanged it spends another, RULES.md R19), and each reaches the caller
// as the SDK's genai.APIError.
func TestTransient(t *testing.T) {
	tests := []struct {
		name       string
		plan       []reply
		wantTries  int
		wantStatus string // of the SDK's error; "": the answer
	}{
		{"503 UNAVAILABLE then the answer", []reply{fail(503), ok()}, 2, ""},
		{"500 INTERNAL then the answer", []reply{fail(500), ok()}, 2, ""},
		{"504 DEADLINE_EXCEEDED is not retried", []reply{fail(504), ok()}, 1, "DEADLINE_EXCEEDED"},
		{"503 every time", []reply{fail(503)}, 3, "UNAVAILABLE"},
		{"400 INVALID_ARGUMENT is not retried", []reply{fail(400), ok()}, 1, "INVALID_ARGUMENT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.plan, smallBackoff)
			got, err := r.ask(context.Background())
			if tt.wantStatus == "" {
				if err != nil || got != strings.Join(answer, "") {
					t.Errorf("got %q, %v; want the answer", got, err)
				}
			} else if apiErr, ok := apiError(err); !ok || apiErr.Status != tt.wantStatus || apiErr.Code != tt.plan[0].status {
				t.Errorf("error %v, want a genai.APIError %d %s", err, tt.plan[0].status, tt.wantStatus)
			}
			if n := len(r.p.Tries()); n != tt.wantTries {
				t.Errorf("provider saw %d tries, want %d", n, tt.wantTries)
			}
			want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}[:tt.wantTries-1]
			if got := r.clock.Waits(); !slices.Equal(got, want) {
				t.Errorf("waits %v, want the backoff %v", got, want)
			}
			for i, line := range r.logs.FilterMessage(msgRetrying).All() {
				if f := line.ContextMap(); f["wait_from"] != "backoff" || f["status"] != int64(tt.plan[0].status) {
					t.Errorf("retry log line %d: %v, want status %d, wait_from backoff", i+1, f, tt.plan[0].status)
				}
			}
		})
	}
}

// TestAPIKey: the SDK sends its key in x-goog-api-key, which the fake Gemini
// API checks: a wrong key is a 400 that is not retried, no key a 403.
func TestAPIKey(t *testing.T) {
	p := newProvider()
	defer p.Close()
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()

	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      "AIza-wrong",
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{Transport: retryhttp.New(base, smallBackoff)},
		HTTPOptions: genai.HTTPOptions{BaseURL: p.URL},
	})
	if err != nil {
		t.Fatalf("genai.NewClient: %v", err)
	}
	_, err = client.Models.GenerateContent(context.Background(), model, genai.Text("Say hello."), nil)
	if apiErr, ok := apiError(err); !ok || apiErr.Code != 400 || apiErr.Message != "API key not valid. Please pass a valid API key." {
		t.Errorf("wrong key: error %v, want Gemini's 400 API key not valid", err)
	}
	if n := p.Rejected(); n != 1 {
		t.Errorf("wrong key: provider rejected %d requests, want 1 (a 400 is not retried)", n)
	}

	resp, err := (&http.Client{Transport: base}).Post(p.URL+"/v1beta/models/"+model+":generateContent", "application/json",
		strings.NewReader(`{"contents":[{"parts":[{"text":"Say hello."}]}]}`))
	if err != nil {
		t.Fatalf("POST without a key: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST without a key: status %d, want 403", resp.StatusCode)
	}
	if n := len(p.Tries()); n != 0 {
		t.Errorf("provider counted %d tries, want none", n)
	}
}
