package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A failed response's body is drained, at most 64 KiB, and closed before the
// retry (R10): an error page lets its connection be reused, and an endless
// body cannot stall the loop.
func TestFaultDrainBeforeRetry(t *testing.T) {
	chunk := strings.Repeat("x", 16<<10)
	for _, tc := range []struct {
		name      string
		length    int // declared Content-Length; -1: chunked, endless
		wantRead  int64
		wantConns int
	}{
		{"small error page: drained, connection reused", 1 << 10, 1 << 10, 1},
		{"exactly 64 KiB: drained, connection reused", maxDrain, maxDrain, 1},
		{"one byte over 64 KiB: closed unread", maxDrain + 1, 0, 3},
		{"endless body: drain stops at 64 KiB", -1, maxDrain, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.length >= 0 {
					w.Header().Set("Content-Length", strconv.Itoa(tc.length))
				}
				w.WriteHeader(http.StatusServiceUnavailable)
				for sent := 0; tc.length < 0 || sent < tc.length; {
					if sent >= 64<<20 { // bounded: 64 MiB at most
						return
					}
					c := chunk
					if tc.length >= 0 {
						c = chunk[:min(len(chunk), tc.length-sent)]
					}
					if _, err := io.WriteString(w, c); err != nil {
						return // the client closed the connection
					}
					w.(http.Flusher).Flush()
					sent += len(c)
				}
			})
			base := &faultCounting{base: faultBase(t)}
			tr := New(base, WithClock(newClock()), WithBackoff(noJitter))
			start := time.Now()
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
			assert.Less(t, time.Since(start), 5*time.Second, "the call's real time")
			require.NoError(t, err, "the last 503")
			// Closed on every path: a failure below must not leave an endless
			// body open, or the server's Close would wait on it forever.
			defer resp.Body.Close()
			require.Len(t, base.bodies, 3, "responses")
			for i, b := range base.bodies[:2] {
				assert.Equal(t, tc.wantRead, b.n.Load(), "try %d: bytes of the body the transport read", i+1)
				assert.True(t, b.closed.Load(), "try %d: the body, closed before the retry", i+1)
			}
			last := base.bodies[2]
			assert.Zero(t, last.n.Load(), "the last response: handed back unread")
			assert.False(t, last.closed.Load(), "the last response: handed back open")
			_, err = io.ReadFull(resp.Body, make([]byte, 1024))
			assert.NoError(t, err, "reading the returned body")
			resp.Body.Close()
			_, accepted := srv.conns()
			assert.Equal(t, tc.wantConns, accepted, "connections the server accepted for 3 tries")
			tr.CloseIdleConnections()
			srv.waitNoConns(t)
		})
	}
}

// A slow stream is read to its end, long after the per-try timeout, and is
// never retried.
func TestFaultSlowStream(t *testing.T) {
	ttNoLeak(t)
	const d = time.Second
	chunks := []string{"data: a\n\n", "data: b\n\n", "data: c\n\n", "data: [DONE]\n\n"}
	release := make(chan struct{}, len(chunks)) // buffered: a test that fails never blocks on it
	var n atomic.Int32
	srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for _, c := range chunks {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Second): // bounded
				return
			}
			io.WriteString(w, c)
			w.(http.Flusher).Flush()
		}
	})
	clk := newClock()
	tr := New(faultBase(t), WithClock(clk), WithTryTimeout(d))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, srv.URL, []byte(`{"stream":true}`)))
	require.NoError(t, err)
	defer resp.Body.Close()
	start := clk.Now()
	var got strings.Builder
	for i, c := range chunks {
		clk.Add(3 * d)
		release <- struct{}{}
		buf := make([]byte, len(c))
		_, err := io.ReadFull(resp.Body, buf)
		require.NoError(t, err, "chunk %d, %v after the headers: the stream stays readable", i, clk.Since(start))
		got.Write(buf)
	}
	rest, err := io.ReadAll(resp.Body)
	assert.NoError(t, err, "the end of the stream")
	assert.Empty(t, rest, "the end of the stream")
	assert.Equal(t, strings.Join(chunks, ""), got.String())
	assert.EqualValues(t, 1, n.Load(), "requests: a stream is never retried")
	resp.Body.Close()
	tr.CloseIdleConnections()
	srv.waitNoConns(t)
}

// goneWithin waits until the transport has no goroutine left and returns how
// long that took, failing after a second.
func goneWithin(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	for transportGoroutines() > 0 {
		if time.Since(start) > time.Second {
			t.Errorf("a goroutine of the transport still runs 1 s after RoundTrip returned")
			break
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// stalledCase is a row of TestFaultStalledBody: the server's first answer
// has status, Retry-After retryAfter and, if json, a JSON Content-Type, and
// a body that stalls; the second is a 200 "ok".
type stalledCase struct {
	name       string
	status     int
	retryAfter string
	json       bool
	budget     bool
	deadline   time.Duration // real; 0: none
	maxRetries int
	wantStatus int  // of what the caller gets; 0: an error
	wantLimit  bool // the error is ErrRateLimited
	wantTries  int
}

// stalledBodyCases are the rows of TestFaultStalledBody.
var stalledBodyCases = []stalledCase{
	{name: "503, retried: the stalled body is closed", status: 503, maxRetries: 2, wantStatus: 200, wantTries: 2},
	{name: "JSON 429, retried: the read ahead is closed", status: 429, json: true, maxRetries: 2, wantStatus: 200, wantTries: 2},
	{name: "3 s deadline, 400 ms backoff: the retry goes", status: 503, deadline: 3 * time.Second, maxRetries: 2, wantStatus: 200, wantTries: 2},
	{name: "public-tier 429 is retried when the wait fits", status: 429, budget: true, maxRetries: 2, wantStatus: 200, wantTries: 2},
	{name: "public-tier 429, Retry-After 30: fails fast", status: 429, retryAfter: "30", budget: true, maxRetries: 2, wantLimit: true, wantTries: 1},
	{name: "public-tier JSON 429, Retry-After 30: fails fast", status: 429, retryAfter: "30", json: true, budget: true, maxRetries: 2, wantLimit: true, wantTries: 1},
	{name: "no retries: the 503 is handed back unread", status: 503, maxRetries: 0, wantStatus: 503, wantTries: 1},
	{name: "no retries: the JSON 429 is handed back whole", status: 429, json: true, maxRetries: 0, wantStatus: 429, wantTries: 1},
}

// A failed response whose body stalls never holds the call (R10): the
// transport reads it for itself at most bodyTimeout where no wait follows,
// overlaps the read with the wait where one does, and abandons a stalled
// body without waiting on its Close (issue 17), ending its read (issue 21:
// TestBodyFirstTryEnded times that). The server sends 7 of the 1000 bytes
// it declares, then nothing, as in the report that found the hang.
func TestFaultStalledBody(t *testing.T) {
	for _, tc := range stalledBodyCases {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			var tries atomic.Int32
			release := make(chan struct{})
			var once sync.Once
			stop := func() { once.Do(func() { close(release) }) }
			srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tries.Add(1) > 1 {
					io.WriteString(w, "ok")
					return
				}
				if tc.json {
					w.Header().Set("Content-Type", "application/json")
				}
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.Header().Set("Content-Length", "1000")
				w.WriteHeader(tc.status)
				io.WriteString(w, `{"err":`)
				w.(http.Flusher).Flush()
				select { // stall until the client goes, or the test is done with the stall
				case <-r.Context().Done():
				case <-release:
				}
			})
			t.Cleanup(stop) // before the server's Close: a test that fails leaves no handler stalled
			base := faultBase(t)
			clk := retryhttptest.NewClock() // at the real time: real deadlines compare with its now
			tr := New(base, WithClock(clk), WithBackoff(noJitter), WithMaxRetries(tc.maxRetries))
			ctx := context.Background()
			if tc.budget {
				ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
			}
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			start := time.Now()
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, srv.URL, []byte(`{"q":1}`)))
			took := time.Since(start)
			if resp != nil && resp.StatusCode != 200 {
				// Handed back whole: the 7 bytes sent at once, then the
				// stall is the caller's, as without the transport.
				b := make([]byte, 7)
				_, err := io.ReadFull(resp.Body, b)
				require.NoError(t, err)
				assert.Equal(t, `{"err":`, string(b))
				resp.Body.Close()
			}
			stop() // the server goes, if the transport had not ended its read already
			gone := goneWithin(t)
			t.Logf("RoundTrip returned after %v of real time; the transport's goroutines were gone %v after the server went", took, gone)
			assert.Less(t, took, time.Second, "RoundTrip's real time: it waited on a stalled body")
			assert.Equal(t, tc.wantTries, int(tries.Load()), "tries")
			if tc.wantStatus == 0 {
				require.Error(t, err)
				assert.Equal(t, tc.wantLimit, errors.Is(err, ErrRateLimited), "ErrRateLimited in %v", err)
				return
			}
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.wantStatus, resp.StatusCode)
		})
	}
}
