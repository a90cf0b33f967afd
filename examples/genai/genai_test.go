package main

import (
	"context"
	"errors"
	"fmt"
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

// TestRetryDelay [R19]: Gemini's 429 carries its wait only in the body, as a
// google.rpc.RetryInfo retryDelay, with no Retry-After. retryhttp waits
// max(backoff, retryDelay) before the next try, logs it as the server's ask,
// and the SDK sees only the answer.
func TestRetryDelay(t *testing.T) {
	tests := []struct {
		name     string
		plan     []reply
		wantWait []time.Duration
		wantFrom string
	}{
		{"retryDelay 2.5s", []reply{rateLimited("2.5s"), ok()},
			[]time.Duration{2500 * time.Millisecond}, "retry-after"},
		{"retryDelay with nanoseconds", []reply{rateLimited("45.837906927s"), ok()},
			[]time.Duration{45837906927 * time.Nanosecond}, "retry-after"},
		{"two 429s in a row", []reply{rateLimited("2.5s"), rateLimited("4s"), ok()},
			[]time.Duration{2500 * time.Millisecond, 4 * time.Second}, "retry-after"},
		{"backoff longer than the retryDelay", []reply{rateLimited("0.05s"), ok()},
			[]time.Duration{100 * time.Millisecond}, "backoff"},
		{"Retry-After header longer than the retryDelay", []reply{
			func() reply { r := rateLimited("2.5s"); r.header = []string{"Retry-After", "5"}; return r }(), ok(),
		}, []time.Duration{5 * time.Second}, "retry-after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.plan, smallBackoff)
			got, err := r.ask(context.Background())
			if err != nil {
				t.Fatalf("GenerateContent: %v", err)
			}
			if want := strings.Join(answer, ""); got != want {
				t.Errorf("answer %q, want %q", got, want)
			}
			tries := r.p.Tries()
			if len(tries) != len(tt.wantWait)+1 {
				t.Fatalf("provider saw %d tries, want %d", len(tries), len(tt.wantWait)+1)
			}
			if got := gaps(tries); !slices.Equal(got, tt.wantWait) {
				t.Errorf("tries came %v apart on the transport's clock, want exactly %v", got, tt.wantWait)
			}
			if got := r.clock.Waits(); !slices.Equal(got, tt.wantWait) {
				t.Errorf("waits %v, want %v", got, tt.wantWait)
			}
			lines := r.logs.FilterMessage(msgRetrying).All()
			if len(lines) != len(tt.wantWait) {
				t.Fatalf("got %d retry log lines, want %d", len(lines), len(tt.wantWait))
			}
			for i, line := range lines {
				f := line.ContextMap()
				if f["wait_ms"] != tt.wantWait[i].Milliseconds() || f["wait_from"] != tt.wantFrom || f["status"] != int64(429) {
					t.Errorf("retry log line %d: %v, want status 429, wait_ms %d from %s", i+1, f, tt.wantWait[i].Milliseconds(), tt.wantFrom)
				}
			}
		})
	}
}

// TestDailyQuota [R19]: a 429 whose QuotaFailure names a per-day quota will
// not clear in a minute, whatever its RetryInfo says: it is sent once and
// handed to the SDK as it is, which surfaces it as its own genai.APIError,
// with or without a Budget (a spent quota is not "busy").
func TestDailyQuota(t *testing.T) {
	for _, withBudget := range []bool{false, true} {
		t.Run(fmt.Sprintf("budget %t", withBudget), func(t *testing.T) {
			r := newRig(t, []reply{dailyQuota(), ok()}, smallBackoff)
			ctx := context.Background()
			if withBudget {
				ctx = retryhttp.WithBudget(ctx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
			}
			_, err := r.ask(ctx)
			if n := len(r.p.Tries()); n != 1 {
				t.Errorf("provider saw %d tries, want 1: a per-day quota is not retried", n)
			}
			if w := r.clock.Waits(); len(w) != 0 {
				t.Errorf("transport waited %v, want no wait", w)
			}
			if errors.Is(err, retryhttp.ErrRateLimited) {
				t.Errorf("error %v is ErrRateLimited, want the provider's own answer", err)
			}
			apiErr, ok := apiError(err)
			if !ok {
				t.Fatalf("error %v (%T), want a genai.APIError", err, err)
			}
			if apiErr.Code != 429 || apiErr.Status != "RESOURCE_EXHAUSTED" || !strings.HasPrefix(apiErr.Message, "You exceeded your current quota") {
				t.Errorf("APIError{Code %d, Status %q, Message %q}, want 429 RESOURCE_EXHAUSTED and Gemini's message", apiErr.Code, apiErr.Status, apiErr.Message)
			}
			if qf := detail(apiErr, "QuotaFailure"); !strings.Contains(fmt.Sprint(qf), perDay) {
				t.Errorf("QuotaFailure detail %v, want it to name %s", qf, perDay)
			}
			if lines := r.logs.FilterMessage(msgRetrying).All(); len(lines) != 0 {
				t.Errorf("got %d retry log lines, want none", len(lines))
			}
		})
	}
}

// TestPublicTier: with a Budget of PublicTierMaxWait in the context, a 429
// whose retryDelay does not fit fails fast, after one try and no wait, as an
// error that errors.Is ErrRateLimited through the SDK (which wraps the
// transport's error with %w); one that fits is waited out and charged.
func TestPublicTier(t *testing.T) {
	tests := []struct {
		name        string
		plan        []reply
		wantErr     bool
		wantTries   int
		wantCharged time.Duration
	}{
		{name: "retryDelay 30s [R19]", plan: []reply{rateLimited("30s"), ok()}, wantErr: true, wantTries: 1},
		{name: "retryDelay 2.5s fits [R19]", plan: []reply{rateLimited("2.5s"), ok()}, wantTries: 2, wantCharged: 2500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.plan, smallBackoff)
			budget := retryhttp.NewBudget(retryhttp.PublicTierMaxWait)
			start := time.Now()
			_, err := r.ask(retryhttp.WithBudget(context.Background(), budget))
			if elapsed := time.Since(start); elapsed > 2*time.Second {
				t.Errorf("the call took %v of real time: it should not wait", elapsed)
			}
			if n := len(r.p.Tries()); n != tt.wantTries {
				t.Errorf("provider saw %d tries, want %d", n, tt.wantTries)
			}
			if got := budget.Waited(); got != tt.wantCharged {
				t.Errorf("budget charged %v, want %v", got, tt.wantCharged)
			}
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("GenerateContent: %v, want the answer", err)
				}
				return
			}
			if w := r.clock.Waits(); len(w) != 0 {
				t.Errorf("transport waited %v, want no wait", w)
			}
			if !errors.Is(err, retryhttp.ErrRateLimited) {
				t.Fatalf("GenerateContent error %v (%T), want one that errors.Is ErrRateLimited", err, err)
			}
			var rerr *retryhttp.Error
			if !errors.As(err, &rerr) {
				t.Fatalf("error %v is not a *retryhttp.Error", err)
			}
			if rerr.Status != 429 || rerr.RetryAfter != 30*time.Second || rerr.Tries != 1 {
				t.Errorf("Error{Status %d, RetryAfter %v, Tries %d}, want {429, 30s, 1}", rerr.Status, rerr.RetryAfter, rerr.Tries)
			}
			if apiErr, ok := apiError(err); ok {
				t.Errorf("error is also a genai.APIError (code %d): the SDK saw the response", apiErr.Code)
			}
		})
	}
}

// TestErrorBodyIntact: when retryhttp gives up on a 429 without a Budget, it
// hands the last response to the SDK with its body whole, though it read the
// body to find the retryDelay (R19): the SDK's APIError keeps every detail.
func TestErrorBodyIntact(t *testing.T) {
	r := newRig(t, []reply{rateLimited("2.5s")}, smallBackoff)
	_, err := r.ask(context.Background())
	if n := len(r.p.Tries()); n != 3 {
		t.Errorf("provider saw %d tries, want 3 (1 + 2 retries)", n)
	}
	apiErr, ok := apiError(err)
	if !ok {
		t.Fatalf("error %v (%T), want a genai.APIError", err, err)
	}
	if apiErr.Code != 429 || !strings.HasSuffix(apiErr.Message, "Please retry in 2.5s.") {
		t.Errorf("APIError{Code %d, Message %q}, want 429 and the whole message", apiErr.Code, apiErr.Message)
	}
	if ri := detail(apiErr, "RetryInfo"); ri["retryDelay"] != "2.5s" {
		t.Errorf("RetryInfo detail %v, want retryDelay 2.5s", ri)
	}
	if qf := detail(apiErr, "QuotaFailure"); !strings.Contains(fmt.Sprint(qf), perMinute) {
		t.Errorf("QuotaFailure detail %v, want it to name %s", qf, perMinute)
	}
	if len(apiErr.Details) != 3 {
		t.Errorf("%d details, want 3 (QuotaFailure, Help, RetryInfo)", len(apiErr.Details))
	}
	giving := r.logs.FilterMessage(msgGivingUp).All()
	if len(giving) != 1 || giving[0].ContextMap()["reason"] != "exhausted" {
		t.Errorf("giving-up log lines %v, want one with reason exhausted", giving)
	}
}

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

// TestTransient: plain Transient statuses, in Gemini's error envelope, are
// retried after the backoff; a 400 is not, and reaches the caller as the
// SDK's genai.APIError.
func TestTransient(t *testing.T) {
	tests := []struct {
		name       string
		plan       []reply
		wantTries  int
		wantStatus string // of the SDK's error; "": the answer
	}{
		{"503 UNAVAILABLE then the answer", []reply{fail(503), ok()}, 2, ""},
		{"500 INTERNAL then the answer", []reply{fail(500), ok()}, 2, ""},
		{"504 DEADLINE_EXCEEDED then the answer", []reply{fail(504), ok()}, 2, ""},
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
