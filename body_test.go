package retryhttp

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 17: the bodies the transport reads for itself (R10, R19). What the
// transport reads is bounded in bytes and in real time; it never closes a
// body while its own read of it goes on; a body that panics in Read does not
// take the process down; a gzip'd error body is read as JSON.

// gemini45 is the retryDelay of geminiPerMinute and geminiPerDay.
const gemini45 = 45*time.Second + 837906927*time.Nanosecond

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
				tr := New(base, WithClock(retryhttptest.NewClock()), WithBackoff(noJitter))
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

// bodyServer starts h on 127.0.0.1, over HTTP/1.1 or, with h2, over HTTP/2
// on TLS, and returns its URL and a client transport for it that asks for
// gzip and decompresses, as net/http's default does (DisableCompression
// false): the suite's faultBase turns that off. The server's Close and the
// transport's CloseIdleConnections are cleanups.
func bodyServer(t *testing.T, h2 bool, h http.HandlerFunc) (string, *http.Transport) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	base := &http.Transport{MaxIdleConnsPerHost: 8}
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		base.TLSClientConfig = &tls.Config{RootCAs: pool}
		base.ForceAttemptHTTP2 = true
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	t.Cleanup(base.CloseIdleConnections)
	return srv.URL, base
}

// waitReadsEnded waits, at most 5 s of real time, until no read ahead of the
// transport is left: a test's server must not close under one.
func waitReadsEnded(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return transportGoroutines() == 0 }, 5*time.Second, time.Millisecond,
		"a read ahead of the transport still runs after its server was released")
}

// responses records what a base's responses were, for a test to check that
// it tests what it means to: the protocol, and whether net/http decompressed.
type responses struct {
	base http.RoundTripper

	mu           sync.Mutex
	protos       []int
	uncompressed []bool
}

func (s *responses) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if resp != nil {
		s.mu.Lock()
		s.protos = append(s.protos, resp.ProtoMajor)
		s.uncompressed = append(s.uncompressed, resp.Uncompressed)
		s.mu.Unlock()
	}
	return resp, err
}

func (s *responses) seen() (protos []int, uncompressed []bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.protos...), append([]bool(nil), s.uncompressed...)
}

// A public-tier 429 (Retry-After 30 against a 10 s Budget) whose body stalls
// fails fast with ErrRateLimited, however net/http delivers the body: the
// transport abandons a stalled body and never waits for the caller's
// context (R8, R10). The gzip rows are issue 17's first report: net/http
// decompresses (resp.Uncompressed) through a reader whose Read holds a lock
// while it waits for the gzip header and whose Close takes that lock, so a
// transport that closed the stalled body under its read waited for the
// caller's 3 s deadline instead. Over HTTP/1.1 and HTTP/2, on the first try
// (whose read ends when the server goes) and on a retry (whose read its own
// context ends, the server still stalled).
func TestBodyStalledAbandoned(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		for _, retry := range []bool{false, true} {
			for _, tc := range []struct {
				name string
				gzip bool
				json bool
			}{
				{"gzip, stalled before the gzip header", true, false},
				{"gzip JSON, stalled before the gzip header", true, true},
				{"identity, stalled", false, false},
				{"identity JSON, stalled", false, true},
			} {
				proto, wantProto, try := "HTTP/1.1", 1, "first try"
				if h2 {
					proto, wantProto = "HTTP/2", 2
				}
				if retry {
					try = "retry"
				}
				t.Run(proto+"/"+try+"/"+tc.name, func(t *testing.T) {
					ttNoLeak(t)
					release := make(chan struct{})
					var n atomic.Int32
					url, base := bodyServer(t, h2, func(w http.ResponseWriter, r *http.Request) {
						if retry && n.Add(1) == 1 {
							w.WriteHeader(http.StatusServiceUnavailable) // no body: the retry goes at once
							return
						}
						if tc.json {
							w.Header().Set("Content-Type", "application/json")
						}
						if tc.gzip {
							w.Header().Set("Content-Encoding", "gzip")
						}
						w.Header().Set("Retry-After", "30")
						w.WriteHeader(http.StatusTooManyRequests)
						w.(http.Flusher).Flush()
						select { // stall until released: the headers, and not one byte more
						case <-release:
						case <-r.Context().Done():
						}
					})
					// Before the server closes: release it, then let the read
					// ahead see the end of its body.
					t.Cleanup(func() {
						close(release)
						waitReadsEnded(t)
					})
					seen := &responses{base: base}
					tr := New(seen, WithClock(retryhttptest.NewClock()), WithBackoff(noJitter))
					ctx, cancel := context.WithTimeout(WithBudget(context.Background(), NewBudget(PublicTierMaxWait)), 3*time.Second)
					defer cancel()

					resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, url, []byte(`{"q":1}`)))
					ctxErr := ctx.Err() // before anything else can take time
					require.Nil(t, resp)
					assert.NoError(t, ctxErr, "the caller's context when RoundTrip returned: it waited on the stalled body until the context ended")
					assert.ErrorIs(t, err, ErrRateLimited)
					assert.NotErrorIs(t, err, context.DeadlineExceeded)
					var e *Error
					require.ErrorAs(t, err, &e)
					want := Error{Tries: 1, Status: 429, RetryAfter: 30 * time.Second, Reason: OutOfTime, Err: ErrRateLimited}
					wantProtos, wantUncompressed := []int{wantProto}, []bool{tc.gzip}
					if retry {
						want.Tries, want.Waited = 2, 400*time.Millisecond
						wantProtos, wantUncompressed = []int{wantProto, wantProto}, []bool{false, tc.gzip}
						// The server still stalls: the retry's own context,
						// ended when its body was abandoned, ended the read.
						waitReadsEnded(t)
					}
					assert.Equal(t, want, *e)
					protos, uncompressed := seen.seen()
					assert.Equal(t, wantProtos, protos, "the protocol of the responses")
					assert.Equal(t, wantUncompressed, uncompressed, "net/http decompressing a body for the caller")
				})
			}
		}
	}
}

func gzipOf(t *testing.T, parts ...[]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	require.NoError(t, err)
	for _, p := range parts {
		_, err = zw.Write(p)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return b.Bytes()
}

func zlibOf(t *testing.T, p []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	_, err := zw.Write(p)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// bomb is geminiPerMinute followed by 16 MiB of JSON whitespace, in gzip:
// about 20 KiB on the wire, well under maxDrain, for 16 MiB decompressed.
// Made once: deflate is slow under the race detector.
var bomb = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	must(err)
	_, err = zw.Write([]byte(geminiPerMinute))
	must(err)
	spaces := bytes.Repeat([]byte(" "), 1<<20)
	for range 16 {
		_, err = zw.Write(spaces)
		must(err)
	}
	must(zw.Close())
	return b.Bytes()
})

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// A caller that sets Accept-Encoding: gzip itself gets the body as the
// server encoded it (net/http decompresses only what it asked for), so a
// Gemini 429 comes gzip'd. The transport reads its retryDelay all the same
// (R19), from at most 64 KiB decompressed, and the caller still gets every
// byte as the server sent it. Encodings other than gzip are not parsed.
func TestBodyGzipErrorBody(t *testing.T) {
	gz := gzipOf(t, []byte(geminiPerMinute))
	for _, tc := range []struct {
		name       string
		encoding   string
		body       []byte
		budget     bool
		maxRetries int
		wantWaits  []time.Duration
		wantStatus int // what the caller gets; 0: an *Error
		wantErr    Error
	}{
		{name: "gzip: the body's retryDelay is the wait", encoding: "gzip", body: gz, maxRetries: 2,
			wantWaits: []time.Duration{gemini45}, wantStatus: 200},
		{name: "x-gzip, any case: gzip", encoding: "X-GZip", body: gz, maxRetries: 2,
			wantWaits: []time.Duration{gemini45}, wantStatus: 200},
		{name: "gzip bomb: the first 64 KiB are enough", encoding: "gzip", body: bomb(), maxRetries: 2,
			wantWaits: []time.Duration{gemini45}, wantStatus: 200},
		{name: "gzip, public tier: fails fast with the body's ask", encoding: "gzip", body: gz, budget: true, maxRetries: 2,
			wantErr: Error{Tries: 1, Status: 429, RetryAfter: gemini45, Reason: OutOfTime, Err: ErrRateLimited}},
		{name: "gzip, per-day quota: handed back as sent, even on the public tier", encoding: "gzip", body: gzipOf(t, []byte(geminiPerDay)), budget: true, maxRetries: 2,
			wantStatus: 429},
		{name: "gzip, no retries: handed back as sent", encoding: "gzip", body: gz, maxRetries: 0,
			wantStatus: 429},
		{name: "deflate: not parsed, the backoff", encoding: "deflate", body: zlibOf(t, []byte(geminiPerMinute)), maxRetries: 2,
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200},
		{name: "br: not parsed, not even gzip inside", encoding: "br", body: gz, maxRetries: 2,
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200},
		{name: "gzip, br: not parsed", encoding: "gzip, br", body: gz, maxRetries: 2,
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200},
		{name: "identity: parsed as it is", encoding: "identity", body: []byte(geminiPerMinute), maxRetries: 2,
			wantWaits: []time.Duration{gemini45}, wantStatus: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			require.LessOrEqual(t, len(tc.body), 64<<10, "the body must be read ahead")
			var n atomic.Int32
			srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) > 1 {
					io.WriteString(w, "ok")
					return
				}
				w.Header().Set("Content-Type", "application/json; charset=UTF-8")
				w.Header().Set("Content-Encoding", tc.encoding)
				w.Header().Set("Content-Length", strconv.Itoa(len(tc.body)))
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write(tc.body)
			})
			// The client runs in a bubble: the real-time bound on the read
			// ahead (bodyTimeout) cannot run out while it reads from the
			// network, so the rows do not depend on how busy the machine is.
			synctest.Test(t, func(t *testing.T) {
				// Compression on: the caller's Accept-Encoding turns it off.
				base := &http.Transport{}
				defer base.CloseIdleConnections() // the bubble ends when its connections do
				clk := retryhttptest.NewClock()
				tr := New(base, WithClock(clk), WithBackoff(noJitter), WithMaxRetries(tc.maxRetries))
				ctx := context.Background()
				if tc.budget {
					ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
				}
				req := newRequest(t, ctx, http.MethodPost, srv.URL, []byte(`{"contents":[]}`))
				req.Header.Set("Accept-Encoding", "gzip")

				resp, err := tr.RoundTrip(req)
				if resp != nil {
					defer resp.Body.Close() // before the idle connections close, whatever fails
				}
				assertWaits(t, tc.wantWaits, clk.Waits())
				if tc.wantStatus == 0 {
					require.Nil(t, resp)
					var e *Error
					require.ErrorAs(t, err, &e)
					assert.Equal(t, tc.wantErr, *e)
					return
				}
				require.NoError(t, err)
				got, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.Equal(t, tc.wantStatus, resp.StatusCode)
				if tc.wantStatus == 200 {
					assert.Equal(t, "ok", string(got))
					return
				}
				assert.False(t, resp.Uncompressed, "net/http left the body as sent")
				assert.Equal(t, tc.encoding, resp.Header.Get("Content-Encoding"))
				assert.True(t, bytes.Equal(tc.body, got), "the body handed back: every byte as the server sent it (R19): %d bytes, want %d", len(got), len(tc.body))
			})
		})
	}
}

// A gzip bomb costs what a plain body does: errorBody decompresses at most
// 64 KiB, and allocates accordingly, whatever the body would expand to.
func TestErrorBodyGzipBomb(t *testing.T) {
	raw := bomb()
	h := http.Header{"Content-Encoding": {"gzip"}}
	errorBody(h, raw) // warm up what is allocated once

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := errorBody(h, raw)
	runtime.ReadMemStats(&after)

	assert.Equal(t, 64<<10, len(got), "bytes decompressed: 64 KiB, no more")
	assert.Equal(t, BodyHint{RetryAfter: gemini45}, ParseErrorBody(got))
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated for a 16 MiB bomb")
}

// probeBody is a response body that says whether the transport used it as
// io.ReadCloser allows: its first Read gives prefix, then Read panics (with
// a value that must not leak) or stalls until release is closed or its
// request's context ends (as a net/http body's does). A Close that comes
// while a Read is in progress is recorded: io.ReadCloser does not promise
// that is safe, and net/http's gzip reader blocks on it.
type probeBody struct {
	prefix  string
	panics  bool
	ctx     context.Context
	release <-chan struct{}

	off     int // of prefix, given; only Read touches it
	reading atomic.Int32
	raced   atomic.Bool
	closes  atomic.Int32
	closed  chan struct{}
}

func newProbeBody(ctx context.Context, release <-chan struct{}, prefix string, panics bool) *probeBody {
	return &probeBody{prefix: prefix, panics: panics, ctx: ctx, release: release, closed: make(chan struct{})}
}

func (b *probeBody) Read(p []byte) (int, error) {
	b.reading.Add(1)
	defer b.reading.Add(-1)
	if b.off < len(b.prefix) {
		n := copy(p, b.prefix[b.off:])
		b.off += n
		return n, nil
	}
	if b.panics {
		panic("sk-live-0123456789: a secret in the panic's value")
	}
	select {
	case <-b.release:
		return 0, io.EOF
	case <-b.ctx.Done():
		return 0, context.Cause(b.ctx)
	}
}

func (b *probeBody) Close() error {
	if b.reading.Load() > 0 {
		b.raced.Store(true)
	}
	if b.closes.Add(1) == 1 {
		close(b.closed)
	}
	return nil
}

// waitClosed waits, at most 5 s of real time, for b to be closed.
func (b *probeBody) waitClosed(t *testing.T, msg string) {
	t.Helper()
	select {
	case <-b.closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the body was not closed 5 s later", msg)
	}
}

// probeCase is a call whose try number probe answers status with a
// probeBody; the tries before it get an empty 503, those after it a 200.
type probeCase struct {
	name       string
	probe      int // the try whose body is the probe: 1, on the caller's context; 2, a retry's own
	status     int
	json       bool
	retryAfter string
	budget     bool
	maxRetries int
	tryTimeout bool // WithTryTimeout: the first try too has a context of its own
	handedBack bool // the probe's response comes back to the caller
	wantLimit  bool // the call fails with ErrRateLimited
}

// probeBase answers the tries of c, with body as the probe, and records each
// try's context.
func probeBase(c probeCase, body func(ctx context.Context) *probeBody) (http.RoundTripper, func() []context.Context) {
	var (
		mu   sync.Mutex
		ctxs []context.Context
	)
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		ctxs = append(ctxs, r.Context())
		try := len(ctxs)
		mu.Unlock()
		switch {
		case try < c.probe:
			return respond(http.StatusServiceUnavailable, ""), nil
		case try > c.probe:
			return respond(http.StatusOK, "ok"), nil
		}
		var kv []string
		if c.retryAfter != "" {
			kv = append(kv, "Retry-After", c.retryAfter)
		}
		if c.json {
			kv = append(kv, "Content-Type", "application/json")
		}
		resp := respond(c.status, "", kv...)
		resp.Body, resp.ContentLength = body(r.Context()), -1
		return resp, nil
	})
	return base, func() []context.Context {
		mu.Lock()
		defer mu.Unlock()
		return append([]context.Context(nil), ctxs...)
	}
}

// runProbe makes the call of c and checks how it ended; it returns the
// response handed back, if any, for the caller's part.
func runProbe(t *testing.T, c probeCase, base http.RoundTripper) *http.Response {
	t.Helper()
	opts := []Option{WithClock(retryhttptest.NewClock()), WithBackoff(noJitter), WithMaxRetries(c.maxRetries)}
	if c.tryTimeout {
		opts = append(opts, WithTryTimeout(2*time.Second)) // never reached: the kit's Clock moves only by the waits
	}
	tr := New(base, opts...)
	ctx := context.Background()
	if c.budget {
		ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
	}
	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, "https://api.example.com/v1/chat", []byte(`{"q":1}`)))
	switch {
	case c.wantLimit:
		require.Nil(t, resp)
		assert.ErrorIs(t, err, ErrRateLimited)
		return nil
	case c.handedBack:
		require.NoError(t, err)
		require.Equal(t, c.status, resp.StatusCode, "the probe's response, handed back")
		return resp
	}
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the try after the probe's")
	resp.Body.Close()
	return nil
}

var probeCases = []probeCase{
	{name: "first try: a 503 drained before the retry", probe: 1, status: 503, maxRetries: 2},
	{name: "first try: a JSON 429 read ahead, then retried", probe: 1, status: 429, json: true, maxRetries: 2},
	{name: "first try: a public-tier 429 fails fast", probe: 1, status: 429, retryAfter: "30", budget: true, maxRetries: 2, wantLimit: true},
	{name: "first try: a JSON 429 handed back, closed by the caller", probe: 1, status: 429, json: true, maxRetries: 0, handedBack: true},
	{name: "first try, try timeout: a 503 drained before the retry", probe: 1, status: 503, maxRetries: 2, tryTimeout: true},
	{name: "first try, try timeout: a JSON 429 handed back, closed by the caller", probe: 1, status: 429, json: true, maxRetries: 0, tryTimeout: true, handedBack: true},
	{name: "retry: a 503 drained before the next", probe: 2, status: 503, maxRetries: 2},
	{name: "retry: a JSON 429 read ahead, then retried", probe: 2, status: 429, json: true, maxRetries: 2},
	{name: "retry: a public-tier 429 fails fast", probe: 2, status: 429, retryAfter: "30", budget: true, maxRetries: 2, wantLimit: true},
	{name: "retry: a JSON 429 handed back, closed by the caller", probe: 2, status: 429, json: true, maxRetries: 1, handedBack: true},
}

// The transport never closes a body while its own read of it goes on
// (issue 17). A read it gives up on is ended by the try's own context,
// which every retry has (and, with WithTryTimeout, the first try too), and
// the read ahead then closes the body; on the first try, sent with the
// caller's context, the read ahead closes the body when its Read returns
// (here, when the test releases it), and RoundTrip does not wait for that.
func TestBodyNeverClosedDuringRead(t *testing.T) {
	for _, c := range probeCases {
		t.Run(c.name, func(t *testing.T) {
			ttNoLeak(t)
			release := make(chan struct{})
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(release) }) }) // a failing test leaves nothing stalled
			var body *probeBody
			base, ctxs := probeBase(c, func(ctx context.Context) *probeBody {
				body = newProbeBody(ctx, release, `{"err":`, false)
				return body
			})

			resp := runProbe(t, c, base)
			if resp != nil {
				b := make([]byte, 7)
				_, err := io.ReadFull(resp.Body, b)
				require.NoError(t, err, "the bytes the server sent before it stalled")
				assert.Equal(t, `{"err":`, string(b))
				assert.NoError(t, resp.Body.Close())
			}
			ownContext := c.probe > 1 || c.tryTimeout
			if !ownContext {
				select {
				case <-body.closed:
					t.Error("the first try's body was closed while its read went on (or before it ended)")
				default:
				}
				once.Do(func() { close(release) }) // the server sends the rest: the read ends
			}
			body.waitClosed(t, "the probe")
			assert.False(t, body.raced.Load(), "the body was closed during a Read")
			assert.EqualValues(t, 1, body.closes.Load(), "times the body was closed")
			if ownContext {
				ctx := ctxs()[c.probe-1]
				assert.ErrorIs(t, context.Cause(ctx), context.Canceled, "the try's own context: ended when its body was given up")
			}
			waitReadsEnded(t)
		})
	}
}

// A body whose Read panics does not take the process down from the read
// ahead's goroutine: the read ends with an error that does not hold the
// panic's value, the body is closed, and a body handed back gives the
// caller the bytes that came, then that error.
func TestBodyReadPanics(t *testing.T) {
	for _, c := range probeCases {
		if c.retryAfter != "" {
			continue // the same paths as the other 429s
		}
		t.Run(c.name, func(t *testing.T) {
			ttNoLeak(t)
			var body *probeBody
			base, _ := probeBase(c, func(ctx context.Context) *probeBody {
				body = newProbeBody(ctx, nil, `{"err":`, true)
				return body
			})

			resp := runProbe(t, c, base)
			if resp != nil {
				got, err := io.ReadAll(resp.Body)
				assert.Equal(t, `{"err":`, string(got), "the bytes that came before the panic")
				assert.ErrorIs(t, err, errBodyReadPanicked)
				assert.EqualError(t, err, "retryhttp: response body Read panicked")
				assert.NotContains(t, err.Error(), "sk-live", "the panic's value")
				assert.NoError(t, resp.Body.Close())
			}
			body.waitClosed(t, "the panicking body")
			waitReadsEnded(t)
			assert.False(t, body.raced.Load(), "the body was closed during a Read")
			assert.EqualValues(t, 1, body.closes.Load(), "times the body was closed")
		})
	}
}

// errorBody's rules, without a connection.
func TestErrorBody(t *testing.T) {
	gz := gzipOf(t, []byte(geminiPerMinute))
	// A gzip stream cut short after the JSON, flushed: what decompresses.
	var cut bytes.Buffer
	zw := gzip.NewWriter(&cut)
	_, err := zw.Write([]byte(geminiPerMinute))
	require.NoError(t, err)
	require.NoError(t, zw.Flush())
	flushed := cut.Len()
	_, err = zw.Write(bytes.Repeat([]byte("x"), 4<<10))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	for _, tc := range []struct {
		name   string
		header http.Header
		raw    []byte
		want   []byte
	}{
		{"no Content-Encoding", http.Header{}, []byte(geminiPerMinute), []byte(geminiPerMinute)},
		{"identity", headerOf("Content-Encoding", " identity "), []byte("{}"), []byte("{}")},
		{"gzip", headerOf("Content-Encoding", "gzip"), gz, []byte(geminiPerMinute)},
		{"gzip, spaced and capitalized", headerOf("Content-Encoding", " GZIP "), gz, []byte(geminiPerMinute)},
		{"x-gzip", headerOf("Content-Encoding", "x-gzip"), gz, []byte(geminiPerMinute)},
		{"gzip cut short: what decompresses", headerOf("Content-Encoding", "gzip"), cut.Bytes()[:flushed], []byte(geminiPerMinute)},
		{"gzip, but not gzip", headerOf("Content-Encoding", "gzip"), []byte(geminiPerMinute), nil},
		{"gzip, empty", headerOf("Content-Encoding", "gzip"), nil, nil},
		{"deflate", headerOf("Content-Encoding", "deflate"), zlibOf(t, []byte(geminiPerMinute)), nil},
		{"two codings", headerOf("Content-Encoding", "gzip", "Content-Encoding", "gzip"), gz, nil},
		{"a list of codings", headerOf("Content-Encoding", "gzip, identity"), gz, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := errorBody(tc.header, tc.raw)
			if tc.want == nil {
				assert.Zero(t, len(got), "bytes to parse: none")
				return
			}
			assert.Equal(t, string(tc.want), string(got))
		})
	}
}
