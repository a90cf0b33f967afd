package retryhttp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

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
	clk := newClock()
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

// TestCloseIdleConnections checks that the method reaches the base, and that
// the retry path never calls it (R1).
func TestCloseIdleConnections(t *testing.T) {
	base := &idleCounter{Script: retryhttptest.NewScript(reply(503), reply(503), reply(200))}
	tr := New(base, WithClock(newClock()))
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
// twice, from many goroutines at once, and its numbers start small: each
// shard's first is its index plus one, so a fresh counter's first number is
// between 1 and the number of shards.
func TestCallNumbersUnique(t *testing.T) {
	for range 50 {
		first := new(callNumbers).next()
		require.True(t, first >= 1 && first <= callShards, "a fresh counter's first number: %d", first)
	}
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

// TestObserver checks R15: one Attempt per try, in order, before the wait,
// with the request's context and a URL free of query and userinfo.
func TestObserver(t *testing.T) {
	const tryTime = 250 * time.Millisecond
	clk := newClock()
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
			"ask_from": "header", "url": "https://api.example.com/v1/chat"}},
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
			tr := New(base, WithClock(newClock()), WithObserver(func(context.Context, Attempt) { panic("observer bug") }))
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

// TestLogsCarryNoStackOrCaller: a retry is expected, not a fault, so no
// entry of the transport carries a stack trace or a caller, whatever the
// logger's config (R14). The logger here is zap.NewDevelopment's config, stack
// traces at Warn and callers on, writing to a buffer: without the transport's
// own options each entry below came with some 20 lines of stack and the
// caller observe.go, which tells a user nothing.
func TestLogsCarryNoStackOrCaller(t *testing.T) {
	for _, tc := range []struct {
		name string
		enc  zapcore.Encoder
	}{
		{"console", zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())},
		{"json", zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := zap.NewDevelopmentConfig().Build(zap.WrapCore(func(zapcore.Core) zapcore.Core {
				return zapcore.NewCore(tc.enc, zapcore.AddSync(&buf), zapcore.DebugLevel)
			}))
			require.NoError(t, err)
			allLogEntryKinds(t, WithLogger(log))

			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			require.Len(t, lines, 3, "one line per entry, no stack trace lines:\n%s", buf.String())
			for i, want := range []string{msgRetrying, msgGivingUp, msgHolding} {
				assert.Contains(t, lines[i], want)
				assert.NotContains(t, lines[i], "observe.go", "entry %d: a caller in the library tells a user nothing", i+1)
				if tc.name == "json" {
					var e map[string]any
					require.NoError(t, json.Unmarshal([]byte(lines[i]), &e))
					assert.NotContains(t, e, "stacktrace", "entry %d", i+1)
					assert.NotContains(t, e, "caller", "entry %d", i+1)
				}
			}
		})
	}
}

// allLogEntryKinds makes a Transport with opts write one entry of each kind:
// a retry (a 503), a give-up (a 429 with no retries left, which holds the
// key for some 20 seconds) and, on the next call, a Cooldown's hold.
func allLogEntryKinds(t *testing.T, opts ...Option) {
	t.Helper()
	_, _, tr := scripted(replies{reply(503), reply(429, "Retry-After", "20"), reply(200)},
		append([]Option{WithMaxRetries(1), WithCooldown(NewCooldown(nil))}, opts...)...)
	for _, want := range []int{429, 200} {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com/v1/chat", nil))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode)
	}
}

// geminiAsks2s is a Gemini 429 body that asks for 2 s in its RetryInfo,
// the way the Gemini SDK's calls see it: no Retry-After header at all.
const geminiAsks2s = `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}`

// gemini429 is a 429 with the geminiAsks2s body, as JSON.
func gemini429() retryhttptest.Reply {
	r := reply(429, "Content-Type", "application/json")
	r.Body = geminiAsks2s
	return r
}

// TestLogsAskFrom: the retry and give-up entries say where the server's ask
// came from, ask_from "header" or "body", and leave it out when the server
// asked nothing (R14). wait_from keeps its three values: a body's ask that
// sets the wait is "retry-after", as a header's is.
func TestLogsAskFrom(t *testing.T) {
	gemini := gemini429()
	type entry struct{ msg, askFrom, waitFrom string } // "" for a field left out
	for _, tc := range []struct {
		name   string
		first  retryhttptest.Reply
		opts   []Option
		cancel bool // the caller cancels during the wait
		want   []entry
	}{
		{"retry after a body's retryDelay", gemini, nil, false,
			[]entry{{msgRetrying, "body", "retry-after"}}},
		{"retry after Retry-After", reply(429, "Retry-After", "2"), nil, false,
			[]entry{{msgRetrying, "header", "retry-after"}}},
		{"retry after retry-after-ms", reply(429, "Retry-After-Ms", "2000"), nil, false,
			[]entry{{msgRetrying, "header", "retry-after"}}},
		{"retry after a small ask: the backoff wins, the ask is still told", reply(503, "Retry-After-Ms", "10"), nil, false,
			[]entry{{msgRetrying, "header", "backoff"}}},
		{"retry with no ask", reply(503), nil, false,
			[]entry{{msgRetrying, "", "backoff"}}},
		{"give up after a body's retryDelay", gemini, []Option{WithMaxRetries(0)}, false,
			[]entry{{msgGivingUp, "body", ""}}},
		{"give up after Retry-After", reply(429, "Retry-After", "2"), []Option{WithMaxRetries(0)}, false,
			[]entry{{msgGivingUp, "header", ""}}},
		{"give up with no ask", reply(503), []Option{WithMaxRetries(0)}, false,
			[]entry{{msgGivingUp, "", ""}}},
		{"canceled during a body's wait", gemini, nil, true,
			[]entry{{msgRetrying, "body", "retry-after"}, {msgGivingUp, "body", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := logSink()
			clk, _, tr := scripted(replies{tc.first, reply(200)}, append([]Option{WithLogger(log)}, tc.opts...)...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				clk.AfterFunc(time.Millisecond, cancel)
			}
			if resp, _ := tr.RoundTrip(newRequest(t, ctx, "POST", "https://api.example.com/v1/chat", []byte("{}"))); resp != nil {
				resp.Body.Close()
			}
			var got []entry
			for _, e := range logs.All() {
				f := e.ContextMap()
				got = append(got, entry{e.Message, str(f["ask_from"]), str(f["wait_from"])})
				if v, ok := f["ask_from"]; ok {
					assert.IsType(t, "", v, "ask_from is a string")
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// str is v when it is a string, else "".
func str(v any) string {
	s, _ := v.(string)
	return s
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
	clk := newClock() // nothing here waits: every call is sent at once or not at all
	// cooling: api.example.com cools for an hour.
	watchedKey := func() *Cooldown {
		cd := NewCooldown(nil)
		cd.bind(clk, nil)
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
		{"a cooldown hold that does not fit", []Option{WithCooldown(watchedKey())}, func(b io.ReadCloser) *http.Request {
			return post(withMinute, b)
		}, false},
		{"canceled before the hold", []Option{WithCooldown(watchedKey())}, func(b io.ReadCloser) *http.Request { return post(canceled, b) }, false},
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
			resp, err := New(base, WithClock(newClock())).RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tt.wantRead, failed.read.Load(), "bytes read of the failed body")
			assert.EqualValues(t, 1, failed.closed.Load(), "times the failed body was closed")
		})
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

	clk := newClock()
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

// TestResendCount checks R21: a base below the transport reads 0, 1, 2 from
// the tries of one call, with and without a try timeout (which gives each try
// a context of its own), and 0 for a context that never met a Transport.
func TestResendCount(t *testing.T) {
	assert.Equal(t, 0, ResendCount(context.Background()))
	//lint:ignore SA1012 a nil context must not panic
	//nolint:staticcheck // a nil context must not panic
	assert.Equal(t, 0, ResendCount(nil))

	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"try timeout", []Option{WithTryTimeout(time.Minute)}},
		{"idempotency key", []Option{WithIdempotencyKey()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu   sync.Mutex
				seen []int
			)
			replies := []int{503, 503, 200}
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, ResendCount(r.Context()))
				return respond(replies[len(seen)-1], ""), nil
			})
			clk := newFakeClock()
			tr := New(base, append([]Option{WithClock(clk)}, tc.opts...)...)
			req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1", []byte("{}"))
			res := drive(t, tr, clk, req)
			require.NoError(t, res.err)
			res.resp.Body.Close()
			assert.Equal(t, []int{0, 1, 2}, seen)
			assert.Equal(t, 0, ResendCount(req.Context()), "the caller's context is untouched")
		})
	}
}

// TestFirstTryAsTheBaseGaveIt checks R1 off the happy path too: whatever
// option takes the call off it (its own Classifier, an Observer, a Quota, an
// idempotency key a GET does not need), the first try sends the caller's own
// request, and a response that is not retried comes back as the base gave
// it, its body the base's own (only WithTryTimeout wraps it, R13).
func TestFirstTryAsTheBaseGaveIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Option
	}{
		{"default options", nil},
		{"a Classifier of the caller's own", WithClassifier(Classify)},
		{"an Observer", WithObserver(func(context.Context, Attempt) {})},
		{"a Quota", WithQuota(NewQuota(10, 0.1))},
		{"an idempotency key, on a GET", WithIdempotencyKey()},
	} {
		for _, status := range []int{200, 404} {
			t.Run(tc.name+", "+http.StatusText(status), func(t *testing.T) {
				body := &trackedBody{r: strings.NewReader("hello")}
				want := respond(status, "hello")
				want.Body = body
				var sent []*http.Request
				tr := New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
					sent = append(sent, r)
					return want, nil
				}), tc.opt)
				req := newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil)
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				require.Len(t, sent, 1, "tries")
				assert.Same(t, req, sent[0], "the first try sends the caller's request")
				assert.Same(t, want, resp, "the base's response")
				assert.Same(t, body, resp.Body, "the base's body, not wrapped")
				assert.Zero(t, body.read.Load(), "unread")
			})
		}
	}
}

// Fault injection on real loopback connections (the fault_*_test.go files,
// with their harness here): what only a real connection shows (resets,
// refusals, draining, connection reuse, hangs, streams, many callers at
// once). Every server loop is bounded in count and real time; backoff waits
// run on a fake clock, so nothing sleeps to wait one out.

// faultServer is an httptest.Server on 127.0.0.1 that counts the
// connections it accepts and those still open.
type faultServer struct {
	*httptest.Server
	mu       sync.Mutex
	open     map[net.Conn]bool
	accepted int
}

// newFaultServer starts h. Its Close is registered as a cleanup, so call
// ttNoLeak before it and faultBase after it: cleanups run in reverse.
func newFaultServer(t *testing.T, h http.HandlerFunc) *faultServer {
	t.Helper()
	s := &faultServer{open: map[net.Conn]bool{}}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch st {
		case http.StateNew:
			s.accepted++
			s.open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(s.open, c)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *faultServer) conns() (open, accepted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open), s.accepted
}

// waitNoConns waits, at most 2 s of real time, for the server to see every
// connection closed.
func (s *faultServer) waitNoConns(t *testing.T) {
	t.Helper()
	assert.Eventually(t, func() bool { open, _ := s.conns(); return open == 0 }, 2*time.Second, 5*time.Millisecond,
		"server: connections still open 2 s after the client closed its idle ones")
}

// faultBase is a fresh http.Transport whose idle connections are closed when
// the test ends.
func faultBase(t *testing.T) *http.Transport {
	t.Helper()
	b := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	t.Cleanup(b.CloseIdleConnections)
	return b
}

// faultReset hijacks the connection of w and resets it (RST, not FIN).
func faultReset(t *testing.T, w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if !assert.NoError(t, err, "hijack") {
		return
	}
	faultRST(conn)
}

func faultRST(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// faultRaw serves HTTP/1.1 by hand on 127.0.0.1:0, for faults below what a
// Handler can do: serve gets the n-th connection (from 1) with its request
// already read, and the connection is closed after it. It returns the URL.
func faultRaw(t *testing.T, serve func(n int, c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; n <= 100; n++ { // bounded: no test makes more
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				serve(n, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String() + "/v1/chat"
}

// faultCounting wraps a base and counts the bytes the transport reads from
// each response body, and whether it closed it.
type faultCounting struct {
	base   http.RoundTripper
	mu     sync.Mutex
	bodies []*faultBody
}

type faultBody struct {
	io.ReadCloser
	n      atomic.Int64
	closed atomic.Bool
}

func (b *faultBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (b *faultBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

// CloseIdleConnections reaches the base, as the Transport's does.
func (c *faultCounting) CloseIdleConnections() {
	c.base.(interface{ CloseIdleConnections() }).CloseIdleConnections()
}

func (c *faultCounting) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if resp != nil {
		b := &faultBody{ReadCloser: resp.Body}
		resp.Body = b
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.mu.Unlock()
	}
	return resp, err
}

// transportGoroutines counts the goroutines of the transport still running:
// a read ahead of a failed body, or a Close of it, that has not ended (R10).
// They are told by who started them, so a test's own goroutine reading a
// body the transport handed back is not counted.
func transportGoroutines() int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "created by github.com/retryhttp/retryhttp.startReadAhead") ||
			strings.Contains(g, "created by github.com/retryhttp/retryhttp.(*readAhead)") {
			n++
		}
	}
	return n
}

// A 429 storm: many callers at once, every call throttled twice with
// Retry-After before it gets through. Each wait is the server's ask.
func TestThrottleStorm(t *testing.T) {
	ttNoLeak(t)
	const goroutines, calls = 16, 4
	var (
		mu    sync.Mutex
		tries = map[string]int{}
	)
	srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Call")
		mu.Lock()
		tries[id]++
		n := tries[id]
		mu.Unlock()
		if n <= 2 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	})
	// The callers share the kit's Clock, on which their waits overlap and
	// take no time. (A wait counts from its response, so on a shared clock a
	// caller's timer may be shorter than its wait by what others moved the
	// clock meanwhile: the waits asserted are the ones decided.)
	var waits []time.Duration // what each retry waits: the server's ask
	tr := New(faultBase(t), WithClock(newClock()), WithBackoff(Backoff{Base: 10 * time.Millisecond}),
		WithObserver(func(_ context.Context, a Attempt) {
			if a.Outcome == Retrying {
				mu.Lock()
				waits = append(waits, a.Wait)
				mu.Unlock()
			}
		}))

	ctx, cancel := context.WithCancel(context.Background())
	watchdog := time.AfterFunc(10*time.Second, cancel)
	defer watchdog.Stop()
	var wg sync.WaitGroup
	statuses := make(chan string, goroutines*calls)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				req.Header.Set("X-Call", fmt.Sprint(g, "-", i))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					statuses <- err.Error()
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses <- strconv.Itoa(resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		assert.Equal(t, "200", s, "how a call ended")
	}
	assert.Len(t, waits, 2*goroutines*calls, "waits: two per call")
	for _, d := range waits {
		if !assert.Equal(t, 2*time.Second, d, "a wait: the server's ask") {
			break
		}
	}
	tr.CloseIdleConnections()
	srv.waitNoConns(t)
}

// callEnd is how one call of TestManyCallers ended: the status of the
// response handed back (err nil, or what was wrong with its body), or the
// error RoundTrip returned (status 0).
type callEnd struct {
	status int
	err    error
}

// countCallEnds checks how each call of TestManyCallers ended (a 200, or
// an exhausted 503, 429 or *Error) and counts the ends by status, "error" for
// an *Error. An end that is neither is reported and not counted.
func countCallEnds(t *testing.T, results <-chan callEnd) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for o := range results {
		if o.err == nil {
			assert.Contains(t, []int{200, 503, 429}, o.status, "a call's status: 200, or an exhausted 503 or 429")
			counts[strconv.Itoa(o.status)]++
			continue
		}
		var e *Error
		if !assert.ErrorAs(t, o.err, &e, "a call's end: a response or an exhausted *Error") {
			continue
		}
		assert.Equal(t, Exhausted, e.Reason, "%v", o.err)
		assert.Equal(t, 3, e.Tries, "%v", o.err)
		assert.Error(t, e.Err, "the cause")
		assert.NotErrorAs(t, e.Err, new(*Error), "an *Error inside an *Error")
		assert.NotErrorIs(t, o.err, context.Canceled, "a call cut by the 10 s watchdog")
		counts["error"]++
	}
	return counts
}

// 32 goroutines x 10 calls through one Transport against a server that fails
// a share of its tries in every way it can: each call ends in a response or a
// typed *Error, and every connection is closed in the end.
func TestManyCallers(t *testing.T) {
	ttNoLeak(t)
	const goroutines, calls = 32, 10
	var n atomic.Int64
	srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch k := n.Add(1); {
		case k%7 == 3:
			faultReset(t, w)
		case k%5 == 1:
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		case k%11 == 4:
			http.Error(w, "slow down", http.StatusTooManyRequests)
		default:
			io.WriteString(w, "ok")
		}
	})
	// Zero waits: the transport starts no timer. The Quota is big enough
	// never to refuse; it is here to be shared by every caller under the
	// race detector.
	tr := New(faultBase(t), WithBackoff(Backoff{}), WithIdempotencyKey(), WithQuota(NewQuota(1e6, 0.1)))

	ctx, cancel := context.WithCancel(context.Background())
	watchdog := time.AfterFunc(10*time.Second, cancel)
	defer watchdog.Stop()
	results := make(chan callEnd, goroutines*calls)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				var body io.Reader
				method := http.MethodGet
				if (g+i)%2 == 1 {
					method, body = http.MethodPost, strings.NewReader(`{"prompt":"hi"}`)
				}
				req, _ := http.NewRequestWithContext(ctx, method, srv.URL, body)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					results <- callEnd{err: err}
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && string(b) != "ok" {
					err = fmt.Errorf("200 with body %q", b)
				}
				results <- callEnd{status: resp.StatusCode, err: err}
			}
		}()
	}
	wg.Wait()
	close(results)

	counts := countCallEnds(t, results)
	total := 0
	for _, c := range counts {
		total += c
	}
	t.Logf("%d calls, %d tries: %v", total, n.Load(), counts)
	assert.Equal(t, goroutines*calls, total, "calls ended")
	assert.NotZero(t, counts["200"], "calls that succeeded")
	assert.Greater(t, n.Load(), int64(goroutines*calls), "tries the server saw: more than the calls, retries")
	tr.CloseIdleConnections()
	srv.waitNoConns(t)
}

func TestResetMidHeaders(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resets    int
		wantTries int
		wantOK    bool
	}{
		{"two resets, then an answer", 2, 3, true},
		{"every try reset", 3, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			url := faultRaw(t, func(n int, c net.Conn) {
				if n <= tc.resets {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/pl") // cut mid-headers
					faultRST(c)
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			})
			clk := newClock()
			var seen ttAttempts
			tr := New(faultBase(t), WithClock(clk), WithBackoff(noJitter), WithObserver(seen.observe))

			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
			attempts := seen.list()
			require.Len(t, attempts, tc.wantTries, "attempts")
			for _, a := range attempts[:tc.resets] {
				assert.Error(t, a.Err, "try %d: a transport error", a.Try)
				assert.Equal(t, Transient, a.Class, "try %d", a.Try)
				assert.Zero(t, a.Status, "try %d", a.Try)
			}
			assertWaits(t, []time.Duration{400 * time.Millisecond, 800 * time.Millisecond}, clk.Waits())
			if tc.wantOK {
				require.NoError(t, err, "the 200")
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, "ok", string(body))
				return
			}
			require.Nil(t, resp)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, Error{Tries: 3, Waited: 1200 * time.Millisecond, Reason: Exhausted, Err: e.Err}, *e)
			assert.Error(t, e.Err, "a cause")
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	ttNoLeak(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String() + "/v1/chat"
	ln.Close() // nothing listens there now

	clk := newClock()
	tr := New(faultBase(t), WithClock(clk), WithBackoff(noJitter))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, url, nil))
	require.Nil(t, resp)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Equal(t, Error{Tries: 3, Waited: 1200 * time.Millisecond, Reason: Exhausted, Err: e.Err}, *e)
	assertWaits(t, []time.Duration{400 * time.Millisecond, 800 * time.Millisecond}, clk.Waits())
}

// A server that hangs before its headers is cut by the per-try timeout on
// the kit's Clock; the next try is answered.
func TestHangBeforeHeaders(t *testing.T) {
	ttNoLeak(t)
	const d = 2 * time.Second
	clk := newClock()
	var n atomic.Int32
	var clientLeft atomic.Bool
	srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			clk.Add(d) // the headers are late: time passes the try timeout, which cuts the try
			select {
			case <-r.Context().Done():
				clientLeft.Store(true)
			case <-time.After(5 * time.Second): // bounded
			}
			return
		}
		io.WriteString(w, "ok")
	})
	var seen ttAttempts
	tr := New(faultBase(t), WithClock(clk), WithBackoff(noJitter), WithTryTimeout(d), WithObserver(seen.observe))
	start := time.Now()
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	assert.Less(t, time.Since(start), 3*time.Second, "the call's real time: the hang is cut on the kit's Clock")
	require.NoError(t, err, "the second try's 200")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "ok", string(body))
	assert.EqualValues(t, 2, n.Load(), "requests")
	a := seen.list()
	require.Len(t, a, 2, "attempts")
	assert.True(t, isTryTimeout(a[0].Err), "the first try: Err = %v, want a per-try timeout", a[0].Err)
	assert.Equal(t, d, a[0].Elapsed, "the first try")
	tr.CloseIdleConnections()
	srv.waitNoConns(t)
	assert.True(t, clientLeft.Load(), "the server saw the timed-out try go away")
}

// A server that de-duplicates by Idempotency-Key applies each call once,
// even when it applies the effect and then loses the response by resetting
// the connection. Without a key the retry applies it twice: the test can tell.
func TestIdempotentRetryAppliedOnce(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        []Option
		wantApplied int
	}{
		{"WithIdempotencyKey", []Option{WithIdempotencyKey()}, 1},
		{"no key", nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			var (
				mu      sync.Mutex
				applied = map[string]int{}    // call -> times its effect was applied
				stored  = map[string]string{} // key -> the response it got
				lost    = map[string]bool{}   // call -> its first response was lost
			)
			srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				call, key := string(b), r.Header.Get("Idempotency-Key")
				mu.Lock()
				if res, ok := stored[key]; ok && key != "" {
					mu.Unlock()
					io.WriteString(w, res) // a replay: not applied again
					return
				}
				applied[call]++
				res := "charged " + call
				if key != "" {
					stored[key] = res
				}
				first := !lost[call]
				lost[call] = true
				mu.Unlock()
				if first {
					faultReset(t, w) // the effect is applied; the response is lost
					return
				}
				io.WriteString(w, res)
			})
			tr := New(faultBase(t), append([]Option{WithClock(newClock()), WithBackoff(noJitter)}, tc.opts...)...)
			const calls = 10
			for i := range calls {
				call := fmt.Sprintf("order-%d", i)
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, srv.URL, []byte(call)))
				require.NoError(t, err, call)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode, call)
				assert.Equal(t, "charged "+call, string(b), call)
			}
			mu.Lock()
			for i := range calls {
				call := fmt.Sprintf("order-%d", i)
				assert.Equal(t, tc.wantApplied, applied[call], "%s: times applied", call)
			}
			mu.Unlock()
			tr.CloseIdleConnections()
			srv.waitNoConns(t)
		})
	}
}

// openAITooLarge is OpenAI's 429 for a call that asks for more than the
// whole token limit.
const openAITooLarge = `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 40000. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`

// TestTooLargeThroughTheTransport: OpenAI's "Request too large" 429 is
// handed back at once, whole, even with a Budget (R19, R23: it can never
// succeed, so it is not "busy"); a rate limit reached is retried.
func TestTooLargeThroughTheTransport(t *testing.T) {
	ok := retryhttptest.Reply{Body: "ok"}
	for _, tc := range []struct {
		name      string
		first     retryhttptest.Reply
		budget    bool
		wantWaits []time.Duration
		wantBody  string
	}{
		{"too large: handed back at once", jsonReply(429, openAITooLarge), false, nil, openAITooLarge},
		{"too large with a Budget: handed back, not busy", jsonReply(429, openAITooLarge), true, nil, openAITooLarge},
		{"too large with a Retry-After: handed back all the same", jsonReply(429, openAITooLarge, "Retry-After", "1"), true, nil, openAITooLarge},
		{"rate limit reached: retried when asked", jsonReply(429, openAIRate, "Retry-After", "1"), true, []time.Duration{time.Second}, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk, script, tr := scripted(replies{tc.first, ok})
			ctx := context.Background()
			if tc.budget {
				ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
			}
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, tokensURL, []byte(`{"max_tokens":40000}`)))
			require.NoError(t, err, "handed back, not an error")
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.wantBody, string(body), "every byte of the body")
			assertWaits(t, tc.wantWaits, clk.Waits())
			assert.Equal(t, len(tc.wantWaits)+1, script.Len(), "tries")
		})
	}
}
