package retryhttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Most tests script the base with our own kit (retryhttptest): a Script of
// replies on a kit Clock, and a direct tr.RoundTrip(req), with no goroutine;
// they assert clk.Waits() and script.Requests(). The helpers below cover what
// the kit leaves to the test.

// replies is a Script's list of replies, in a table.
type replies = []retryhttptest.Reply

// reply is the kit's Status with the status text as its body, so that a test
// can tell a response came back unread: reply(429, "Retry-After", "2").
func reply(code int, headerKV ...string) retryhttptest.Reply {
	r := retryhttptest.Status(code, headerKV...)
	r.Body = http.StatusText(code)
	return r
}

// scripted returns a Transport over a Script of rs, both on a fresh kit
// Clock, with noJitter's exact waits unless opts say otherwise.
func scripted(rs replies, opts ...Option) (*retryhttptest.Clock, *retryhttptest.Script, *Transport) {
	clk := newClock()
	script := retryhttptest.NewScript(rs...).WithClock(clk)
	return clk, script, New(script, append([]Option{WithClock(clk), WithBackoff(noJitter)}, opts...)...)
}

// spy is a base that hands every try to a Script and keeps what the kit's
// Request does not hold: the *http.Request itself (the caller's own or a
// clone, its context, its ContentLength). With edit set, it changes the
// response of a try (counted from 1) before the transport sees it, to give it
// a body no Reply can have: tracked, endless or stalled.
type spy struct {
	script *retryhttptest.Script
	edit   func(try int, resp *http.Response)

	mu   sync.Mutex
	reqs []*http.Request
}

func (s *spy) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	try := len(s.reqs)
	s.mu.Unlock()
	resp, err := s.script.RoundTrip(r)
	if resp != nil && s.edit != nil {
		s.edit(try, resp)
	}
	return resp, err
}

// sent returns every request the spy was given, in order.
func (s *spy) sent() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

// assertWaits checks a list of waits (clk.Waits(), say), printed as
// durations, [400ms 800ms], where assert.Equal would print nanoseconds.
func assertWaits(t *testing.T, want, got []time.Duration, msgAndArgs ...any) {
	t.Helper()
	assert.Equal(t, fmt.Sprint(want), fmt.Sprint(got), msgAndArgs...)
}

// GoString methods, in tests only: testify prints two values that differ
// with %#v, so these make a failure read "retrying" and "Waited:1.2s", not
// 0x1 and 1200000000.

// GoString names o, as String does.
func (o Outcome) GoString() string { return o.String() }

// GoString names c, as String does.
func (c Class) GoString() string { return c.String() }

// GoString names w, as String does.
func (w WaitSource) GoString() string { return w.String() }

// GoString prints e's fields with %+v: durations as durations, the Reason
// by name.
func (e Error) GoString() string {
	type fields Error // no methods: no recursion, and not an error
	return fmt.Sprintf("%+v", fields(e))
}

// GoString prints a's fields with %+v, as Error's does.
func (a Attempt) GoString() string {
	type fields Attempt
	return fmt.Sprintf("%+v", fields(a))
}

// roundTripperFunc fakes a base transport for logic tests.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// epoch is where every fakeClock starts, and the "now" of the pure parsers'
// tests: a real-looking date, so that HTTP-dates read naturally in failures.
var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// fakeClock is a clock.Mock that reports each wait the transport starts, for
// drive. It stays for drive's tests (transport_test.go, timeout_test.go);
// other tests use the kit's Clock and a direct RoundTrip.
type fakeClock struct {
	*clock.Mock
	waits chan time.Duration
}

func newFakeClock() *fakeClock {
	m := clock.NewMock()
	m.Set(epoch)
	return &fakeClock{Mock: m, waits: make(chan time.Duration, 64)}
}

// Timer is the only way the transport waits between tries.
func (c *fakeClock) Timer(d time.Duration) *clock.Timer {
	t := c.Mock.Timer(d)
	c.waits <- d
	return t
}

type result struct {
	resp  *http.Response
	err   error
	waits []time.Duration // every wait the transport started, in order
}

// drive runs tr.RoundTrip(req) and advances clk through each wait it starts,
// until it returns. It fails the test if the call takes more than 10 s of
// real time: nothing here should ever wait for real.
func drive(t *testing.T, tr http.RoundTripper, clk *fakeClock, req *http.Request) result {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		done <- result{resp: resp, err: err}
	}()
	var waits []time.Duration
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case d := <-clk.waits:
			waits = append(waits, d)
			clk.Add(d)
		case r := <-done:
			r.waits = waits
			return r
		case <-deadline.C:
			t.Fatalf("RoundTrip did not return within 10 s of real time (waits so far %v)", waits)
			return result{}
		}
	}
}

// headerOf builds a Header from name, value pairs, as Header.Add does.
func headerOf(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// respond returns a response as a base would: status, headers and a body.
func respond(status int, body string, header ...string) *http.Response {
	return &http.Response{
		StatusCode:    status,
		Status:        http.StatusText(status),
		Header:        headerOf(header...),
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Proto:         "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

// logSink returns a logger and what it records.
func logSink() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// noJitter is DefaultBackoff without jitter: waits are exact.
var noJitter = Backoff{Base: 400 * time.Millisecond, Factor: 2, Max: 30 * time.Second}

func newRequest(t *testing.T, ctx context.Context, method, url string, body []byte) *http.Request {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	require.NoError(t, err)
	return req
}

// ttAttempts collects what an Observer is told.
type ttAttempts struct {
	mu  sync.Mutex
	all []Attempt
}

func (a *ttAttempts) observe(_ context.Context, at Attempt) {
	a.mu.Lock()
	a.all = append(a.all, at)
	a.mu.Unlock()
}

func (a *ttAttempts) list() []Attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Attempt(nil), a.all...)
}

// ttNoLeak fails the test if a goroutine it started is still running when
// it ends. The test must not be parallel.
func ttNoLeak(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}
