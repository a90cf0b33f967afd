package retryhttp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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

// TestFirstTrySendsCallerRequest checks R1 on the happy path: the base gets
// the caller's own request and the response comes back as the base made it.
func TestFirstTrySendsCallerRequest(t *testing.T) {
	want := respond(200, "hello")
	body := want.Body
	var sent *http.Request
	tr := New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return want, nil
	}))
	req := newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Same(t, want, resp, "the base's response")
	assert.Same(t, req, sent, "the first try sends the caller's request")
	assert.Equal(t, body, resp.Body, "the response's body, not replaced")
}

// TestRetriesSendClonesAndNeverTouchTheCaller checks R1 and R10 on a POST
// that fails twice: each retry is a new request with the whole body, byte for
// byte, and the caller's request is the same after as before.
func TestRetriesSendClonesAndNeverTouchTheCaller(t *testing.T) {
	payload := make([]byte, 1<<20)
	rand.Read(payload)
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(reply(503), retryhttptest.Fail(errRefused), reply(200))
	base := &spy{script: script}
	tr := New(base, WithClock(clk))
	req := newRequest(t, context.Background(), "POST", "https://api.example.com/v1/chat", payload)
	req.Header.Set("Content-Type", "application/json")
	before := *req
	beforeHeader := req.Header.Clone()

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	sent := base.sent()
	require.Len(t, sent, 3, "tries")
	for i, r := range script.Requests() {
		assert.True(t, bytes.Equal(payload, r.Body), "try %d sent %d bytes, want the same %d bytes", i+1, len(r.Body), len(payload))
		assert.EqualValues(t, len(payload), sent[i].ContentLength, "try %d: ContentLength", i+1)
	}
	assert.Same(t, req, sent[0], "R1 lets the first try send the caller's request")
	for i, r := range sent[1:] {
		assert.NotSame(t, req, r, "retry %d sends a clone", i+1)
	}
	assert.Equal(t, beforeHeader, req.Header, "the caller's header")
	assert.True(t, req.Body == before.Body && req.URL == before.URL && req.Method == before.Method && req.Context() == before.Context(),
		"the caller's request was modified")
}

// trackedBody is a request or response body that records reads and Close.
type trackedBody struct {
	r      io.Reader
	read   atomic.Int64
	closed atomic.Int32
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *trackedBody) Close() error { b.closed.Add(1); return nil }

// endless is a body that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestBodyWithoutGetBodyIsSentOnce checks R10: a body that cannot be
// replayed is sent once, and the failed response comes back untouched.
func TestBodyWithoutGetBodyIsSentOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		getBody func() (io.ReadCloser, error)
	}{
		{"no GetBody", nil},
		{"GetBody fails", func() (io.ReadCloser, error) { return nil, errors.New("gone") }},
		{"GetBody returns nil", func() (io.ReadCloser, error) { return nil, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var outcomes []Outcome
			clk, script, tr := scripted(replies{reply(503), reply(200)},
				WithObserver(func(_ context.Context, a Attempt) { outcomes = append(outcomes, a.Outcome) }))
			body := &trackedBody{r: bytes.NewReader([]byte(`{"q":1}`))}
			req := newRequest(t, context.Background(), "POST", "https://api.example.com/v1", nil)
			req.Body, req.GetBody, req.ContentLength = body, tc.getBody, 7

			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 503, resp.StatusCode)
			reqs := script.Requests()
			require.Len(t, reqs, 1, "tries")
			assert.Equal(t, `{"q":1}`, string(reqs[0].Body), "the body, sent once, whole")
			assert.Empty(t, clk.Waits())
			assert.Equal(t, []Outcome{NotReplayable}, outcomes)
		})
	}
}

// TestCallerBodyClosedOnEveryPath checks R1: a body the transport does not
// send, it closes; a body it sends is the caller's own, handed to the base
// (whose job it is to close it), so the fake base here never closes one.
func TestCallerBodyClosedOnEveryPath(t *testing.T) {
	post := func(ctx context.Context, b io.ReadCloser) *http.Request {
		r, _ := http.NewRequestWithContext(ctx, "POST", "https://api.example.com/v1", b)
		return r
	}
	clk := retryhttptest.NewClock() // nothing here waits: every call is sent at once or not at all
	// cooling: api.example.com cools for an hour.
	cooling := func() *Cooldown {
		cd := NewCooldown(nil)
		holdFor(cd, "https://api.example.com", clk.Now(), time.Hour)
		return cd
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	withMinute, cancelMinute := clk.WithTimeout(context.Background(), time.Minute)
	defer cancelMinute()
	tests := []struct {
		name string
		opts []Option
		req  func(body io.ReadCloser) *http.Request
		sent bool
	}{
		{"nil URL", nil, func(b io.ReadCloser) *http.Request { return &http.Request{Method: "POST", Body: b} }, false},
		{"a cooldown hold that does not fit", []Option{WithCooldown(cooling())}, func(b io.ReadCloser) *http.Request {
			return post(withMinute, b)
		}, false},
		{"canceled before the hold", []Option{WithCooldown(cooling())}, func(b io.ReadCloser) *http.Request { return post(canceled, b) }, false},
		{"sent", nil, func(b io.ReadCloser) *http.Request { return post(context.Background(), b) }, true},
		{"sent with an idempotency key (a clone)", []Option{WithIdempotencyKey()}, func(b io.ReadCloser) *http.Request { return post(context.Background(), b) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &trackedBody{r: bytes.NewReader([]byte("x"))}
			var got io.ReadCloser
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				got = r.Body // read, never closed: closing is the base's, not the test's subject
				return respond(200, ""), nil
			})
			tr := New(base, append([]Option{WithClock(clk)}, tt.opts...)...)
			resp, err := tr.RoundTrip(tt.req(body))
			if resp != nil {
				assert.NoError(t, err, "a response and an error")
				resp.Body.Close()
			}
			if tt.sent {
				assert.Same(t, body, got, "the base got the caller's body itself")
				return
			}
			assert.Error(t, err)
			assert.Nil(t, got, "nothing was sent")
			assert.EqualValues(t, 1, body.closed.Load(), "the caller's body, not sent, is closed once")
		})
	}
}

// TestBaseContractViolations checks that a base breaking the RoundTripper
// contract cannot make RoundTrip break it.
func TestBaseContractViolations(t *testing.T) {
	get := func() *http.Request {
		return newRequest(t, context.Background(), "GET", "https://api.example.com", nil)
	}
	respBody := &trackedBody{r: bytes.NewReader(nil)}
	both := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: respBody}, errRefused
	})
	resp, err := New(both, WithMaxRetries(0)).RoundTrip(get())
	assert.Nil(t, resp, "base returning both: only the error")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "base returning both")
	assert.EqualValues(t, 1, respBody.closed.Load(), "the stray response's body is closed")

	neither := roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	resp, err = New(neither, WithMaxRetries(0)).RoundTrip(get())
	assert.Nil(t, resp, "base returning neither")
	assert.ErrorIs(t, err, errNilResponse, "base returning neither")

	nilBody := roundTripperFunc(func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: 204}, nil })
	resp, err = New(nilBody).RoundTrip(get())
	require.NoError(t, err, "base returning a nil Body")
	assert.NotNil(t, resp.Body, "base returning a nil Body: a closable body")

	_, err = New(nil).RoundTrip(nil)
	assert.Error(t, err, "RoundTrip(nil)")
}

// TestFailedResponseDrainedAndClosed checks R10: before a retry the failed
// response's body is read at most 64 KiB, then closed, even when endless.
func TestFailedResponseDrainedAndClosed(t *testing.T) {
	tests := []struct {
		name          string
		body          io.Reader
		contentLength int64
		wantRead      int64
	}{
		{"small body read to the end", bytes.NewReader(make([]byte, 1000)), 1000, 1000},
		{"endless body stops at 64 KiB", endless{}, -1, maxDrain},
		{"large known body is not read", endless{}, 10 << 20, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failed := &trackedBody{r: tt.body}
			base := &spy{script: retryhttptest.NewScript(reply(503), reply(200)), edit: func(try int, resp *http.Response) {
				if try == 1 {
					resp.Body, resp.ContentLength = failed, tt.contentLength
				}
			}}
			resp, err := New(base, WithClock(retryhttptest.NewClock())).RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tt.wantRead, failed.read.Load(), "bytes read of the failed body")
			assert.EqualValues(t, 1, failed.closed.Load(), "times the failed body was closed")
		})
	}
}

// TestObserver checks R15: one Attempt per try, in order, before the wait,
// with the request's context and a URL free of query and userinfo.
func TestObserver(t *testing.T) {
	const tryTime = 250 * time.Millisecond
	clk := retryhttptest.NewClock()
	script := retryhttptest.NewScript(reply(503), reply(429, "Retry-After", "5"), reply(200)).WithClock(clk)
	slow := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		clk.Add(tryTime) // the try itself takes time on the injected clock
		return script.RoundTrip(r)
	})
	type ctxKey struct{}
	var (
		attempts    []Attempt
		waitsBefore []int // waits taken before each report
	)
	tr := New(slow, WithClock(clk), WithBackoff(noJitter), WithObserver(func(ctx context.Context, a Attempt) {
		assert.Equal(t, "turn-7", ctx.Value(ctxKey{}), "the observer gets the request's context")
		waitsBefore = append(waitsBefore, len(clk.Waits()))
		attempts = append(attempts, a)
	}))
	ctx := context.WithValue(context.Background(), ctxKey{}, "turn-7")
	resp, err := tr.RoundTrip(newRequest(t, ctx, "POST", "https://bob:hunter2@api.example.com/v1/chat?key=secret#frag", []byte("{}")))
	require.NoError(t, err)
	resp.Body.Close()

	want := []Attempt{
		{Try: 1, Status: 503, Class: Transient, Wait: 400 * time.Millisecond, From: FromBackoff, Outcome: Retrying},
		{Try: 2, Status: 429, Class: Throttled, Wait: 5 * time.Second, From: FromRetryAfter, Outcome: Retrying},
		{Try: 3, Status: 200, Class: Permanent, Outcome: Done},
	}
	require.Len(t, attempts, len(want))
	call := attempts[0].Call
	assert.NotZero(t, call, "a call number")
	for i := range want {
		want[i].Call, want[i].MaxTries, want[i].Method, want[i].URL, want[i].Elapsed = call, 3, "POST", "https://api.example.com/v1/chat", tryTime
	}
	assert.Equal(t, want, attempts)
	assert.Equal(t, []int{0, 1, 2}, waitsBefore, "try n is reported after n-1 waits, before the n-th")
	assertWaits(t, []time.Duration{400 * time.Millisecond, 5 * time.Second}, clk.Waits())

	// A second call gets another number.
	resp, err = tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.NotEqual(t, call, attempts[len(attempts)-1].Call, "two calls share a number")
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

// TestLogs checks R14: a Warn entry per retry with its fields, and one
// give-up entry when the transport stops after a failed try.
func TestLogs(t *testing.T) {
	log, logs := logSink()
	_, _, tr := scripted(replies{reply(503), retryhttptest.Fail(errRefused), reply(429, "Retry-After", "3")}, WithLogger(log))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "POST", "https://u:p@api.example.com/v1/chat?key=k", []byte("{}")))
	require.NoError(t, err)
	resp.Body.Close()

	type (
		fields = map[string]any
		entry  struct {
			Level, Msg string
			Fields     fields
		}
	)
	want := []entry{
		{"warn", "llm transient failure — retrying", fields{"attempt": int64(1), "max": int64(2), "status": int64(503), "wait_ms": int64(400),
			"wait_from": "backoff", "method": "POST", "url": "https://api.example.com/v1/chat"}},
		{"warn", "llm transient failure — retrying", fields{"attempt": int64(2), "max": int64(2), "status": int64(0), "wait_ms": int64(800),
			"wait_from": "backoff", "method": "POST", "url": "https://api.example.com/v1/chat", "error": "dial tcp: connection refused"}},
		{"warn", "llm transient failure — giving up", fields{"reason": "exhausted", "tries": int64(3), "waited_ms": int64(1200), "status": int64(429),
			"url": "https://api.example.com/v1/chat"}},
	}
	var got []entry
	for _, e := range logs.All() {
		got = append(got, entry{e.Level.String(), e.Message, e.ContextMap()})
	}
	assert.Equal(t, want, got)
}

// TestNoLogsOnSuccessOrPermanentFailure: only retries and give-ups log.
func TestNoLogsOnSuccessOrPermanentFailure(t *testing.T) {
	for _, r := range []retryhttptest.Reply{reply(200), reply(404), retryhttptest.Fail(errNotFound)} {
		log, logs := logSink()
		_, _, tr := scripted(replies{r}, WithLogger(log))
		if resp, _ := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com", nil)); resp != nil {
			resp.Body.Close()
		}
		assert.Empty(t, logs.All(), "status %d, error %v", r.Status, r.Err)
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
	_, err := New(base, WithClock(retryhttptest.NewClock())).RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com", nil))
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

// TestLoopbackConnectionReuse shows on a real server that three tries share
// one connection: the failed bodies are drained and closed (R10).
func TestLoopbackConnectionReuse(t *testing.T) {
	var hits atomic.Int32
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) < 3 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "overloaded, try again later")
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns[c] = true
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	clk := retryhttptest.NewClock()
	resp, err := New(base, WithClock(clk)).RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/v1", nil))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "ok", string(body))
	assert.EqualValues(t, 3, hits.Load(), "hits")
	assertWaits(t, []time.Duration{time.Second, time.Second}, clk.Waits(), "the server's 1s, twice")
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, conns, 1, "one connection, reused for all three tries")
}

// TestCloseIdleConnections checks that the method reaches the base, and that
// the retry path never calls it (R1).
func TestCloseIdleConnections(t *testing.T) {
	base := &idleCounter{Script: retryhttptest.NewScript(reply(503), reply(503), reply(200))}
	tr := New(base, WithClock(retryhttptest.NewClock()))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 3, base.Len(), "tries")
	assert.Zero(t, base.closed, "CloseIdleConnections calls by the retries")
	tr.CloseIdleConnections()
	assert.Equal(t, 1, base.closed, "CloseIdleConnections calls that reached the base")
	New(roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })).CloseIdleConnections() // no method: no panic
}

type idleCounter struct {
	*retryhttptest.Script
	closed int
}

func (b *idleCounter) CloseIdleConnections() { b.closed++ }

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

// TestConcurrentUse runs many calls through one Transport at once: every
// call gets its own 503 then its 200 (2 tries each, nothing crossed between
// calls), and every call has its own number (go test -race checks the rest).
func TestConcurrentUse(t *testing.T) {
	const calls = 64
	var tries sync.Map // call id -> *atomic.Int32
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		n, _ := tries.LoadOrStore(r.URL.Path, new(atomic.Int32))
		if n.(*atomic.Int32).Add(1) == 1 {
			return respond(503, "busy"), nil
		}
		return respond(200, "ok"), nil
	})
	var (
		mu      sync.Mutex
		numbers = map[uint64]string{}
	)
	tr := New(base, WithBackoff(Backoff{}), WithObserver(func(_ context.Context, a Attempt) {
		mu.Lock()
		defer mu.Unlock()
		if other, ok := numbers[a.Call]; ok {
			assert.Equal(t, other, a.URL, "two calls share Call %d", a.Call)
		}
		numbers[a.Call] = a.URL
	}))
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com/%d", i), nil)
			resp, err := tr.RoundTrip(req)
			if assert.NoError(t, err) {
				assert.Equal(t, 200, resp.StatusCode)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, numbers, calls, "distinct call numbers")
	tries.Range(func(path, n any) bool {
		assert.EqualValues(t, 2, n.(*atomic.Int32).Load(), "tries of %s", path)
		return true
	})
}

// TestCallNumbersUnique: the sharded call counter never hands out one number
// twice, from many goroutines at once.
func TestCallNumbersUnique(t *testing.T) {
	var c callNumbers
	const goroutines, each = 8, 2000
	got := make(chan uint64, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				got <- c.next()
			}
		}()
	}
	wg.Wait()
	close(got)
	seen := map[uint64]bool{}
	for n := range got {
		require.False(t, seen[n], "number %d handed out twice", n)
		require.NotZero(t, n)
		seen[n] = true
	}
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

// TestObserverPanicLeaksNothing: an Observer that panics has the try's
// response closed, the next try's fresh body closed, and the Budget's charge
// given back before the panic goes on up to the caller (R15).
func TestObserverPanicLeaksNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
	}{
		{"on a success", 200},
		{"on a retry", 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			respBody := &trackedBody{r: strings.NewReader("x")}
			var fresh *trackedBody
			base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: respBody, ContentLength: 1}, nil
			})
			budget := NewBudget(PublicTierMaxWait)
			req := newRequest(t, WithBudget(context.Background(), budget), "POST", "https://api.example.com", []byte("{}"))
			req.GetBody = func() (io.ReadCloser, error) {
				fresh = &trackedBody{r: strings.NewReader("{}")}
				return fresh, nil
			}
			tr := New(base, WithClock(retryhttptest.NewClock()), WithObserver(func(context.Context, Attempt) { panic("observer bug") }))
			assert.PanicsWithValue(t, "observer bug", func() { _, _ = tr.RoundTrip(req) })
			assert.EqualValues(t, 1, respBody.closed.Load(), "the try's response is closed")
			if tc.status != 200 {
				require.NotNil(t, fresh)
				assert.EqualValues(t, 1, fresh.closed.Load(), "the next try's body is closed")
			}
			assert.Zero(t, budget.Waited(), "nothing stays charged")
		})
	}
}
