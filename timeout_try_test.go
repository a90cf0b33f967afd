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

// Tests of WithTryTimeout (R13), here and in timeout_body_test.go: a try is
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
