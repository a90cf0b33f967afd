package retryhttp

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	errRefused  = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	errNotFound = &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}
)

// TestRetryLoop walks the loop through scripted tries: how many tries go
// out, how long each wait is (jitter 0, so exact), and what comes back.
func TestRetryLoop(t *testing.T) {
	const ms = time.Millisecond
	refused, notFound := retryhttptest.Fail(errRefused), retryhttptest.Fail(errNotFound)
	tests := []struct {
		name       string
		opts       []Option
		replies    replies
		wantTries  int
		wantWaits  []time.Duration
		wantStatus int     // of the response returned; 0 when an error is
		wantErr    error   // errors.Is target when an error is returned
		wantReason Outcome // of the *Error, when one is returned
	}{
		{"success at once", nil, replies{reply(200)}, 1, nil, 200, nil, 0},
		{"503 then success", nil, replies{reply(503), reply(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"two 5xx then success", nil, replies{reply(502), reply(504), reply(200)}, 3, []time.Duration{400 * ms, 800 * ms}, 200, nil, 0},
		{"exhausted returns the last response", nil, replies{reply(503), reply(500), reply(503)}, 3, []time.Duration{400 * ms, 800 * ms}, 503, nil, 0},
		{"408 is retried", nil, replies{reply(408), reply(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"429 is retried", nil, replies{reply(429), reply(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"501 is not retried", nil, replies{reply(501)}, 1, nil, 501, nil, 0},
		{"505 is not retried", nil, replies{reply(505)}, 1, nil, 505, nil, 0},
		{"400 is not retried", nil, replies{reply(400)}, 1, nil, 400, nil, 0},
		{"X-Should-Retry true on 400", nil, replies{reply(400, "X-Should-Retry", "true"), reply(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"X-Should-Retry false on 503", nil, replies{reply(503, "X-Should-Retry", "false")}, 1, nil, 503, nil, 0},
		{"Retry-After larger wins", nil, replies{reply(429, "Retry-After", "2"), reply(200)}, 2, []time.Duration{2 * time.Second}, 200, nil, 0},
		{"backoff larger wins", nil, replies{reply(503, "Retry-After", "0.1"), reply(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"retry-after-ms", nil, replies{reply(429, "Retry-After-Ms", "1500"), reply(200)}, 2, []time.Duration{1500 * ms}, 200, nil, 0},
		{"Retry-After is never capped by Max", nil, replies{reply(503, "Retry-After", "120"), reply(200)}, 2, []time.Duration{2 * time.Minute}, 200, nil, 0},
		{"Retry-After date", nil, replies{reply(429).Asks(retryhttptest.RetryAfterDate, 7*time.Second), reply(200)}, 2, []time.Duration{7 * time.Second}, 200, nil, 0},
		{"transport error then success", nil, replies{refused, reply(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"transport errors exhausted", nil, replies{refused, refused, refused}, 3, []time.Duration{400 * ms, 800 * ms}, 0, syscall.ECONNREFUSED, Exhausted},
		{"permanent error on the first try", nil, replies{notFound}, 1, nil, 0, errNotFound, 0},
		{"permanent error on a later try", nil, replies{reply(503), notFound}, 2, []time.Duration{400 * ms}, 0, errNotFound, Done},
		{"max retries 0", []Option{WithMaxRetries(0)}, replies{reply(503)}, 1, nil, 503, nil, 0},
		{"negative max retries counts as 0", []Option{WithMaxRetries(-3)}, replies{refused}, 1, nil, 0, syscall.ECONNREFUSED, Exhausted},
		{"max retries 5", []Option{WithMaxRetries(5)}, replies{reply(503), reply(503), reply(503), reply(503), reply(503), reply(503)}, 6,
			[]time.Duration{400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms}, 503, nil, 0},
		{"backoff cap", []Option{WithMaxRetries(3), WithBackoff(Backoff{Base: time.Second, Factor: 10, Max: 5 * time.Second})},
			replies{reply(503), reply(503), reply(503), reply(200)}, 4, []time.Duration{time.Second, 5 * time.Second, 5 * time.Second}, 200, nil, 0},
		{"zero backoff starts no timer", []Option{WithBackoff(Backoff{})}, replies{reply(503), reply(503), reply(200)}, 3, nil, 200, nil, 0},
		{"custom classifier", []Option{WithClassifier(func(_ *http.Request, resp *http.Response, _ error) Class {
			if resp != nil && resp.StatusCode == 404 {
				return Transient
			}
			return Permanent
		})}, replies{reply(404), reply(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk, script, tr := scripted(tt.replies, tt.opts...)
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com/v1/models", nil))

			assert.Equal(t, tt.wantTries, script.Len(), "tries")
			assertWaits(t, tt.wantWaits, clk.Waits())
			if tt.wantStatus != 0 {
				require.NoError(t, err)
				defer resp.Body.Close()
				assert.Equal(t, tt.wantStatus, resp.StatusCode)
				body, _ := io.ReadAll(resp.Body)
				assert.Equal(t, http.StatusText(tt.wantStatus), string(body), "the body, unread")
				return
			}
			require.Nil(t, resp, "a response and an error")
			require.ErrorIs(t, err, tt.wantErr)
			if tt.wantReason == 0 && tt.wantTries == 1 {
				assert.Equal(t, tt.wantErr, err, "the base's error, unchanged")
				return
			}
			var e *Error
			require.ErrorAs(t, err, &e)
			var waited time.Duration
			for _, w := range tt.wantWaits {
				waited += w
			}
			assert.Equal(t, tt.wantReason, e.Reason)
			assert.Equal(t, tt.wantTries, e.Tries)
			assert.Equal(t, waited, e.Waited)
		})
	}
}

// TestErrorFields checks what an *Error carries: the last status received
// even after a later transport error, and the last Retry-After asked.
func TestErrorFields(t *testing.T) {
	refused := retryhttptest.Fail(errRefused)
	_, _, tr := scripted(replies{reply(503, "Retry-After", "3"), refused, refused})
	_, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Error{Tries: 3, Waited: 3*time.Second + 800*time.Millisecond, Status: 503, RetryAfter: 3 * time.Second, Reason: Exhausted, Err: e.Err}, *e)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.EqualError(t, err, "retryhttp: exhausted after 3 tries, waited 3.8s, status 503, retry-after 3s: dial tcp: connection refused")
}

// TestClassifierGetsCallerRequest checks R2: the Classifier sees the
// caller's request and context on every try, never a clone.
func TestClassifierGetsCallerRequest(t *testing.T) {
	var seen []*http.Request
	_, _, tr := scripted(replies{reply(503), reply(503), reply(200)}, WithTryTimeout(time.Minute),
		WithClassifier(func(r *http.Request, resp *http.Response, err error) Class {
			seen = append(seen, r)
			return Classify(r, resp, err)
		}))
	req := newRequest(t, context.Background(), "POST", "https://api.example.com", []byte("x"))
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, seen, 3, "classifier calls")
	for i, r := range seen {
		assert.Same(t, req, r, "try %d: the classifier gets the caller's request", i+1)
	}
}

// TestCallerCancelIsNeverRetried checks R2 and R9: the caller's own cancel
// ends the call with the base's error unchanged, on the first try. (A Script
// would not count the try: it does not record a request whose context has
// ended, as net/http would not send it.)
func TestCallerCancelIsNeverRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tries := 0
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		tries++
		return nil, r.Context().Err()
	})
	_, err := New(base, WithClock(newClock())).RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com", nil))
	assert.Equal(t, context.Canceled, err, "the base's error, unchanged")
	assert.Equal(t, 1, tries)
}

// TestCancelDuringWait checks R9: the caller's context ending during a wait
// returns at once an *Error with Reason Canceled and the last status; the
// Observer never sees Canceled, the log does.
func TestCancelDuringWait(t *testing.T) {
	log, logs := logSink()
	var outcomes []Outcome
	clk, script, tr := scripted(replies{reply(503, "Retry-After", "30"), reply(200)}, WithLogger(log),
		WithObserver(func(_ context.Context, a Attempt) { outcomes = append(outcomes, a.Outcome) }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk.AfterFunc(10*time.Second, cancel) // ten seconds into the 30 s wait

	resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com", nil))
	require.Nil(t, resp)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, Error{Tries: 1, Waited: 10 * time.Second, Status: 503, RetryAfter: 30 * time.Second, Reason: Canceled, Err: context.Canceled}, *e)
	assert.Equal(t, 1, script.Len(), "tries")
	assert.Equal(t, []Outcome{Retrying}, outcomes)
	require.NotZero(t, logs.Len())
	last := logs.All()[logs.Len()-1]
	assert.Equal(t, msgGivingUp, last.Message)
	assert.Equal(t, "canceled", last.ContextMap()["reason"])
}

// TestMaxRetriesUnlimited: WithMaxRetries(math.MaxInt) retries without a
// limit but the wait's fit, and tells the Observer so (R3): no overflow.
func TestMaxRetriesUnlimited(t *testing.T) {
	var attempts []Attempt
	_, _, tr := scripted(replies{reply(503), reply(503), reply(503), reply(503), reply(503), reply(200)}, WithMaxRetries(math.MaxInt),
		WithObserver(func(_ context.Context, a Attempt) { attempts = append(attempts, a) }))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	require.Len(t, attempts, 6)
	for _, a := range attempts {
		assert.Equal(t, math.MaxInt, a.MaxTries)
	}
	assert.Equal(t, 2, maxTries(1))
	assert.Equal(t, 1, maxTries(0))
}

func TestNewDefaults(t *testing.T) {
	tr := New(nil, nil, WithClock(nil), WithLogger(nil), WithClassifier(nil), WithTryTimeout(-time.Second))
	assert.Same(t, http.DefaultTransport, tr.base)
	c := tr.cfg
	assert.Equal(t, 2, c.maxRetries)
	assert.Equal(t, DefaultBackoff, c.backoff)
	assert.NotNil(t, c.clock)
	assert.NotNil(t, c.logger)
	assert.NotNil(t, c.classify)
	assert.Nil(t, c.observe)
	assert.Zero(t, c.tryTimeout)
	assert.False(t, c.idempotencyKey)
	assert.Nil(t, c.quota)
	assert.Nil(t, c.cooldown)
}
