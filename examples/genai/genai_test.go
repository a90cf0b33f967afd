package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/genai"
)

// rig is a Gemini client over retryhttp against a fake Gemini API, with the
// SDK's retries off, on the test kit's Clock: every wait of the transport
// takes no time, is recorded in its Waits, and moves the Clock on by exactly
// its length. The fake API stamps each try on that Clock, so the gap between
// two tries is the wait between them. The Clock starts at the real time: the
// SDK's own deadlines are on the real clock.
type rig struct {
	p      *provider
	clock  *retryhttptest.Clock
	logs   *observer.ObservedLogs
	client *genai.Client

	mu       sync.Mutex
	attempts []retryhttp.Attempt
}

func newRig(t *testing.T, plan []reply, opts ...retryhttp.Option) *rig {
	t.Helper()
	r := &rig{p: newProvider(plan...), clock: retryhttptest.NewClock()}
	t.Cleanup(r.p.Close)
	r.p.SetClock(r.clock.Now)
	core, logs := observer.New(zap.WarnLevel)
	r.logs = logs
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections) // before p.Close: cleanups run last first
	opts = append([]retryhttp.Option{
		retryhttp.WithClock(r.clock),
		retryhttp.WithLogger(zap.New(core)),
		retryhttp.WithObserver(func(_ context.Context, a retryhttp.Attempt) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.attempts = append(r.attempts, a)
		}),
	}, opts...)
	client, err := newClient(context.Background(), r.p.URL, retryhttp.New(base, opts...), nil)
	if err != nil {
		t.Fatalf("genai.NewClient: %v", err)
	}
	r.client = client
	return r
}

// ask makes one GenerateContent call and returns its text.
func (r *rig) ask(ctx context.Context) (string, error) {
	resp, err := r.client.Models.GenerateContent(ctx, model, genai.Text("Say hello."), nil)
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}

// Attempts returns what the transport's Observer saw, one per try, in order.
func (r *rig) Attempts() []retryhttp.Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.attempts)
}

// gaps returns the time between consecutive tries, on the transport's clock.
func gaps(tries []try) []time.Duration {
	var d []time.Duration
	for i := 1; i < len(tries); i++ {
		d = append(d, tries[i].at.Sub(tries[i-1].at))
	}
	return d
}

// smallBackoff is smaller than every retryDelay below but one, without
// jitter, so the server's ask sets each wait exactly (R4).
var smallBackoff = retryhttp.WithBackoff(retryhttp.Backoff{Base: 100 * time.Millisecond, Factor: 2})

const (
	msgRetrying = "llm transient failure — retrying"
	msgGivingUp = "llm transient failure — giving up"
)

// apiError returns the SDK's own error for a response it read, if err holds
// one. The SDK returns genai.APIError as a value, not a pointer.
func apiError(err error) (genai.APIError, bool) {
	var apiErr genai.APIError
	ok := errors.As(err, &apiErr)
	return apiErr, ok
}

// detail returns the first detail of a Google error whose @type ends in typ.
func detail(e genai.APIError, typ string) map[string]any {
	for _, d := range e.Details {
		if s, _ := d["@type"].(string); strings.HasSuffix(s, "/google.rpc."+typ) {
			return d
		}
	}
	return nil
}
