package retryhttp

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
