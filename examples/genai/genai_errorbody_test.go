package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
)

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
