package retryhttp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var (
	errRefused  = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	errNotFound = &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}
)

// TestRetryLoop walks the loop through scripted tries: how many tries go
// out, how long each wait is (jitter 0, so exact), and what comes back.
func TestRetryLoop(t *testing.T) {
	const ms = time.Millisecond
	type step = func(*http.Request) (*http.Response, error)
	tests := []struct {
		name       string
		opts       []Option
		steps      []step
		wantTries  int
		wantWaits  []time.Duration
		wantStatus int     // of the response returned; 0 when an error is
		wantErr    error   // errors.Is target when an error is returned
		wantReason Outcome // of the *Error, when one is returned
	}{
		{"success at once", nil, []step{status(200)}, 1, nil, 200, nil, 0},
		{"503 then success", nil, []step{status(503), status(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"two 5xx then success", nil, []step{status(502), status(504), status(200)}, 3, []time.Duration{400 * ms, 800 * ms}, 200, nil, 0},
		{"exhausted returns the last response", nil, []step{status(503), status(500), status(503)}, 3, []time.Duration{400 * ms, 800 * ms}, 503, nil, 0},
		{"408 is retried", nil, []step{status(408), status(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"429 is retried", nil, []step{status(429), status(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"501 is not retried", nil, []step{status(501)}, 1, nil, 501, nil, 0},
		{"505 is not retried", nil, []step{status(505)}, 1, nil, 505, nil, 0},
		{"400 is not retried", nil, []step{status(400)}, 1, nil, 400, nil, 0},
		{"X-Should-Retry true on 400", nil, []step{status(400, "X-Should-Retry", "true"), status(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"X-Should-Retry false on 503", nil, []step{status(503, "X-Should-Retry", "false")}, 1, nil, 503, nil, 0},
		{"Retry-After larger wins", nil, []step{status(429, "Retry-After", "2"), status(200)}, 2, []time.Duration{2 * time.Second}, 200, nil, 0},
		{"backoff larger wins", nil, []step{status(503, "Retry-After", "0.1"), status(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"retry-after-ms", nil, []step{status(429, "Retry-After-Ms", "1500"), status(200)}, 2, []time.Duration{1500 * ms}, 200, nil, 0},
		{"Retry-After is never capped by Max", nil, []step{status(503, "Retry-After", "120"), status(200)}, 2, []time.Duration{2 * time.Minute}, 200, nil, 0},
		{"Retry-After date", nil, []step{status(429, "Retry-After", epoch.Add(7*time.Second).Format(http.TimeFormat)), status(200)}, 2, []time.Duration{7 * time.Second}, 200, nil, 0},
		{"transport error then success", nil, []step{fail(errRefused), status(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
		{"transport errors exhausted", nil, []step{fail(errRefused), fail(errRefused), fail(errRefused)}, 3, []time.Duration{400 * ms, 800 * ms}, 0, syscall.ECONNREFUSED, Exhausted},
		{"permanent error on the first try", nil, []step{fail(errNotFound)}, 1, nil, 0, errNotFound, 0},
		{"permanent error on a later try", nil, []step{status(503), fail(errNotFound)}, 2, []time.Duration{400 * ms}, 0, errNotFound, Done},
		{"max retries 0", []Option{WithMaxRetries(0)}, []step{status(503)}, 1, nil, 503, nil, 0},
		{"negative max retries counts as 0", []Option{WithMaxRetries(-3)}, []step{fail(errRefused)}, 1, nil, 0, syscall.ECONNREFUSED, Exhausted},
		{"max retries 5", []Option{WithMaxRetries(5)}, []step{status(503), status(503), status(503), status(503), status(503), status(503)}, 6,
			[]time.Duration{400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms}, 503, nil, 0},
		{"backoff cap", []Option{WithMaxRetries(3), WithBackoff(Backoff{Base: time.Second, Factor: 10, Max: 5 * time.Second})},
			[]step{status(503), status(503), status(503), status(200)}, 4, []time.Duration{time.Second, 5 * time.Second, 5 * time.Second}, 200, nil, 0},
		{"zero backoff starts no timer", []Option{WithBackoff(Backoff{})}, []step{status(503), status(503), status(200)}, 3, nil, 200, nil, 0},
		{"custom classifier", []Option{WithClassifier(func(_ *http.Request, resp *http.Response, _ error) Class {
			if resp != nil && resp.StatusCode == 404 {
				return Transient
			}
			return Permanent
		})}, []step{status(404), status(200)}, 2, []time.Duration{400 * ms}, 200, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			base := newScript(tt.steps...)
			tr := New(base, append([]Option{WithClock(clk), WithBackoff(noJitter)}, tt.opts...)...)
			req := newRequest(t, context.Background(), "GET", "https://api.example.com/v1/models", nil)
			got := drive(t, tr, clk, req)

			if n := base.tries(); n != tt.wantTries {
				t.Errorf("tries = %d, want %d", n, tt.wantTries)
			}
			if !slices.Equal(got.waits, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", got.waits, tt.wantWaits)
			}
			if got.resp != nil && got.err != nil {
				t.Fatalf("RoundTrip returned both a response and an error (%v)", got.err)
			}
			if tt.wantStatus != 0 {
				if got.resp == nil {
					t.Fatalf("err = %v, want a %d response", got.err, tt.wantStatus)
				}
				if got.resp.StatusCode != tt.wantStatus {
					t.Errorf("status = %d, want %d", got.resp.StatusCode, tt.wantStatus)
				}
				body, _ := io.ReadAll(got.resp.Body)
				got.resp.Body.Close()
				if want := http.StatusText(tt.wantStatus); string(body) != want {
					t.Errorf("body = %q, want the unread %q", body, want)
				}
				return
			}
			if !errors.Is(got.err, tt.wantErr) {
				t.Fatalf("err = %v, want errors.Is %v", got.err, tt.wantErr)
			}
			var e *Error
			if tt.wantReason == 0 && tt.wantTries == 1 {
				if got.err != tt.wantErr {
					t.Errorf("err = %#v, want the base's error unchanged", got.err)
				}
				return
			}
			if !errors.As(got.err, &e) {
				t.Fatalf("err = %T %v, want *Error", got.err, got.err)
			}
			if e.Reason != tt.wantReason || e.Tries != tt.wantTries {
				t.Errorf("Error reason %v after %d tries, want %v after %d", e.Reason, e.Tries, tt.wantReason, tt.wantTries)
			}
			var wantWaited time.Duration
			for _, w := range tt.wantWaits {
				wantWaited += w
			}
			if e.Waited != wantWaited {
				t.Errorf("Error.Waited = %v, want %v", e.Waited, wantWaited)
			}
		})
	}
}

// TestErrorFields checks what an *Error carries: the last status received
// even after a later transport error, and the last Retry-After asked.
func TestErrorFields(t *testing.T) {
	clk := newFakeClock()
	base := newScript(status(503, "Retry-After", "3"), fail(errRefused), fail(errRefused))
	tr := New(base, WithClock(clk), WithBackoff(noJitter))
	got := drive(t, tr, clk, newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil))
	var e *Error
	if !errors.As(got.err, &e) {
		t.Fatalf("err = %v, want *Error", got.err)
	}
	want := Error{Tries: 3, Waited: 3*time.Second + 800*time.Millisecond, Status: 503, RetryAfter: 3 * time.Second, Reason: Exhausted, Err: e.Err}
	if *e != want {
		t.Errorf("Error = %+v, want %+v", *e, want)
	}
	if !errors.Is(got.err, syscall.ECONNREFUSED) {
		t.Errorf("errors.Is(err, ECONNREFUSED) = false for %v", got.err)
	}
	const wantText = "retryhttp: exhausted after 3 tries, waited 3.8s, status 503, retry-after 3s: dial tcp: connection refused"
	if got.err.Error() != wantText {
		t.Errorf("Error() = %q, want %q", got.err.Error(), wantText)
	}
}

// TestFirstTrySendsCallerRequest checks R1 on the happy path: the base gets
// the caller's own request and the response comes back as the base made it.
func TestFirstTrySendsCallerRequest(t *testing.T) {
	want := respond(200, "hello")
	var sent *http.Request
	tr := New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return want, nil
	}))
	req := newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil || resp != want {
		t.Fatalf("RoundTrip = %p, %v; want the base's response %p", resp, err, want)
	}
	if sent != req {
		t.Errorf("first try sent %p, want the caller's request %p", sent, req)
	}
	if resp.Body != want.Body {
		t.Errorf("response body was replaced")
	}
}

// TestRetriesSendClonesAndNeverTouchTheCaller checks R1 and R10 on a POST
// that fails twice: each retry is a new request with the whole body, byte for
// byte, and the caller's request is the same after as before.
func TestRetriesSendClonesAndNeverTouchTheCaller(t *testing.T) {
	payload := make([]byte, 1<<20)
	rand.Read(payload)
	clk := newFakeClock()
	base := newScript(status(503), fail(errRefused), status(200))
	tr := New(base, WithClock(clk))
	req := newRequest(t, context.Background(), "POST", "https://api.example.com/v1/chat", payload)
	req.Header.Set("Content-Type", "application/json")
	before := *req
	beforeHeader := req.Header.Clone()

	got := drive(t, tr, clk, req)
	if got.err != nil {
		t.Fatal(got.err)
	}
	got.resp.Body.Close()
	if base.tries() != 3 {
		t.Fatalf("tries = %d, want 3", base.tries())
	}
	for i, s := range base.sent {
		if !bytes.Equal(s.body, payload) {
			t.Errorf("try %d sent %d bytes, want the same %d bytes", i+1, len(s.body), len(payload))
		}
		if i > 0 && s.req == req {
			t.Errorf("retry %d sent the caller's request, want a clone", i)
		}
		if s.req.ContentLength != int64(len(payload)) {
			t.Errorf("try %d ContentLength = %d, want %d", i+1, s.req.ContentLength, len(payload))
		}
	}
	if base.sent[0].req != req {
		t.Errorf("first try sent a copy; R1 lets it send the caller's request")
	}
	if !reflect.DeepEqual(req.Header, beforeHeader) {
		t.Errorf("caller's header changed: %v, want %v", req.Header, beforeHeader)
	}
	if req.Body != before.Body || req.URL != before.URL || req.Method != before.Method || req.Context() != before.Context() {
		t.Errorf("caller's request was modified")
	}
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
			clk := newFakeClock()
			base := newScript(status(503), status(200))
			var outcomes []Outcome
			tr := New(base, WithClock(clk), WithObserver(func(_ context.Context, a Attempt) { outcomes = append(outcomes, a.Outcome) }))
			body := &trackedBody{r: bytes.NewReader([]byte(`{"q":1}`))}
			req := newRequest(t, context.Background(), "POST", "https://api.example.com/v1", nil)
			req.Body, req.GetBody, req.ContentLength = body, tc.getBody, 7
			got := drive(t, tr, clk, req)
			if got.err != nil || got.resp.StatusCode != 503 {
				t.Fatalf("RoundTrip = %v, %v; want the 503", got.resp, got.err)
			}
			got.resp.Body.Close()
			if base.tries() != 1 || len(got.waits) != 0 {
				t.Errorf("tries = %d, waits = %v; want 1 try, no wait", base.tries(), got.waits)
			}
			if !slices.Equal(outcomes, []Outcome{NotReplayable}) {
				t.Errorf("outcomes = %v, want [not_replayable]", outcomes)
			}
			// The body was sent once, and closed by the base that sent it.
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
	cooling := func() *Cooldown { // api.example.com cools for an hour
		cd := NewCooldown(nil)
		cd.settle("https://api.example.com", nil, epoch, signal{until: epoch.Add(time.Hour)}, nil)
		return cd
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	withMinute, cancelMinute := context.WithTimeout(context.Background(), time.Minute)
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
			clk := newFakeClock()
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
	clk := newFakeClock()
	respBody := &trackedBody{r: bytes.NewReader(nil)}
	both := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: respBody}, errRefused
	})
	got := drive(t, New(both, WithClock(clk), WithMaxRetries(0)), clk, newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
	if got.resp != nil || !errors.Is(got.err, syscall.ECONNREFUSED) {
		t.Errorf("base returning both: got %v, %v; want only the error", got.resp, got.err)
	}
	if respBody.closed.Load() != 1 {
		t.Errorf("the stray response's body was not closed")
	}

	neither := roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	got = drive(t, New(neither, WithClock(clk), WithMaxRetries(0)), clk, newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
	if got.resp != nil || !errors.Is(got.err, errNilResponse) {
		t.Errorf("base returning neither: got %v, %v; want errNilResponse", got.resp, got.err)
	}

	nilBody := roundTripperFunc(func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: 204}, nil })
	resp, err := New(nilBody).RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
	if err != nil || resp.Body == nil {
		t.Errorf("base returning a nil Body: got %v, %v; want a closable body", resp, err)
	}

	if _, err := New(nil).RoundTrip(nil); err == nil {
		t.Errorf("RoundTrip(nil) returned no error")
	}
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
			clk := newFakeClock()
			failed := &trackedBody{r: tt.body}
			base := newScript(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 503, Header: http.Header{}, Body: failed, ContentLength: tt.contentLength}, nil
			}, status(200))
			got := drive(t, New(base, WithClock(clk)), clk, newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
			if got.err != nil {
				t.Fatal(got.err)
			}
			got.resp.Body.Close()
			if n := failed.read.Load(); n != tt.wantRead {
				t.Errorf("read %d bytes of the failed body, want %d", n, tt.wantRead)
			}
			if failed.closed.Load() != 1 {
				t.Errorf("failed body closed %d times, want 1", failed.closed.Load())
			}
		})
	}
}

// TestObserver checks R15: one Attempt per try, in order, before the wait,
// with the request's context and a URL free of query and userinfo.
func TestObserver(t *testing.T) {
	clk := newFakeClock()
	const tryTime = 250 * time.Millisecond
	steps := []func(*http.Request) (*http.Response, error){status(503), status(429, "Retry-After", "5"), status(200)}
	for i, s := range steps {
		steps[i] = func(r *http.Request) (*http.Response, error) {
			clk.Spend(tryTime) // the try itself takes time on the injected clock
			return s(r)
		}
	}
	type ctxKey struct{}
	var attempts []Attempt
	var startedBefore []int32
	tr := New(newScript(steps...), WithClock(clk), WithBackoff(noJitter), WithObserver(func(ctx context.Context, a Attempt) {
		if ctx.Value(ctxKey{}) != "turn-7" {
			t.Errorf("observer got a context without the request's value")
		}
		startedBefore = append(startedBefore, clk.started.Load()) // waits begun before this report
		attempts = append(attempts, a)
	}))
	ctx := context.WithValue(context.Background(), ctxKey{}, "turn-7")
	req := newRequest(t, ctx, "POST", "https://bob:hunter2@api.example.com/v1/chat?key=secret#frag", []byte("{}"))
	got := drive(t, tr, clk, req)
	if got.err != nil {
		t.Fatal(got.err)
	}
	got.resp.Body.Close()

	want := []Attempt{
		{Try: 1, Status: 503, Class: Transient, Wait: 400 * time.Millisecond, From: FromBackoff, Outcome: Retrying},
		{Try: 2, Status: 429, Class: Throttled, Wait: 5 * time.Second, From: FromRetryAfter, Outcome: Retrying},
		{Try: 3, Status: 200, Class: Permanent, Outcome: Done},
	}
	if len(attempts) != len(want) {
		t.Fatalf("got %d attempts, want %d: %+v", len(attempts), len(want), attempts)
	}
	for i, w := range want {
		w.Call, w.MaxTries, w.Method, w.URL, w.Elapsed = attempts[0].Call, 3, "POST", "https://api.example.com/v1/chat", tryTime
		if attempts[i] != w {
			t.Errorf("attempt %d = %+v,\nwant %+v", i+1, attempts[i], w)
		}
		if startedBefore[i] != int32(i) { // try n is reported after n-1 waits, before the n-th
			t.Errorf("attempt %d: observer called after %d waits began, want %d", i+1, startedBefore[i], i)
		}
	}
	if attempts[0].Call == 0 {
		t.Errorf("Call = 0, want a call number")
	}
	// A second call gets another number.
	got = drive(t, tr, clk, newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))
	got.resp.Body.Close()
	if last := attempts[len(attempts)-1]; last.Call == attempts[0].Call {
		t.Errorf("two calls share Call %d", last.Call)
	}
}

// TestClassifierGetsCallerRequest checks R2: the Classifier sees the
// caller's request and context on every try, never a clone.
func TestClassifierGetsCallerRequest(t *testing.T) {
	clk := newFakeClock()
	var seen []*http.Request
	tr := New(newScript(status(503), status(503), status(200)), WithClock(clk), WithTryTimeout(time.Minute),
		WithClassifier(func(r *http.Request, resp *http.Response, err error) Class {
			seen = append(seen, r)
			return Classify(r, resp, err)
		}))
	req := newRequest(t, context.Background(), "POST", "https://api.example.com", []byte("x"))
	got := drive(t, tr, clk, req)
	if got.err != nil {
		t.Fatal(got.err)
	}
	got.resp.Body.Close()
	if len(seen) != 3 {
		t.Fatalf("classifier called %d times, want 3", len(seen))
	}
	for i, r := range seen {
		if r != req {
			t.Errorf("try %d: classifier got %p, want the caller's request %p", i+1, r, req)
		}
	}
}

// TestLogs checks R14: a Warn entry per retry with its fields, and one
// give-up entry when the transport stops after a failed try.
func TestLogs(t *testing.T) {
	clk := newFakeClock()
	log, logs := logSink()
	base := newScript(status(503), fail(errRefused), status(429, "Retry-After", "3"))
	tr := New(base, WithClock(clk), WithBackoff(noJitter), WithLogger(log))
	got := drive(t, tr, clk, newRequest(t, context.Background(), "POST", "https://u:p@api.example.com/v1/chat?key=k", []byte("{}")))
	if got.err != nil {
		t.Fatal(got.err)
	}
	got.resp.Body.Close()

	type fields = map[string]any
	want := []struct {
		msg    string
		fields fields
	}{
		{"llm transient failure — retrying", fields{"attempt": int64(1), "max": int64(2), "status": int64(503), "wait_ms": int64(400),
			"wait_from": "backoff", "method": "POST", "url": "https://api.example.com/v1/chat"}},
		{"llm transient failure — retrying", fields{"attempt": int64(2), "max": int64(2), "status": int64(0), "wait_ms": int64(800),
			"wait_from": "backoff", "method": "POST", "url": "https://api.example.com/v1/chat", "error": "dial tcp: connection refused"}},
		{"llm transient failure — giving up", fields{"reason": "exhausted", "tries": int64(3), "waited_ms": int64(1200), "status": int64(429),
			"url": "https://api.example.com/v1/chat"}},
	}
	entries := logs.All()
	if len(entries) != len(want) {
		t.Fatalf("got %d log entries, want %d: %v", len(entries), len(want), entries)
	}
	for i, w := range want {
		e := entries[i]
		if e.Message != w.msg || e.Level.String() != "warn" {
			t.Errorf("entry %d = %s %q, want warn %q", i, e.Level, e.Message, w.msg)
		}
		if got := e.ContextMap(); !reflect.DeepEqual(got, w.fields) {
			t.Errorf("entry %d fields = %v,\nwant %v", i, got, w.fields)
		}
	}
}

// TestNoLogsOnSuccessOrPermanentFailure: only retries and give-ups log.
func TestNoLogsOnSuccessOrPermanentFailure(t *testing.T) {
	for _, s := range []func(*http.Request) (*http.Response, error){status(200), status(404), fail(errNotFound)} {
		clk := newFakeClock()
		log, logs := logSink()
		got := drive(t, New(newScript(s), WithClock(clk), WithLogger(log)), clk, newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
		if got.resp != nil {
			got.resp.Body.Close()
		}
		if logs.Len() != 0 {
			t.Errorf("got %d log entries, want none: %v", logs.Len(), logs.All())
		}
	}
}

// TestCallerCancelIsNeverRetried checks R2 and R9: the caller's own cancel
// ends the call with the base's error unchanged, on the first try.
func TestCallerCancelIsNeverRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	clk := newFakeClock()
	base := newScript(func(r *http.Request) (*http.Response, error) { return nil, r.Context().Err() })
	got := drive(t, New(base, WithClock(clk)), clk, newRequest(t, ctx, "GET", "https://api.example.com", nil))
	if got.err != context.Canceled {
		t.Errorf("err = %v, want context.Canceled unchanged", got.err)
	}
	if base.tries() != 1 {
		t.Errorf("tries = %d, want 1", base.tries())
	}
}

// TestCancelDuringWait checks R9: the caller's context ending during a wait
// returns at once an *Error with Reason Canceled and the last status; the
// Observer never sees Canceled, the log does.
func TestCancelDuringWait(t *testing.T) {
	clk := newFakeClock()
	log, logs := logSink()
	var outcomes []Outcome
	tr := New(newScript(status(503, "Retry-After", "30"), status(200)), WithClock(clk), WithLogger(log),
		WithObserver(func(_ context.Context, a Attempt) { outcomes = append(outcomes, a.Outcome) }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := driveWith(t, tr, clk, newRequest(t, ctx, "GET", "https://api.example.com", nil), func(time.Duration) time.Duration {
		clk.Add(10 * time.Second)
		cancel()
		return 0
	})
	var e *Error
	if !errors.As(got.err, &e) || !errors.Is(got.err, context.Canceled) {
		t.Fatalf("err = %v, want *Error wrapping context.Canceled", got.err)
	}
	want := Error{Tries: 1, Waited: 10 * time.Second, Status: 503, RetryAfter: 30 * time.Second, Reason: Canceled, Err: context.Canceled}
	if *e != want {
		t.Errorf("Error = %+v, want %+v", *e, want)
	}
	if !slices.Equal(outcomes, []Outcome{Retrying}) {
		t.Errorf("observer outcomes = %v, want [retrying]", outcomes)
	}
	last := logs.All()[logs.Len()-1]
	if last.Message != msgGivingUp || last.ContextMap()["reason"] != "canceled" {
		t.Errorf("last log = %q %v, want a give-up with reason canceled", last.Message, last.ContextMap())
	}
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

	clk := newFakeClock()
	tr := New(base, WithClock(clk))
	got := drive(t, tr, clk, newRequest(t, context.Background(), "GET", srv.URL+"/v1", nil))
	if got.err != nil {
		t.Fatal(got.err)
	}
	body, _ := io.ReadAll(got.resp.Body)
	got.resp.Body.Close()
	if string(body) != "ok" || hits.Load() != 3 {
		t.Errorf("body %q after %d hits, want \"ok\" after 3", body, hits.Load())
	}
	if !slices.Equal(got.waits, []time.Duration{time.Second, time.Second}) {
		t.Errorf("waits = %v, want the server's 1s twice", got.waits)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 1 {
		t.Errorf("server saw %d connections, want 1 reused for all three tries", len(conns))
	}
}

// TestCloseIdleConnections checks that the method reaches the base, and that
// the retry path never calls it (R1).
func TestCloseIdleConnections(t *testing.T) {
	base := &idleCounter{script: newScript(status(503), status(503), status(200))}
	clk := newFakeClock()
	tr := New(base, WithClock(clk))
	got := drive(t, tr, clk, newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
	if got.err != nil {
		t.Fatal(got.err)
	}
	got.resp.Body.Close()
	if base.closed != 0 {
		t.Errorf("retries called CloseIdleConnections %d times, want 0", base.closed)
	}
	tr.CloseIdleConnections()
	if base.closed != 1 {
		t.Errorf("CloseIdleConnections reached the base %d times, want 1", base.closed)
	}
	New(roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })).CloseIdleConnections() // no method: no panic
}

type idleCounter struct {
	*script
	closed int
}

func (b *idleCounter) CloseIdleConnections() { b.closed++ }

func TestNewDefaults(t *testing.T) {
	tr := New(nil, nil, WithClock(nil), WithLogger(nil), WithClassifier(nil), WithTryTimeout(-time.Second))
	if tr.base != http.DefaultTransport {
		t.Errorf("base = %v, want http.DefaultTransport", tr.base)
	}
	c := tr.cfg
	if c.maxRetries != 2 || c.backoff != DefaultBackoff || c.clock == nil || c.logger == nil ||
		c.classify == nil || c.observe != nil || c.tryTimeout != 0 || c.idempotencyKey || c.quota != nil {
		t.Errorf("defaults = %+v", c)
	}
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
		if other, ok := numbers[a.Call]; ok && other != a.URL {
			t.Errorf("calls %s and %s share Call %d", other, a.URL, a.Call)
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
	clk := newFakeClock()
	var attempts []Attempt
	replies := []func(*http.Request) (*http.Response, error){status(503), status(503), status(503), status(503), status(503), status(200)}
	tr := New(newScript(replies...), WithClock(clk), WithMaxRetries(math.MaxInt),
		WithObserver(func(_ context.Context, a Attempt) { attempts = append(attempts, a) }))
	got := drive(t, tr, clk, newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
	require.NoError(t, got.err)
	got.resp.Body.Close()
	assert.Equal(t, 200, got.resp.StatusCode)
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
			tr := New(base, WithClock(newFakeClock()), WithObserver(func(context.Context, Attempt) { panic("observer bug") }))
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

// stalledBody sends nothing until it is closed, like a server that sends
// error headers and then stalls: Close ends a Read under way, as net/http's
// bodies do.
type stalledBody struct {
	closing chan struct{}
	once    sync.Once
	closed  atomic.Int32
}

func newStalledBody() *stalledBody { return &stalledBody{closing: make(chan struct{})} }

func (b *stalledBody) Read([]byte) (int, error) {
	<-b.closing
	return 0, errors.New("read on closed body")
}

func (b *stalledBody) Close() error {
	b.closed.Add(1)
	b.once.Do(func() { close(b.closing) })
	return nil
}

// TestStalledErrorBodyNeverHoldsTheCall: draining a failed response is
// bounded in real time whatever the options (R10): with no try timeout, as
// with one, a body that never comes is closed and the retry goes.
func TestStalledErrorBodyNeverHoldsTheCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"no try timeout", nil},
		{"try timeout", []Option{WithTryTimeout(2 * time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			stalled := newStalledBody()
			base := newScript(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 503, Header: http.Header{}, Body: stalled, ContentLength: -1}, nil
			}, status(200))
			tr := New(base, append([]Option{WithClock(clk)}, tc.opts...)...)
			got := drive(t, tr, clk, newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
			require.NoError(t, got.err)
			got.resp.Body.Close()
			assert.Equal(t, 200, got.resp.StatusCode, "the retry's answer")
			assert.Equal(t, 2, base.tries())
			assert.EqualValues(t, 1, stalled.closed.Load(), "the stalled body is closed once")
		})
	}
}
