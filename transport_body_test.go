package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
