package retryhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

// bodyServer starts h on 127.0.0.1, over HTTP/1.1 or, with h2, over HTTP/2
// on TLS, and returns its URL and a client transport for it that asks for
// gzip and decompresses, as net/http's default does (DisableCompression
// false): the suite's faultBase turns that off. The server's Close and the
// transport's CloseIdleConnections are cleanups.
func bodyServer(t *testing.T, h2 bool, h http.HandlerFunc) (string, *http.Transport) {
	t.Helper()
	return startLoopback(t, httptest.NewUnstartedServer(h), h2)
}

// startLoopback starts srv as bodyServer does, for a test that sets more of
// it first (its ConnState, say).
func startLoopback(t *testing.T, srv *httptest.Server, h2 bool) (string, *http.Transport) {
	t.Helper()
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
// and on a retry (whose read its own context ends, the server still
// stalled). The first try's base here is a wrapper with no CancelRequest, so
// a gzip body stalled in its header is left to the server (RULES.md R10;
// TestBodyFirstTryEnded checks what is ended, and when).
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
					tr := New(seen, WithClock(retryhttptest.NewClock()), WithBackoff(noJitter)) // at the real time: a real deadline
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
