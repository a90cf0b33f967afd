package retryhttp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Tests of WithTryTimeout (R13): a try is bounded until its response
// headers, on the injected clock; a returned body is never cut by it; no
// timer or goroutine outlives the try.

// ttClock is a fakeClock that also keeps every AfterFunc timer the transport
// starts (the per-try timers), so a test can check none outlives its try.
type ttClock struct {
	*fakeClock
	mu     sync.Mutex
	timers []*clock.Timer
}

func newTTClock() *ttClock { return &ttClock{fakeClock: newFakeClock()} }

func (c *ttClock) AfterFunc(d time.Duration, f func()) *clock.Timer {
	tm := c.fakeClock.AfterFunc(d, f)
	c.mu.Lock()
	c.timers = append(c.timers, tm)
	c.mu.Unlock()
	return tm
}

// started returns how many per-try timers the transport started.
func (c *ttClock) started() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// armed returns how many per-try timers are still armed, neither stopped nor
// fired. Stop reports exactly that on a clock.Mock timer (it disarms them, so
// call it once, at the end).
func (c *ttClock) armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tm := range c.timers {
		if tm.Stop() {
			n++
		}
	}
	return n
}

// ttDrive is driveWith for try-timeout tests: besides moving the clock
// through each backoff wait, it moves it on by d each time a try reports on
// hung that it is blocked waiting for headers, by way of fakeClock.spend so
// that the one driver goroutine does all the advancing.
func ttDrive(t *testing.T, tr http.RoundTripper, clk *ttClock, req *http.Request, hung <-chan struct{}, d time.Duration) result {
	t.Helper()
	stop := make(chan struct{})
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		for {
			select {
			case <-hung:
				done := make(chan struct{})
				select {
				case clk.spend <- spendReq{d: d, done: done}:
					<-done
				case <-stop:
					return
				}
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); <-pumped }()
	return driveWith(t, tr, clk.fakeClock, req, nil)
}

// ttBase is a fake base whose first hangs tries block until their context
// ends, as http.Transport does while it waits for headers, and whose later
// tries answer 200 "ok". It records the context of every try.
type ttBase struct {
	hangs int
	hung  chan struct{}

	mu   sync.Mutex
	ctxs []context.Context
}

func newTTBase(hangs int) *ttBase {
	return &ttBase{hangs: hangs, hung: make(chan struct{}, 16)}
}

func (b *ttBase) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.ctxs = append(b.ctxs, r.Context())
	n := len(b.ctxs)
	b.mu.Unlock()
	if n <= b.hangs {
		b.hung <- struct{}{}
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return respond(http.StatusOK, "ok"), nil
}

func (b *ttBase) tryCtx(i int) context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ctxs[i]
}

func (b *ttBase) tries() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.ctxs)
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

// isTryTimeout reports whether err is a per-try timeout: a net.Error with
// Timeout() true that does not claim the caller's deadline passed.
func isTryTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.DeadlineExceeded)
}

func TestTryTimeoutCutsHangingTry(t *testing.T) {
	const d = 2 * time.Second
	for _, tc := range []struct {
		name      string
		hangs     int
		wantTries int
		wantOK    bool
	}{
		{"first try hangs, second answers", 1, 2, true},
		{"two tries hang, third answers", 2, 3, true},
		{"every try hangs", 3, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			clk := newTTClock()
			base := newTTBase(tc.hangs)
			var seen ttAttempts
			tr := New(base, WithClock(clk), WithBackoff(noJitter), WithTryTimeout(d), WithObserver(seen.observe))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := newRequest(t, ctx, http.MethodGet, "https://api.example.com/v1/models", nil)

			r := ttDrive(t, tr, clk, req, base.hung, d)

			if got := base.tries(); got != tc.wantTries {
				t.Errorf("tries = %d, want %d", got, tc.wantTries)
			}
			attempts := seen.list()
			if len(attempts) != tc.wantTries {
				t.Fatalf("observer saw %d attempts, want %d", len(attempts), tc.wantTries)
			}
			for i := 0; i < tc.hangs; i++ {
				a := attempts[i]
				if !isTryTimeout(a.Err) {
					t.Errorf("try %d: Err = %v, want a per-try timeout (net.Error, Timeout() true, not DeadlineExceeded)", a.Try, a.Err)
				}
				if a.Class != Transient {
					t.Errorf("try %d: Class = %v, want transient", a.Try, a.Class)
				}
				if a.Elapsed != d {
					t.Errorf("try %d: Elapsed = %v, want %v on the injected clock", a.Try, a.Elapsed, d)
				}
				if err := base.tryCtx(i).Err(); err == nil {
					t.Errorf("try %d: its context is still live after it timed out", a.Try)
				}
			}
			if err := ctx.Err(); err != nil {
				t.Errorf("caller's context: Err() = %v, want nil: only a try's context may be canceled", err)
			}
			for i := 0; i < base.tries(); i++ {
				if base.tryCtx(i) == ctx {
					t.Errorf("try %d ran under the caller's own context, want a context of its own", i+1)
				}
			}
			if want := []time.Duration{400 * time.Millisecond, 800 * time.Millisecond}[:tc.wantTries-1]; !equalDurations(r.waits, want) {
				t.Errorf("waits = %v, want %v (the backoff, after each cut try)", r.waits, want)
			}

			if tc.wantOK {
				if r.err != nil {
					t.Fatalf("RoundTrip error = %v, want the 200", r.err)
				}
				last := base.tryCtx(tc.wantTries - 1)
				if err := last.Err(); err != nil {
					t.Errorf("the answering try's context ended (%v) before its body was closed", err)
				}
				body, err := io.ReadAll(r.resp.Body)
				if err != nil || string(body) != "ok" {
					t.Errorf("body = %q, %v; want \"ok\", nil", body, err)
				}
				r.resp.Body.Close()
				if last.Err() == nil {
					t.Error("the answering try's context is still live after its body was closed")
				}
			} else {
				var e *Error
				if !errors.As(r.err, &e) {
					t.Fatalf("RoundTrip = %v, %v; want an *Error", r.resp, r.err)
				}
				if e.Reason != Exhausted || e.Tries != 3 || e.Status != 0 {
					t.Errorf("Error = {Reason %v, Tries %d, Status %d}, want {exhausted, 3, 0}", e.Reason, e.Tries, e.Status)
				}
				if !isTryTimeout(e.Err) {
					t.Errorf("Error.Err = %v, want the per-try timeout", e.Err)
				}
				if errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded) {
					t.Errorf("error %v matches a context error; the caller's context never ended", r.err)
				}
			}
			if got, want := clk.started(), tc.wantTries; got < want {
				t.Errorf("per-try timers started = %d, want at least %d (one per try)", got, want)
			}
			if n := clk.armed(); n != 0 {
				t.Errorf("%d per-try timers still armed after RoundTrip returned, want 0", n)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ttStream is a response body that yields the chunks sent to it and, like
// http.Transport's body, fails once the try's context ends.
type ttStream struct {
	ctx    context.Context
	chunks chan string
	buf    string
	closed bool
}

func (s *ttStream) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	if s.buf == "" {
		select {
		case c, ok := <-s.chunks:
			if !ok {
				return 0, io.EOF
			}
			s.buf = c
		case <-s.ctx.Done():
			return 0, s.ctx.Err()
		}
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

func (s *ttStream) Close() error { s.closed = true; return nil }

func TestTryTimeoutNeverCutsStream(t *testing.T) {
	ttNoLeak(t)
	const d = time.Second
	clk := newTTClock()
	var (
		tryCtx context.Context
		stream *ttStream
		tries  int
	)
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		tries++
		tryCtx = r.Context()
		stream = &ttStream{ctx: r.Context(), chunks: make(chan string, 8)}
		resp := respond(http.StatusOK, "")
		resp.Body, resp.ContentLength = stream, -1
		return resp, nil
	})
	tr := New(base, WithClock(clk), WithTryTimeout(d))
	req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte(`{"stream":true}`))

	r := ttDrive(t, tr, clk, req, nil, d)
	if r.err != nil {
		t.Fatalf("RoundTrip error = %v, want the 200", r.err)
	}
	chunks := []string{"data: one\n\n", "data: two\n\n", "data: three\n\n", "data: [DONE]\n\n"}
	var got strings.Builder
	for i, c := range chunks {
		clk.Add(3 * d) // each chunk comes long after the try timeout
		stream.chunks <- c
		buf := make([]byte, len(c))
		if _, err := io.ReadFull(r.resp.Body, buf); err != nil {
			t.Fatalf("chunk %d read after the clock passed %v: %v; want the stream to stay readable", i, clk.Now().Sub(epoch), err)
		}
		got.Write(buf)
	}
	close(stream.chunks)
	if rest, err := io.ReadAll(r.resp.Body); err != nil || len(rest) != 0 {
		t.Errorf("end of stream = %q, %v; want \"\", nil", rest, err)
	}
	if want := strings.Join(chunks, ""); got.String() != want {
		t.Errorf("stream = %q, want %q", got.String(), want)
	}
	if tries != 1 {
		t.Errorf("tries = %d, want 1: a stream is never retried (R6)", tries)
	}
	if err := tryCtx.Err(); err != nil {
		t.Errorf("try context ended (%v) before the body was closed", err)
	}
	if err := r.resp.Body.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if !stream.closed {
		t.Error("closing the returned body did not close the base's body")
	}
	if tryCtx.Err() == nil {
		t.Error("try context still live after the body was closed, want it ended")
	}
	if n := clk.armed(); n != 0 {
		t.Errorf("%d per-try timers still armed, want 0", n)
	}
}

// ttClosed is a response body that records whether it was closed.
type ttClosed struct {
	io.Reader
	mu     sync.Mutex
	closed bool
}

func (b *ttClosed) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func (b *ttClosed) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Headers that come in the same instant as the timeout lose: the try's
// context is gone, so its body is closed and the try retried (R13).
func TestTryTimeoutFiresAsHeadersArrive(t *testing.T) {
	ttNoLeak(t)
	const d = 5 * time.Second
	clk := newTTClock()
	late := &ttClosed{Reader: strings.NewReader("late")}
	var tries int
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		tries++
		if tries == 1 {
			clk.Add(d) // the headers take exactly d
			resp := respond(http.StatusOK, "")
			resp.Body = late
			return resp, nil
		}
		return respond(http.StatusOK, "second"), nil
	})
	var seen ttAttempts
	tr := New(base, WithClock(clk), WithBackoff(noJitter), WithTryTimeout(d), WithObserver(seen.observe))
	req := newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/models", nil)

	r := ttDrive(t, tr, clk, req, nil, d)
	if r.err != nil {
		t.Fatalf("RoundTrip error = %v, want the second try's 200", r.err)
	}
	defer r.resp.Body.Close()
	if body, _ := io.ReadAll(r.resp.Body); string(body) != "second" {
		t.Errorf("body = %q, want %q", body, "second")
	}
	if !late.isClosed() {
		t.Error("the late response's body was not closed")
	}
	if a := seen.list(); len(a) != 2 || !isTryTimeout(a[0].Err) || a[0].Class != Transient {
		t.Errorf("attempts = %+v, want 2 with the first a Transient per-try timeout", a)
	}
}

// ttDuplex is a 101 Switching Protocols body: readable and writable.
type ttDuplex struct {
	strings.Builder
	closed bool
}

func (d *ttDuplex) Read([]byte) (int, error) { return 0, io.EOF }
func (d *ttDuplex) Close() error             { d.closed = true; return nil }

func TestTryTimeoutKeepsUpgradedBodyWritable(t *testing.T) {
	ttNoLeak(t)
	clk := newTTClock()
	duplex := &ttDuplex{}
	var tryCtx context.Context
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		tryCtx = r.Context()
		resp := respond(http.StatusSwitchingProtocols, "")
		resp.Body = duplex
		return resp, nil
	})
	tr := New(base, WithClock(clk), WithTryTimeout(time.Second))
	req := newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/realtime", nil)
	r := ttDrive(t, tr, clk, req, nil, time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	w, ok := r.resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("101 body is a %T, want an io.ReadWriteCloser as net/http gives", r.resp.Body)
	}
	if _, err := io.WriteString(w, "hello"); err != nil || duplex.String() != "hello" {
		t.Errorf("write through the body = %v, wrote %q; want nil, %q", err, duplex.String(), "hello")
	}
	w.Close()
	if !duplex.closed || tryCtx.Err() == nil {
		t.Errorf("after Close: base body closed %v, try context err %v; want true, non-nil", duplex.closed, tryCtx.Err())
	}
}

// The caller's own cancellation during a hanging try is the caller's: it is
// returned unchanged, not as a per-try timeout, and never retried (R2, R9).
func TestTryTimeoutCallerCancelsDuringTry(t *testing.T) {
	ttNoLeak(t)
	clk := newTTClock()
	base := newTTBase(1)
	tr := New(base, WithClock(clk), WithTryTimeout(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := newRequest(t, ctx, http.MethodGet, "https://api.example.com/v1/models", nil)

	done := make(chan result, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		done <- result{resp: resp, err: err}
	}()
	select {
	case <-base.hung:
	case <-time.After(10 * time.Second):
		t.Fatal("the try never started")
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip did not return after the caller canceled")
	}
	if r.resp != nil || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("RoundTrip = %v, %v; want nil, context.Canceled", r.resp, r.err)
	}
	var e *Error
	if errors.As(r.err, &e) {
		t.Errorf("error = %#v, want the Permanent first-try error unchanged, not an *Error", r.err)
	}
	if isTryTimeout(r.err) {
		t.Errorf("error %v reads as a per-try timeout; the caller canceled", r.err)
	}
	if got := base.tries(); got != 1 {
		t.Errorf("tries = %d, want 1", got)
	}
	if n := clk.armed(); n != 0 {
		t.Errorf("%d per-try timers still armed, want 0", n)
	}
}

// Every way a try can end leaves no per-try timer armed and no goroutine
// running, and leaves the caller's context alone.
func TestTryTimeoutLeavesNothingBehind(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name  string
		steps []func(*http.Request) (*http.Response, error)
		tries int
	}{
		{"success at once", nil, 1},
		{"404 returned", []func(*http.Request) (*http.Response, error){status(http.StatusNotFound)}, 1},
		{"503 then success", []func(*http.Request) (*http.Response, error){status(http.StatusServiceUnavailable)}, 2},
		{"transport errors then success", []func(*http.Request) (*http.Response, error){fail(refused), fail(refused)}, 3},
		{"503 until exhausted", []func(*http.Request) (*http.Response, error){
			status(http.StatusServiceUnavailable), status(http.StatusServiceUnavailable), status(http.StatusServiceUnavailable)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			clk := newTTClock()
			base := newScript(tc.steps...)
			tr := New(base, WithClock(clk), WithBackoff(noJitter), WithTryTimeout(time.Second))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := newRequest(t, ctx, http.MethodGet, "https://api.example.com/v1/models", nil)
			r := ttDrive(t, tr, clk, req, nil, time.Second)
			if r.resp != nil {
				io.Copy(io.Discard, r.resp.Body)
				r.resp.Body.Close()
			}
			if got := base.tries(); got != tc.tries {
				t.Errorf("tries = %d, want %d", got, tc.tries)
			}
			if got := clk.started(); got < tc.tries {
				t.Errorf("per-try timers started = %d, want at least %d (one per try)", got, tc.tries)
			}
			if n := clk.armed(); n != 0 {
				t.Errorf("%d per-try timers still armed, want 0", n)
			}
			for i, s := range base.sent {
				if s.ctx.Err() == nil {
					t.Errorf("try %d: context still live after its response was closed", i+1)
				}
			}
			if ctx.Err() != nil {
				t.Errorf("caller's context ended: %v", ctx.Err())
			}
		})
	}
}

// TestTimeoutsStayTimeouts: through the transport, os.IsTimeout and
// (*url.Error).Timeout answer as they do without it (R9), for a base's
// ResponseHeaderTimeout, a try timeout, and the caller's deadline passing on
// a later try. Real loopback server, real clock, zero backoff: each case
// takes a few hundred milliseconds at most.
func TestTimeoutsStayTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hangFrom int32 // the first try that hangs before its headers
		base     func() *http.Transport
		opts     []Option
		deadline time.Duration
	}{
		{"ResponseHeaderTimeout of the base", 1,
			func() *http.Transport { return &http.Transport{ResponseHeaderTimeout: 30 * time.Millisecond} }, nil, 0},
		{"WithTryTimeout", 1,
			func() *http.Transport { return &http.Transport{} }, []Option{WithTryTimeout(30 * time.Millisecond)}, 0},
		{"the caller's deadline on a later try", 2,
			func() *http.Transport { return &http.Transport{} }, nil, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			var tries, hangFrom atomic.Int32
			srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tries.Add(1) < hangFrom.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				select { // hang before the headers until the client goes, 5 s at most
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			})
			for _, through := range []bool{false, true} {
				base := tc.base()
				t.Cleanup(base.CloseIdleConnections)
				var rt http.RoundTripper = base
				if through {
					rt = New(base, append([]Option{WithBackoff(Backoff{})}, tc.opts...)...)
				} else if len(tc.opts) > 0 {
					continue // a try timeout exists only with the transport
				}
				tries.Store(0)
				hangFrom.Store(1) // without the transport: the one try hangs
				if through {
					hangFrom.Store(tc.hangFrom)
				}
				ctx := context.Background()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				resp, err := (&http.Client{Transport: rt}).Do(req)
				if resp != nil {
					resp.Body.Close()
				}
				require.Error(t, err, "through the transport: %v", through)
				assert.True(t, os.IsTimeout(err), "os.IsTimeout(%v), through the transport: %v", err, through)
				var ue *url.Error
				if assert.ErrorAs(t, err, &ue) {
					assert.True(t, ue.Timeout(), "(*url.Error).Timeout(), through the transport: %v", through)
				}
			}
		})
	}
	// And not for what is not a timeout.
	assert.False(t, (&Error{Err: ErrRateLimited}).Timeout())
	assert.False(t, (&Error{Err: syscall.ECONNREFUSED}).Timeout())
	assert.False(t, (&Error{Err: context.Canceled}).Timeout())
	assert.True(t, (&Error{Err: &tryTimeoutError{d: time.Second}}).Timeout())
	assert.False(t, (*Error)(nil).Timeout())
}
