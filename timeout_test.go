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
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTryTimeoutAndCallerEndTogether: the per-try timeout fires and the
// caller's context ends while a try waits for its headers, which then come.
// The try's error is the caller's, not a try timeout (R13), returned as it is
// on a first try (R9); the late response is closed, not handed back with it
// (R1: a response or an error, never both, nor neither).
func TestTryTimeoutAndCallerEndTogether(t *testing.T) {
	const d = 5 * time.Second
	clk := newClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	late := &trackedBody{r: strings.NewReader("late")}
	var tries int
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		tries++
		clk.Add(d) // the try timeout fires
		cancel()   // and the caller gives up, before the headers come
		resp := respond(http.StatusOK, "")
		resp.Body = late
		return resp, nil
	})
	tr := New(base, WithClock(clk), WithBackoff(noJitter), WithTryTimeout(d))
	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "https://api.example.com/v1", nil))
	require.Nil(t, resp)
	assert.ErrorIs(t, err, context.Canceled)
	var timedOut *tryTimeoutError
	assert.False(t, errors.As(err, &timedOut), "%v is a try timeout; the caller gave up", err)
	assert.Equal(t, 1, tries)
	assert.EqualValues(t, 1, late.closed.Load(), "the late response's body, closed")
}

// Tests of WithTryTimeout (R13): a try is
// bounded until its response headers, on the injected clock; a returned body
// is never cut by it; no timer or goroutine outlives the try.

// timerClock is the kit's Clock that also keeps every AfterFunc timer the
// transport starts (the per-try timers), so that a test can check none
// outlives its try: the kit's Clock does not tell which of its functions are
// still armed. Give a Script the Clock inside (clk.Clock), so that its Hang
// replies move it.
type timerClock struct {
	*retryhttptest.Clock
	mu     sync.Mutex
	timers []*clock.Timer
}

func newTimerClock() *timerClock { return &timerClock{Clock: newClock()} }

func (c *timerClock) AfterFunc(d time.Duration, f func()) *clock.Timer {
	tm := c.Clock.AfterFunc(d, f)
	c.mu.Lock()
	c.timers = append(c.timers, tm)
	c.mu.Unlock()
	return tm
}

// started returns how many per-try timers the transport started.
func (c *timerClock) started() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// armed returns how many per-try timers are still armed, neither stopped nor
// fired: Stop reports exactly that (it disarms them, so call it once, at the
// end).
func (c *timerClock) armed() int {
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
			clk := newTimerClock()
			var rs replies
			for range tc.hangs {
				rs = append(rs, retryhttptest.Hang()) // no answer: the try timeout moves the clock to d
			}
			base := &spy{script: retryhttptest.NewScript(append(rs, retryhttptest.Reply{Body: "ok"})...).WithClock(clk.Clock)}
			var seen ttAttempts
			tr := New(base, WithClock(clk), WithBackoff(noJitter), WithTryTimeout(d), WithObserver(seen.observe))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "https://api.example.com/v1/models", nil))

			sent := base.sent()
			require.Len(t, sent, tc.wantTries, "tries")
			attempts := seen.list()
			require.Len(t, attempts, tc.wantTries, "attempts")
			for i, a := range attempts[:tc.hangs] {
				assert.True(t, isTryTimeout(a.Err), "try %d: Err = %v, want a per-try timeout (net.Error, Timeout() true, not DeadlineExceeded)", a.Try, a.Err)
				assert.Equal(t, Transient, a.Class, "try %d", a.Try)
				assert.Equal(t, d, a.Elapsed, "try %d: Elapsed, on the injected clock", a.Try)
				assert.Error(t, sent[i].Context().Err(), "try %d: its context, after it timed out", a.Try)
			}
			assert.NoError(t, ctx.Err(), "the caller's context: only a try's context may end")
			for i, r := range sent {
				assert.NotSame(t, ctx, r.Context(), "try %d runs under a context of its own", i+1)
			}
			assertWaits(t, []time.Duration{400 * time.Millisecond, 800 * time.Millisecond}[:tc.wantTries-1], clk.Waits(), "the backoff, after each cut try")

			if tc.wantOK {
				require.NoError(t, err, "the 200")
				last := sent[tc.wantTries-1].Context()
				assert.NoError(t, last.Err(), "the answering try's context, before its body is closed")
				body, err := io.ReadAll(resp.Body)
				assert.NoError(t, err)
				assert.Equal(t, "ok", string(body))
				resp.Body.Close()
				assert.Error(t, last.Err(), "the answering try's context, after its body was closed")
			} else {
				require.Nil(t, resp)
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, Exhausted, e.Reason)
				assert.Equal(t, 3, e.Tries)
				assert.Zero(t, e.Status)
				assert.True(t, isTryTimeout(e.Err), "Error.Err = %v, want the per-try timeout", e.Err)
				assert.NotErrorIs(t, err, context.Canceled, "the caller's context never ended")
				assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller's context never ended")
			}
			assert.GreaterOrEqual(t, clk.started(), tc.wantTries, "per-try timers started: one per try")
			assert.Zero(t, clk.armed(), "per-try timers still armed after RoundTrip returned")
		})
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
	clk := newClock()
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

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err, "the second try's 200")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "second", string(body))
	assert.True(t, late.isClosed(), "the late response's body is closed")
	a := seen.list()
	require.Len(t, a, 2, "attempts")
	assert.True(t, isTryTimeout(a[0].Err), "the first try: Err = %v, want a per-try timeout", a[0].Err)
	assert.Equal(t, Transient, a[0].Class, "the first try")
}

// The caller's own cancellation during a hanging try is the caller's: it is
// returned unchanged, not as a per-try timeout, and never retried (R2, R9).
func TestTryTimeoutCallerCancelsDuringTry(t *testing.T) {
	ttNoLeak(t)
	clk := newTimerClock()
	script := retryhttptest.NewScript(retryhttptest.Hang()).WithClock(clk.Clock)
	tr := New(script, WithClock(clk), WithTryTimeout(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk.Clock.AfterFunc(time.Second, cancel) // a second into the try, long before its timeout

	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "https://api.example.com/v1/models", nil))
	require.Nil(t, resp)
	assert.ErrorIs(t, err, context.Canceled)
	var e *Error
	assert.NotErrorAs(t, err, &e, "the Permanent first-try error, unchanged, not an *Error")
	assert.False(t, isTryTimeout(err), "%v reads as a per-try timeout; the caller canceled", err)
	assert.Equal(t, 1, script.Len(), "tries")
	assert.Zero(t, clk.armed(), "per-try timers still armed")
}

// Every way a try can end leaves no per-try timer armed and no goroutine
// running, and leaves the caller's context alone.
func TestTryTimeoutLeavesNothingBehind(t *testing.T) {
	refused := retryhttptest.Fail(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	for _, tc := range []struct {
		name    string
		replies replies
		tries   int
	}{
		{"success at once", replies{reply(http.StatusOK)}, 1},
		{"404 returned", replies{reply(http.StatusNotFound)}, 1},
		{"503 then success", replies{reply(http.StatusServiceUnavailable), reply(http.StatusOK)}, 2},
		{"transport errors then success", replies{refused, refused, reply(http.StatusOK)}, 3},
		{"503 until exhausted", replies{reply(http.StatusServiceUnavailable), reply(http.StatusServiceUnavailable), reply(http.StatusServiceUnavailable)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			clk := newTimerClock()
			base := &spy{script: retryhttptest.NewScript(tc.replies...).WithClock(clk.Clock)}
			tr := New(base, WithClock(clk), WithBackoff(noJitter), WithTryTimeout(time.Second))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "https://api.example.com/v1/models", nil))
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()

			sent := base.sent()
			assert.Len(t, sent, tc.tries, "tries")
			assert.GreaterOrEqual(t, clk.started(), tc.tries, "per-try timers started: one per try")
			assert.Zero(t, clk.armed(), "per-try timers still armed")
			for i, r := range sent {
				assert.Error(t, r.Context().Err(), "try %d: its context, after its response was closed", i+1)
			}
			assert.NoError(t, ctx.Err(), "the caller's context")
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
		hangFrom int32 // The first try that hangs before its headers
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

// callerEndCase is a row of TestCallerEndIsTheCause: the caller's context
// (its deadline on the kit's clock unless cancel is set), and what the base
// does on each try (from 1) once that context ended, or makes it end.
type callerEndCase struct {
	name       string
	deadline   time.Duration // on the kit's clock; 0: none
	cancel     error         // the caller cancels with this cause during its last try; nil: it does not
	opts       []Option
	tries      int // the last try is the one the caller's context ends during; those before it answer 503
	answer     func(r *http.Request) error
	wantErr    error // what errors.Is finds: the caller's ctx.Err()
	wantTries  int
	wantReason Outcome // of the *Error; Done with wantBare for a first try's error, returned as it is
	wantBare   bool
}

// errOwn is a try's own context's Err, as a base that answers ctx.Err() gives it.
func errOwn(r *http.Request) error { return r.Context().Err() }

// causeOwn is a try's own context's Cause, as net/http and the kit's Hang
// give it.
func causeOwn(r *http.Request) error { return context.Cause(r.Context()) }

var errMine = errors.New("the caller's own cause")

var callerEndCases = []callerEndCase{
	{name: "a retry answers its own context's Err after the caller's deadline", deadline: time.Second, tries: 2, answer: errOwn,
		wantErr: context.DeadlineExceeded, wantTries: 2, wantReason: Done},
	{name: "a retry answers its own context's Cause after the caller's deadline", deadline: time.Second, tries: 2, answer: causeOwn,
		wantErr: context.DeadlineExceeded, wantTries: 2, wantReason: Done},
	{name: "a first try under WithTryTimeout answers its own context's Err after the caller's deadline", deadline: time.Second,
		opts: []Option{WithTryTimeout(time.Minute)}, tries: 1, answer: errOwn,
		wantErr: context.DeadlineExceeded, wantTries: 1, wantBare: true},
	{name: "the try timeout and then the caller's deadline pass before the base answers its context's Err", deadline: 2 * time.Second,
		opts: []Option{WithTryTimeout(time.Second)}, tries: 1, answer: errOwn,
		wantErr: context.DeadlineExceeded, wantTries: 1, wantBare: true},
	{name: "the try timeout and then the caller's deadline pass before the base answers its context's Cause", deadline: 2 * time.Second,
		opts: []Option{WithTryTimeout(time.Second)}, tries: 1, answer: causeOwn,
		wantErr: context.DeadlineExceeded, wantTries: 1, wantBare: true},
	{name: "a retry under WithTryTimeout: both pass before the base answers", deadline: 2 * time.Second,
		opts: []Option{WithTryTimeout(time.Second)}, tries: 2, answer: errOwn,
		wantErr: context.DeadlineExceeded, wantTries: 2, wantReason: Done},
	{name: "the caller cancels during a retry: Canceled, no timeout", cancel: context.Canceled, tries: 2, answer: errOwn,
		wantErr: context.Canceled, wantTries: 2, wantReason: Done},
	{name: "the caller cancels with a cause of its own during a retry: its ctx.Err(), Canceled", cancel: errMine, tries: 2, answer: causeOwn,
		wantErr: context.Canceled, wantTries: 2, wantReason: Done},
}

// TestCallerEndIsTheCause: when the caller's context has ended, the cause
// of what comes back is the caller's ctx.Err(), never the error of a
// context the transport made for a try (a retry's, a try timeout's), so
// errors.Is(err, context.DeadlineExceeded), os.IsTimeout and
// (*Error).Timeout answer as they would without the transport (R9). The
// deadlines are the kit's (retryhttptest.Clock.WithTimeout), whose Err is
// their own: a context derived from one reports context.Canceled when it
// passes, as table-driven tests of users' code meet it.
func TestCallerEndIsTheCause(t *testing.T) {
	for _, tc := range callerEndCases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tc.deadline > 0 {
				var stop context.CancelFunc
				ctx, stop = clk.WithTimeout(ctx, tc.deadline)
				defer stop()
			}
			var tries int
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				tries++
				if tries < tc.tries {
					return respond(http.StatusServiceUnavailable, ""), nil
				}
				if tc.cancel != nil {
					cancel(tc.cancel)
				} else {
					clk.Add(5 * time.Second) // past the deadline (and any try timeout)
				}
				require.Error(t, ctx.Err(), "the caller's context, before the base answers")
				return nil, tc.answer(r)
			})
			tr := New(base, append([]Option{WithClock(clk), WithBackoff(noJitter)}, tc.opts...)...)
			req := newRequest(t, ctx, http.MethodPost, "https://api.example.com/v1/chat", []byte(`{}`))

			resp, err := (&http.Client{Transport: tr}).Do(req)
			require.Nil(t, resp)
			require.Error(t, err)
			assert.Equal(t, tc.wantTries, tries, "tries")
			timeout := errors.Is(tc.wantErr, context.DeadlineExceeded)
			assert.ErrorIs(t, err, tc.wantErr, "the caller's ctx.Err(): %v", ctx.Err())
			assert.Equal(t, timeout, errors.Is(err, context.DeadlineExceeded), "errors.Is(%v, context.DeadlineExceeded)", err)
			assert.Equal(t, !timeout, errors.Is(err, context.Canceled), "errors.Is(%v, context.Canceled)", err)
			assert.Equal(t, timeout, os.IsTimeout(err), "os.IsTimeout(%v)", err)
			var e *Error
			if tc.wantBare {
				assert.False(t, errors.As(err, &e), "a first try's error, returned as it is: %v", err)
				return
			}
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.wantReason, e.Reason)
			assert.Equal(t, timeout, e.Timeout(), "(*Error).Timeout() of %v", e)
			assert.Equal(t, ctx.Err(), e.Err, "the cause: the caller's ctx.Err()")
		})
	}
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
	clk := newTimerClock()
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

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err, "the 200")
	start := clk.Now()
	chunks := []string{"data: one\n\n", "data: two\n\n", "data: three\n\n", "data: [DONE]\n\n"}
	var got strings.Builder
	for i, c := range chunks {
		clk.Add(3 * d) // each chunk comes long after the try timeout
		stream.chunks <- c
		buf := make([]byte, len(c))
		_, err := io.ReadFull(resp.Body, buf)
		require.NoError(t, err, "chunk %d, %v after the headers: the stream stays readable", i, clk.Since(start))
		got.Write(buf)
	}
	close(stream.chunks)
	rest, err := io.ReadAll(resp.Body)
	assert.NoError(t, err, "the end of the stream")
	assert.Empty(t, rest, "the end of the stream")
	assert.Equal(t, strings.Join(chunks, ""), got.String())
	assert.Equal(t, 1, tries, "a stream is never retried (R6)")
	assert.NoError(t, tryCtx.Err(), "the try's context, before the body is closed")
	assert.NoError(t, resp.Body.Close())
	assert.True(t, stream.closed, "closing the returned body closes the base's")
	assert.Error(t, tryCtx.Err(), "the try's context, after the body was closed")
	assert.Zero(t, clk.armed(), "per-try timers still armed")
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
	clk := newClock()
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
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	w, ok := resp.Body.(io.ReadWriteCloser)
	require.True(t, ok, "the 101's body is a %T, want an io.ReadWriteCloser as net/http gives", resp.Body)
	_, err = io.WriteString(w, "hello")
	assert.NoError(t, err, "a write through the body")
	assert.Equal(t, "hello", duplex.String(), "what the write reached")
	w.Close()
	assert.True(t, duplex.closed, "after Close: the base's body, closed")
	assert.Error(t, tryCtx.Err(), "after Close: the try's context, ended")
}

// TestDeadlineOnTheInjectedClock: what a deadline leaves is the deadline less
// the transport's clock's now (R7), however far that clock is from the real
// time. A clock a year ahead sees a deadline set on it, not the year; a clock
// in 1970 (clock.NewMock) sees a real deadline decades away, as WithClock's
// doc warns; a clock a year ahead sees a real deadline long past.
func TestDeadlineOnTheInjectedClock(t *testing.T) {
	const year = 365 * 24 * time.Hour
	for _, tc := range []struct {
		name       string
		at         func() time.Time // the clock's time at the start
		onTheClock bool             // the 10 s deadline is on the clock (Mock.WithTimeout), else real
		retryAfter string
		wantWaits  []time.Duration
		wantStatus int
	}{
		{"a year ahead, 10 s on the clock: a 30 s ask does not fit", func() time.Time { return time.Now().Add(year) }, true,
			"30", nil, 429},
		{"a year ahead, 10 s on the clock: a 5 s ask fits", func() time.Time { return time.Now().Add(year) }, true,
			"5", []time.Duration{5 * time.Second}, 200},
		{"a year behind, 10 s on the clock: a 5 s ask fits", func() time.Time { return time.Now().Add(-year) }, true,
			"5", []time.Duration{5 * time.Second}, 200},
		{"in 1970, 10 s of real time: a 30 s ask fits, decades away", func() time.Time { return time.Unix(0, 0) }, false,
			"30", []time.Duration{30 * time.Second}, 200},
		{"a year ahead, 10 s of real time: long past, nothing fits", func() time.Time { return time.Now().Add(year) }, false,
			"5", nil, 429},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			clk.Set(tc.at())
			var (
				ctx    context.Context
				cancel context.CancelFunc
			)
			if tc.onTheClock {
				ctx, cancel = clk.WithTimeout(context.Background(), 10*time.Second)
			} else {
				ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
			}
			defer cancel()
			script := retryhttptest.NewScript(reply(429, "Retry-After", tc.retryAfter), reply(200)).WithClock(clk)
			tr := New(script, WithClock(clk), WithBackoff(noJitter))

			r := drive(t, tr, clk, newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))
			require.NoError(t, r.err)
			r.resp.Body.Close()
			assert.Equal(t, tc.wantStatus, r.resp.StatusCode)
			assertWaits(t, tc.wantWaits, r.waits)
			assert.Equal(t, 1+len(tc.wantWaits), script.Len(), "tries")
		})
	}
}
