package retryhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 17: the bodies the transport reads for itself (R10, R19), in the
// body_*_test.go files. What the transport reads is bounded in bytes and in
// real time; it never closes a body while its own read of it goes on; a body
// that panics in Read does not take the process down; a gzip'd error body is
// read as JSON.

// The bounds, as literals: a test that names the constant cannot catch a
// change of it. R10 allows 50 ms of real time on a body that stalls; 40 ms
// leaves the rest as margin. maxDrain's 64 KiB is also pinned by its effect
// on connections in TestBodyDrainLimitKeepsConnection.
func TestBodyBounds(t *testing.T) {
	assert.Equal(t, 64<<10, maxDrain, "maxDrain: R10's 64 KiB")
	assert.Equal(t, 40*time.Millisecond, bodyTimeout, "bodyTimeout: under R10's 50 ms")
	assert.Equal(t, time.Millisecond, reuseGrace, "reuseGrace")
}

// A failed response's body is drained up to exactly 64 KiB before a retry
// (R10): an error page of 64 KiB keeps its connection for the retry, one of
// 64 KiB + 1 does not (closed unread when its length is declared, drained 64
// KiB and closed when it is not). Counted by the server's accepted
// connections, so a change of maxDrain, either way, fails a row.
func TestBodyDrainLimitKeepsConnection(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size      int
		declared  bool // Content-Length; else chunked
		json      bool // read ahead for its error body (R19) rather than drained
		wantRead  int64
		wantConns int
	}{
		{"64 KiB, declared: drained, connection kept", 64 << 10, true, false, 64 << 10, 1},
		{"64 KiB + 1, declared: closed unread", 64<<10 + 1, true, false, 0, 2},
		{"64 KiB + 1, chunked: 64 KiB drained, then closed", 64<<10 + 1, false, false, 64 << 10, 2},
		{"3 KiB, chunked: drained, connection kept", 3 << 10, false, false, 3 << 10, 1},
		{"64 KiB JSON, declared: read ahead, connection kept", 64 << 10, true, true, 64 << 10, 1},
		{"64 KiB + 1 JSON, declared: closed unread", 64<<10 + 1, true, true, 0, 2},
		{"64 KiB + 1 JSON, chunked: 64 KiB read ahead, then closed", 64<<10 + 1, false, true, 64 << 10, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			page := bytes.Repeat([]byte(" "), tc.size) // JSON whitespace: valid, and says nothing
			var n atomic.Int32
			srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) > 1 {
					io.WriteString(w, "ok")
					return
				}
				if tc.json {
					w.Header().Set("Content-Type", "application/json")
				}
				if tc.declared {
					w.Header().Set("Content-Length", strconv.Itoa(tc.size))
				}
				w.WriteHeader(http.StatusServiceUnavailable)
				w.(http.Flusher).Flush() // chunked when no length is declared
				_, _ = w.Write(page)
			})
			// The client runs in a bubble: its real-time bound on the drain
			// (bodyTimeout) cannot run out while the drain reads from the
			// network, so the rows do not depend on how busy the machine is.
			synctest.Test(t, func(t *testing.T) {
				base := &faultCounting{base: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
				tr := New(base, WithClock(newClock()), WithBackoff(noJitter))
				defer tr.CloseIdleConnections() // the bubble ends when its connections do
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
				require.NoError(t, err)
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close() // before the idle connections close
				require.NoError(t, err)
				assert.Equal(t, "ok", string(body), "the retry's answer")
				require.Len(t, base.bodies, 2, "responses")
				assert.Equal(t, tc.wantRead, base.bodies[0].n.Load(), "bytes of the failed body the transport read")
				assert.True(t, base.bodies[0].closed.Load(), "the failed body, closed")
			})
			_, accepted := srv.conns()
			assert.Equal(t, tc.wantConns, accepted, "connections the server accepted for 2 tries")
			srv.waitNoConns(t)
		})
	}
}
