package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of the wait between tries: which side sets it and what the Budget is
// charged (R4, R8), and the caller's context ending just as it ends, or while
// the failed body drains (R9).

// TestWaitSourceWithBudget: with a Budget, the wait is still the largest of
// the backoff and the server's ask, the server's side only when strictly
// larger (R4), and exactly that wait is charged (R8) and reported, to the
// Observer and in the log (R14, R15).
func TestWaitSourceWithBudget(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name     string
		first    retryhttptest.Reply
		wantWait time.Duration
		wantFrom WaitSource
	}{
		{"no ask: the backoff", reply(503), 400 * ms, FromBackoff},
		{"an ask shorter than the backoff: the backoff", reply(503, "Retry-After", "0.1"), 400 * ms, FromBackoff},
		{"an ask equal to the backoff: the backoff", reply(429, "Retry-After-Ms", "400"), 400 * ms, FromBackoff},
		{"an ask longer than the backoff: the server's", reply(429, "Retry-After-Ms", "401"), 401 * ms, FromRetryAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			budget := NewBudget(PublicTierMaxWait)
			log, logs := logSink()
			var attempts []Attempt
			clk, script, tr := scripted(replies{tc.first, reply(200)}, WithLogger(log),
				WithObserver(func(_ context.Context, a Attempt) { attempts = append(attempts, a) }))
			ctx := WithBudget(context.Background(), budget)
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))
			require.NoError(t, err)
			resp.Body.Close()

			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, 2, script.Len(), "tries")
			assertWaits(t, []time.Duration{tc.wantWait}, clk.Waits())
			assert.Equal(t, tc.wantWait, budget.Waited(), "charged to the Budget")
			require.Len(t, attempts, 2)
			assert.Equal(t, Retrying, attempts[0].Outcome)
			assert.Equal(t, tc.wantWait, attempts[0].Wait)
			assert.Equal(t, tc.wantFrom, attempts[0].From)
			require.Equal(t, 1, logs.Len(), "log entries")
			assert.Equal(t, tc.wantFrom.String(), logs.All()[0].ContextMap()["wait_from"])
			assert.Equal(t, tc.wantWait.Milliseconds(), logs.All()[0].ContextMap()["wait_ms"])
		})
	}
}

// endingCtx is a caller's context that a test ends at a chosen instant of a
// wait: once armed, the next look at it (Err) ends it first, as a cancel
// from another goroutine would just then. Done is the real one: closed only
// when the context has ended.
type endingCtx struct {
	context.Context
	cancel context.CancelFunc
	armed  atomic.Bool
}

func (c *endingCtx) Err() error {
	if c.armed.Load() {
		c.cancel()
	}
	return c.Context.Err()
}

// endingClock is the kit's Clock, on which a wait's timer fires at once, and
// which ends ctx as that timer fires: at once with both (the timer and the
// context both ready when the transport selects), or armed (the timer alone
// ready when it selects, the context ended right after, before it is looked
// at).
type endingClock struct {
	*retryhttptest.Clock
	ctx  *endingCtx
	both bool
}

func (c *endingClock) Timer(d time.Duration) *clock.Timer {
	t := c.Clock.Timer(d)
	if c.both {
		c.ctx.cancel()
	} else {
		c.ctx.armed.Store(true)
	}
	return t
}

// TestCancelAsTheTimerFires: the caller's context ends as the wait's timer
// fires. The caller's end wins (R9): no other try is sent, RoundTrip returns
// an *Error with Reason Canceled wrapping context.Canceled, and the wait,
// which was slept whole, stays charged, to the Budget and in Waited (R8).
func TestCancelAsTheTimerFires(t *testing.T) {
	const wait = 400 * time.Millisecond
	for _, both := range []bool{false, true} {
		for _, first := range []retryhttptest.Reply{reply(503), retryhttptest.Fail(errRefused)} {
			name := map[bool]string{false: "the timer first", true: "both at once"}[both]
			name += map[bool]string{false: ", after a 503", true: ", after a transport error"}[first.Err != nil]
			t.Run(name, func(t *testing.T) {
				budget := NewBudget(PublicTierMaxWait)
				parent, cancel := context.WithCancel(WithBudget(context.Background(), budget))
				defer cancel()
				ctx := &endingCtx{Context: parent, cancel: cancel}
				kit := newClock()
				clk := &endingClock{Clock: kit, ctx: ctx, both: both}
				base := &spy{script: retryhttptest.NewScript(first, reply(200)).WithClock(kit)}
				log, logs := logSink()
				tr := New(base, WithClock(clk), WithBackoff(noJitter), WithLogger(log))

				resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))
				require.Nil(t, resp)
				assert.Len(t, base.sent(), 1, "tries given to the base")
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.True(t, errors.Is(err, context.Canceled), "errors.Is(%v, context.Canceled)", err)
				assert.Equal(t, Error{Tries: 1, Waited: wait, Status: first.Status, Reason: Canceled, Err: context.Canceled}, *e)
				assertWaits(t, []time.Duration{wait}, kit.Waits())
				assert.Equal(t, wait, budget.Waited(), "the wait was slept whole: nothing given back")
				require.NotZero(t, logs.Len())
				last := logs.All()[logs.Len()-1]
				assert.Equal(t, msgGivingUp, last.Message)
				assert.Equal(t, "canceled", last.ContextMap()["reason"])
			})
		}
	}
}

// cancelingBody is a failed response's body whose Read, on the transport's
// drain, takes spent on the transport's clock and then ends the caller's
// context: the caller gives up while the body drains, before the sleep.
type cancelingBody struct {
	clk    *retryhttptest.Clock
	spent  time.Duration
	cancel context.CancelFunc
}

func (b cancelingBody) Read([]byte) (int, error) {
	b.clk.Add(b.spent)
	b.cancel()
	return 0, io.EOF
}

func (cancelingBody) Close() error { return nil }

// TestCancelDuringTheDrain: the caller's context ends while the failed body
// drains, which the wait overlaps (R10): RoundTrip returns at once with
// Reason Canceled, nothing more is slept or sent, and what the wait did not
// use is given back (R8, R9). Run in a bubble: the drain's real-time bound
// cannot run out before the drain reads.
func TestCancelDuringTheDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const spent = 100 * time.Millisecond // of noJitter's 400ms
		clk := newClock()
		budget := NewBudget(PublicTierMaxWait)
		ctx, cancel := context.WithCancel(WithBudget(context.Background(), budget))
		defer cancel()
		var tries int
		base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
			tries++
			resp := respond(503, "")
			resp.Body, resp.ContentLength = cancelingBody{clk, spent, cancel}, -1
			return resp, nil
		})
		tr := New(base, WithClock(clk), WithBackoff(noJitter))
		resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))
		require.Nil(t, resp)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, Error{Tries: 1, Waited: spent, Status: 503, Reason: Canceled, Err: context.Canceled}, *e)
		assert.Equal(t, 1, tries)
		assert.Empty(t, clk.Waits(), "nothing slept")
		assert.Equal(t, spent, budget.Waited(), "the rest of the wait given back")
	})
}
