package retryhttp

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// Tests of Quota (R12): a token bucket shared across requests that keeps
// retries from multiplying an outage.

func TestQuotaAccounting(t *testing.T) {
	type step struct {
		class      Class
		wantTokens float64
		wantRetry  bool
	}
	for _, tc := range []struct {
		name       string
		max, ratio float64
		wantStart  float64
		steps      []step
	}{
		{
			name: "failures take one, others add ratio, retry while above half",
			max:  4, ratio: 0.5, wantStart: 4,
			steps: []step{
				{Transient, 3, true},
				{Transient, 2, false}, // 2 is not above 4/2
				{Permanent, 2.5, true},
				{Throttled, 1.5, false}, // a 429 takes a token too
				{Permanent, 2, false},
				{Permanent, 2.5, true},
			},
		},
		{
			name: "never below zero",
			max:  2, ratio: 0.5, wantStart: 2,
			steps: []step{
				{Transient, 1, false},
				{Transient, 0, false},
				{Throttled, 0, false},
				{Permanent, 0.5, false},
			},
		},
		{
			name: "refills up to max and no further",
			max:  4, ratio: 0.5, wantStart: 4,
			steps: []step{
				{Permanent, 4, true},
				{Transient, 3, true},
				{Permanent, 3.5, true},
				{Permanent, 4, true},
				{Permanent, 4, true},
			},
		},
		{
			name: "ratio 0 never refills",
			max:  4, ratio: 0, wantStart: 4,
			steps: []step{{Transient, 3, true}, {Transient, 2, false}, {Permanent, 2, false}, {Permanent, 2, false}},
		},
		{
			name: "negative ratio counts as 0",
			max:  4, ratio: -1, wantStart: 4,
			steps: []step{{Transient, 3, true}, {Permanent, 3, true}},
		},
		{
			name: "NaN ratio counts as 0",
			max:  4, ratio: math.NaN(), wantStart: 4,
			steps: []step{{Transient, 3, true}, {Permanent, 3, true}},
		},
		{
			name: "maxTokens 0 refuses every retry",
			max:  0, ratio: 1, wantStart: 0,
			steps: []step{{Permanent, 0, false}, {Transient, 0, false}, {Permanent, 0, false}},
		},
		{
			name: "negative maxTokens refuses every retry",
			max:  -3, ratio: 1, wantStart: 0,
			steps: []step{{Permanent, 0, false}, {Throttled, 0, false}},
		},
		{
			name: "NaN maxTokens refuses every retry",
			max:  math.NaN(), ratio: 1, wantStart: 0,
			steps: []step{{Transient, 0, false}},
		},
		{
			name: "+Inf maxTokens always allows",
			max:  math.Inf(1), ratio: 1, wantStart: math.MaxFloat64,
			steps: []step{{Transient, math.MaxFloat64, true}, {Permanent, math.MaxFloat64, true}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQuota(tc.max, tc.ratio)
			if q.left() != tc.wantStart {
				t.Fatalf("NewQuota(%v, %v) starts with %v tokens, want %v", tc.max, tc.ratio, q.left(), tc.wantStart)
			}
			for i, s := range tc.steps {
				retry := q.record(s.class)
				if retry != s.wantRetry || q.left() != s.wantTokens {
					t.Errorf("step %d, a %v try: retry %v with %v tokens, want %v with %v",
						i+1, s.class, retry, q.left(), s.wantRetry, s.wantTokens)
				}
			}
		})
	}
}

// qtRefusing is a Quota that refuses every retry.
func qtRefusing() *Quota { return NewQuota(0, 0.1) }

func TestQuotaRefusalHandsBackLastResponse(t *testing.T) {
	clk := newFakeClock()
	base := newScript(status(http.StatusServiceUnavailable, "Retry-After", "1"), status(http.StatusOK))
	var seen ttAttempts
	log, logs := logSink()
	tr := New(base, WithClock(clk), WithQuota(qtRefusing()), WithObserver(seen.observe), WithLogger(log))
	req := newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/models", nil)

	r := drive(t, tr, clk, req)
	if r.err != nil {
		t.Fatalf("RoundTrip error = %v, want the 503 handed back", r.err)
	}
	defer r.resp.Body.Close()
	if r.resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", r.resp.StatusCode)
	}
	if body, _ := io.ReadAll(r.resp.Body); string(body) != "Service Unavailable" {
		t.Errorf("body = %q, want the 503's body unread", body)
	}
	if got := base.tries(); got != 1 {
		t.Errorf("tries = %d, want 1", got)
	}
	if len(r.waits) != 0 {
		t.Errorf("waits = %v, want none", r.waits)
	}
	attempts := seen.list()
	if len(attempts) != 1 || attempts[0].Outcome != NoQuota || attempts[0].Class != Transient || attempts[0].Wait != 0 {
		t.Errorf("attempts = %+v, want one Transient try with Outcome no_quota and Wait 0", attempts)
	}
	giveUps := logs.FilterMessage(msgGivingUp).All()
	if len(giveUps) != 1 || giveUps[0].ContextMap()["reason"] != "no_quota" {
		t.Errorf("give-up entries = %v, want one with reason no_quota", giveUps)
	}
}

func TestQuotaRefusalWrapsTransportError(t *testing.T) {
	clk := newFakeClock()
	base := newScript(fail(syscall.ECONNRESET), status(http.StatusOK))
	tr := New(base, WithClock(clk), WithQuota(qtRefusing()))
	req := newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/models", nil)

	r := drive(t, tr, clk, req)
	var e *Error
	if r.resp != nil || !errors.As(r.err, &e) {
		t.Fatalf("RoundTrip = %v, %v; want nil, *Error", r.resp, r.err)
	}
	if e.Reason != NoQuota || e.Tries != 1 || e.Status != 0 || e.Waited != 0 {
		t.Errorf("Error = %+v, want Reason no_quota, Tries 1, Status 0, Waited 0", e)
	}
	if !errors.Is(r.err, syscall.ECONNRESET) {
		t.Errorf("errors.Is(%v, ECONNRESET) = false, want true", r.err)
	}
}

// R8 still applies: a request with a Budget that is refused after a 429
// fails fast with ErrRateLimited, and the response is closed.
func TestQuotaRefusalWithBudgetIsRateLimited(t *testing.T) {
	clk := newFakeClock()
	body := &ttClosed{Reader: nopReader{}}
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		resp := respond(http.StatusTooManyRequests, "", "Retry-After", "2")
		resp.Body = body
		return resp, nil
	})
	tr := New(base, WithClock(clk), WithQuota(qtRefusing()))
	ctx := WithBudget(context.Background(), NewBudget(PublicTierMaxWait))
	req := newRequest(t, ctx, http.MethodGet, "https://api.example.com/v1/models", nil)

	r := drive(t, tr, clk, req)
	var e *Error
	if r.resp != nil || !errors.As(r.err, &e) {
		t.Fatalf("RoundTrip = %v, %v; want nil, *Error", r.resp, r.err)
	}
	if !errors.Is(r.err, ErrRateLimited) || e.Reason != NoQuota || e.Status != 429 || e.RetryAfter != 2*time.Second {
		t.Errorf("Error = %+v, want ErrRateLimited, Reason no_quota, Status 429, RetryAfter 2s", e)
	}
	if !body.isClosed() {
		t.Error("the 429's body was not closed")
	}
}

type nopReader struct{}

func (nopReader) Read([]byte) (int, error) { return 0, io.EOF }

// Through the transport: a retry is allowed while the bucket stays above
// half after the failed try's token is taken.
func TestQuotaRefusesMidCall(t *testing.T) {
	clk := newFakeClock()
	q := NewQuota(4, 0.5)
	base := newScript(status(http.StatusBadGateway), status(http.StatusBadGateway), status(http.StatusOK))
	var seen ttAttempts
	tr := New(base, WithClock(clk), WithBackoff(noJitter), WithQuota(q), WithObserver(seen.observe))
	req := newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/models", nil)

	r := drive(t, tr, clk, req)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	if r.resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status = %d, want the second 502 handed back", r.resp.StatusCode)
	}
	var got []Outcome
	for _, a := range seen.list() {
		got = append(got, a.Outcome)
	}
	if want := []Outcome{Retrying, NoQuota}; !equalOutcomes(got, want) {
		t.Errorf("outcomes = %v, want %v (4 -> 3 tokens: retry; 3 -> 2: refused)", got, want)
	}
}

func equalOutcomes(a, b []Outcome) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// One Quota given to two Transports is one bucket.
func TestQuotaSharedAcrossTransports(t *testing.T) {
	clk := newFakeClock()
	q := NewQuota(2, 0.1)
	down := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return respond(http.StatusServiceUnavailable, "down"), nil
	})
	a := New(down, WithClock(clk), WithBackoff(Backoff{}), WithQuota(q))
	b := New(newScript(status(http.StatusServiceUnavailable), status(http.StatusOK)), WithClock(clk), WithBackoff(Backoff{}), WithQuota(q))

	r := drive(t, a, clk, newRequest(t, context.Background(), http.MethodGet, "https://a.example.com/", nil))
	r.resp.Body.Close()
	r = drive(t, b, clk, newRequest(t, context.Background(), http.MethodGet, "https://b.example.com/", nil))
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	if r.resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("second Transport: status %d, want 503: the bucket the first drained is refusing", r.resp.StatusCode)
	}
}

// The outage demonstration: 100 calls against a provider that answers only
// 503. Without a Quota every call sends 3 tries; with NewQuota(10, 0.1) the
// bucket empties within two calls and each call is then sent once. When the
// provider recovers, successes refill the bucket and retries come back.
func TestQuotaOutage(t *testing.T) {
	const calls = 100
	for _, tc := range []struct {
		name    string
		quota   *Quota
		wantMin float64
		wantMax float64
	}{
		{"no quota", nil, 3.0, 3.0},
		{"NewQuota(10, 0.1)", NewQuota(10, 0.1), 1.0, 1.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			var (
				down  = true
				tries int
				fails int // 503s still to give while up
			)
			base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
				tries++
				if down || fails > 0 {
					fails--
					return respond(http.StatusServiceUnavailable, "down"), nil
				}
				return respond(http.StatusOK, "ok"), nil
			})
			tr := New(base, WithClock(clk), WithBackoff(Backoff{}), WithQuota(tc.quota))
			call := func() (status, sent int) {
				t.Helper()
				before := tries
				r := drive(t, tr, clk, newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/chat", nil))
				if r.err != nil {
					t.Fatalf("RoundTrip error = %v, want a response", r.err)
				}
				io.Copy(io.Discard, r.resp.Body)
				r.resp.Body.Close()
				return r.resp.StatusCode, tries - before // drive returned: the base is done
			}

			for range calls {
				call()
			}
			perCall := float64(tries) / calls
			if perCall < tc.wantMin || perCall > tc.wantMax {
				t.Errorf("during the outage: %.2f tries per call, want within [%.1f, %.1f]", perCall, tc.wantMin, tc.wantMax)
			}
			t.Logf("during the outage: %d tries for %d calls (%.2f per call)", tries, calls, perCall)

			// Recovery: the provider is up but fails a call's first try.
			down = false
			fails = 1
			gotStatus, gotTries := call()
			if tc.quota != nil && (gotStatus != http.StatusServiceUnavailable || gotTries != 1) {
				t.Errorf("right after the outage: status %d in %d tries, want 503 in 1: the bucket is empty", gotStatus, gotTries)
			}
			for range calls {
				if s, _ := call(); s != http.StatusOK {
					t.Fatalf("provider up: status %d, want 200", s)
				}
			}
			fails = 1
			gotStatus, gotTries = call()
			if gotStatus != http.StatusOK || gotTries != 2 {
				t.Errorf("after %d successes: status %d in %d tries, want 200 in 2: successes refill the bucket", calls, gotStatus, gotTries)
			}
		})
	}
}
