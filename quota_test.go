package retryhttp

import (
	"context"
	"io"
	"math"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of Quota (R12): a token bucket shared across requests that keeps
// retries from multiplying an outage.

// quotaStep is a try recorded, and what the Quota says after it.
type quotaStep struct {
	class      Class
	wantTokens float64
	wantRetry  bool
}

// quotaTest is a row of TestQuotaAccounting: a Quota and the tries it sees.
type quotaTest struct {
	name       string
	max, ratio float64
	wantStart  float64
	steps      []quotaStep
}

var quotaTests = []quotaTest{
	{
		name: "failures take one, others add ratio, retry while above half",
		max:  4, ratio: 0.5, wantStart: 4,
		steps: []quotaStep{
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
		steps: []quotaStep{
			{Transient, 1, false},
			{Transient, 0, false},
			{Throttled, 0, false},
			{Permanent, 0.5, false},
		},
	},
	{
		name: "refills up to max and no further",
		max:  4, ratio: 0.5, wantStart: 4,
		steps: []quotaStep{
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
		steps: []quotaStep{{Transient, 3, true}, {Transient, 2, false}, {Permanent, 2, false}, {Permanent, 2, false}},
	},
	{
		name: "negative ratio counts as 0",
		max:  4, ratio: -1, wantStart: 4,
		steps: []quotaStep{{Transient, 3, true}, {Permanent, 3, true}},
	},
	{
		name: "NaN ratio counts as 0",
		max:  4, ratio: math.NaN(), wantStart: 4,
		steps: []quotaStep{{Transient, 3, true}, {Permanent, 3, true}},
	},
	{
		name: "maxTokens 0 refuses every retry",
		max:  0, ratio: 1, wantStart: 0,
		steps: []quotaStep{{Permanent, 0, false}, {Transient, 0, false}, {Permanent, 0, false}},
	},
	{
		name: "negative maxTokens refuses every retry",
		max:  -3, ratio: 1, wantStart: 0,
		steps: []quotaStep{{Permanent, 0, false}, {Throttled, 0, false}},
	},
	{
		name: "NaN maxTokens refuses every retry",
		max:  math.NaN(), ratio: 1, wantStart: 0,
		steps: []quotaStep{{Transient, 0, false}},
	},
	{
		name: "+Inf maxTokens always allows",
		max:  math.Inf(1), ratio: 1, wantStart: math.MaxFloat64,
		steps: []quotaStep{{Transient, math.MaxFloat64, true}, {Permanent, math.MaxFloat64, true}},
	},
}

func TestQuotaAccounting(t *testing.T) {
	for _, tc := range quotaTests {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQuota(tc.max, tc.ratio)
			require.Equal(t, tc.wantStart, q.left(), "NewQuota(%v, %v): tokens at the start", tc.max, tc.ratio)
			for i, s := range tc.steps {
				assert.Equal(t, s.wantRetry, q.record(s.class), "step %d, a %v try: retry", i+1, s.class)
				assert.Equal(t, s.wantTokens, q.left(), "step %d, a %v try: tokens", i+1, s.class)
			}
		})
	}
}

// qtRefusing is a Quota that refuses every retry.
func qtRefusing() *Quota { return NewQuota(0, 0.1) }

func TestQuotaRefusalHandsBackLastResponse(t *testing.T) {
	var seen ttAttempts
	log, logs := logSink()
	clk, script, tr := scripted(replies{reply(http.StatusServiceUnavailable, "Retry-After", "1"), reply(http.StatusOK)},
		WithQuota(qtRefusing()), WithObserver(seen.observe), WithLogger(log))

	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/models", nil))
	require.NoError(t, err, "the 503, handed back")
	defer resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "Service Unavailable", string(body), "the 503's body, unread")
	assert.Equal(t, 1, script.Len(), "tries")
	assert.Empty(t, clk.Waits())
	attempts := seen.list()
	require.Len(t, attempts, 1)
	assert.Equal(t, NoQuota, attempts[0].Outcome)
	assert.Equal(t, Transient, attempts[0].Class)
	assert.Zero(t, attempts[0].Wait)
	giveUps := logs.FilterMessage(msgGivingUp).All()
	require.Len(t, giveUps, 1, "give-up entries")
	assert.Equal(t, "no_quota", giveUps[0].ContextMap()["reason"])
}

func TestQuotaRefusalWrapsTransportError(t *testing.T) {
	_, _, tr := scripted(replies{retryhttptest.Fail(syscall.ECONNRESET), reply(http.StatusOK)}, WithQuota(qtRefusing()))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/models", nil))
	require.Nil(t, resp)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Error{Tries: 1, Reason: NoQuota, Err: e.Err}, *e)
	assert.ErrorIs(t, err, syscall.ECONNRESET)
}

// R8 still applies: a request with a Budget that is refused after a 429
// fails fast with ErrRateLimited, and the response is closed.
func TestQuotaRefusalWithBudgetIsRateLimited(t *testing.T) {
	var body *ttClosed
	base := &spy{script: retryhttptest.NewScript(reply(http.StatusTooManyRequests, "Retry-After", "2")), edit: func(_ int, resp *http.Response) {
		body = &ttClosed{Reader: resp.Body}
		resp.Body = body
	}}
	tr := New(base, WithClock(newClock()), WithQuota(qtRefusing()))
	ctx := WithBudget(context.Background(), NewBudget(PublicTierMaxWait))

	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "https://api.example.com/v1/models", nil))
	require.Nil(t, resp)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.Equal(t, Error{Tries: 1, Status: 429, RetryAfter: 2 * time.Second, Reason: NoQuota, Err: ErrRateLimited}, *e)
	require.NotNil(t, body)
	assert.True(t, body.isClosed(), "the 429's body is closed")
}

// Through the transport: a retry is allowed while the bucket stays above
// half after the failed try's token is taken.
func TestQuotaRefusesMidCall(t *testing.T) {
	var seen ttAttempts
	_, _, tr := scripted(replies{reply(http.StatusBadGateway), reply(http.StatusBadGateway), reply(http.StatusOK)},
		WithQuota(NewQuota(4, 0.5)), WithObserver(seen.observe))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/models", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode, "the second 502, handed back")
	var got []Outcome
	for _, a := range seen.list() {
		got = append(got, a.Outcome)
	}
	assert.Equal(t, []Outcome{Retrying, NoQuota}, got, "4 -> 3 tokens: retry; 3 -> 2: refused")
}

// One Quota given to two Transports is one bucket.
func TestQuotaSharedAcrossTransports(t *testing.T) {
	q := NewQuota(2, 0.1)
	get := func(url string) *http.Request { return newRequest(t, context.Background(), http.MethodGet, url, nil) }
	a := New(retryhttptest.NewScript(reply(http.StatusServiceUnavailable)), WithBackoff(Backoff{}), WithQuota(q))
	b := New(retryhttptest.NewScript(reply(http.StatusServiceUnavailable), reply(http.StatusOK)), WithBackoff(Backoff{}), WithQuota(q))

	resp, err := a.RoundTrip(get("https://a.example.com/"))
	require.NoError(t, err)
	resp.Body.Close()
	resp, err = b.RoundTrip(get("https://b.example.com/"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the second Transport: the bucket the first drained refuses")
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
			// Zero waits: the transport starts no timer.
			tr := New(base, WithBackoff(Backoff{}), WithQuota(tc.quota))
			call := func() (status, sent int) {
				t.Helper()
				before := tries
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/chat", nil))
				require.NoError(t, err, "a response")
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode, tries - before
			}

			for range calls {
				call()
			}
			perCall := float64(tries) / calls
			assert.GreaterOrEqual(t, perCall, tc.wantMin, "tries per call during the outage")
			assert.LessOrEqual(t, perCall, tc.wantMax, "tries per call during the outage")
			t.Logf("during the outage: %d tries for %d calls (%.2f per call)", tries, calls, perCall)

			// Recovery: the provider is up but fails a call's first try.
			down = false
			fails = 1
			gotStatus, gotTries := call()
			if tc.quota != nil {
				assert.Equal(t, http.StatusServiceUnavailable, gotStatus, "right after the outage: the bucket is empty")
				assert.Equal(t, 1, gotTries, "right after the outage: the bucket is empty")
			}
			for range calls {
				s, _ := call()
				require.Equal(t, http.StatusOK, s, "provider up")
			}
			fails = 1
			gotStatus, gotTries = call()
			assert.Equal(t, http.StatusOK, gotStatus, "after %d successes: successes refill the bucket", calls)
			assert.Equal(t, 2, gotTries, "after %d successes: successes refill the bucket", calls)
		})
	}
}

// TestQuotaConcurrentCounts checks R12's counts under concurrent use: after
// calls at once, the bucket holds exactly maxTokens, less one per Transient
// try, plus ratio per other try, as if they had come one by one (no update
// is lost to another). The counts stay clear of 0 and of maxTokens, where
// the order of the tries would matter.
func TestQuotaConcurrentCounts(t *testing.T) {
	const workers = 8
	t.Run("record", func(t *testing.T) {
		const perWorker = 100_000
		q := NewQuota(10_000_000, 0.5)
		var wg sync.WaitGroup
		start := make(chan struct{}) // all at once
		for range workers {
			wg.Go(func() {
				<-start
				for range perWorker {
					q.record(Transient)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Equal(t, 10_000_000.0-workers*perWorker, q.left(), "after %d failed tries at once", workers*perWorker)
		for range workers {
			wg.Go(func() {
				for range perWorker {
					q.record(Throttled)
					q.record(Permanent)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, 10_000_000.0-2*workers*perWorker+0.5*workers*perWorker, q.left(), "after as many failed and other tries at once")
	})
	t.Run("through the transport", func(t *testing.T) {
		const perWorker = 25
		q := NewQuota(1000, 0.5)
		// Each call's first try is a 503 (one token), its retry a 200 (ratio).
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if ResendCount(r.Context()) == 0 {
				return respond(http.StatusServiceUnavailable, "down"), nil
			}
			return respond(http.StatusOK, "ok"), nil
		})
		tr := New(base, WithBackoff(Backoff{}), WithQuota(q))
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range perWorker {
					resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1", nil))
					if assert.NoError(t, err) {
						resp.Body.Close()
						assert.Equal(t, http.StatusOK, resp.StatusCode, "every call retried: the bucket stays above half")
					}
				}
			})
		}
		wg.Wait()
		const calls = workers * perWorker
		assert.Equal(t, 1000.0-calls+0.5*calls, q.left())
	})
}
