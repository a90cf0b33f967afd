package retryhttp

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFaultResetMidHeaders(t *testing.T) {
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

func TestFaultConnectionRefused(t *testing.T) {
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
func TestFaultHangBeforeHeaders(t *testing.T) {
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
func TestFaultIdempotentRetryAppliedOnce(t *testing.T) {
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
