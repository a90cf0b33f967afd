package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBudgetAccounting(t *testing.T) {
	b := NewBudget(time.Second)
	require.Equal(t, time.Second, b.Left())
	require.Zero(t, b.Waited())
	steps := []struct {
		wait, limit time.Duration
		want        bool
		wantLeft    time.Duration
	}{
		{300 * time.Millisecond, maxDuration, true, 700 * time.Millisecond},
		{700 * time.Millisecond, maxDuration, false, 700 * time.Millisecond}, // not shorter than what is left
		{699 * time.Millisecond, maxDuration, true, time.Millisecond},
		{0, maxDuration, true, time.Millisecond},
		{time.Millisecond, maxDuration, false, time.Millisecond},
	}
	for i, s := range steps {
		assert.Equal(t, s.want, b.reserve(s.wait, s.limit), "step %d: reserve(%v)", i, s.wait)
		assert.Equal(t, s.wantLeft, b.Left(), "step %d: left", i)
	}
	b.refund(500 * time.Millisecond)
	assert.Equal(t, 501*time.Millisecond, b.Left(), "after the refund")
	assert.Equal(t, 499*time.Millisecond, b.Waited(), "after the refund")
	assert.False(t, b.reserve(100*time.Millisecond, 100*time.Millisecond), "a wait not shorter than the deadline's limit")
}

func TestBudgetEdges(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		b := NewBudget(d)
		assert.Zero(t, b.Left(), "NewBudget(%v): no room", d)
		assert.False(t, b.reserve(0, maxDuration), "NewBudget(%v): no room, even for 0", d)
	}
	var nilBudget *Budget
	assert.Zero(t, nilBudget.Left())
	assert.Zero(t, nilBudget.Waited())
	ctx := context.Background()
	assert.Equal(t, ctx, WithBudget(ctx, nil), "WithBudget(ctx, nil) returns ctx unchanged")
	b := NewBudget(PublicTierMaxWait)
	assert.Same(t, b, BudgetFrom(WithBudget(ctx, b)))
	assert.Nil(t, BudgetFrom(ctx))
	//lint:ignore SA1012 a nil context on purpose: it must not panic
	//nolint:staticcheck // a nil context on purpose: it must not panic
	assert.Nil(t, BudgetFrom(nil))
	assert.Equal(t, 10*time.Second, PublicTierMaxWait)
}

// waitMustFitTest is a row of TestWaitMustFit.
type waitMustFitTest struct {
	name        string
	budget      time.Duration // 0: no Budget in the context; < 0: NewBudget(0)
	deadline    time.Duration // 0: none; on the injected clock
	replies     replies
	wantWaits   []time.Duration
	wantStatus  int // of the returned response; 0 when an error is returned
	wantReason  Outcome
	wantLimited bool
	wantWaited  time.Duration // charged to the Budget
}

// TestWaitMustFit checks R7 and R8 on single calls: whether the transport
// waits, stops at once, or fails fast with ErrRateLimited.
func TestWaitMustFit(t *testing.T) {
	const ms = time.Millisecond
	refused := retryhttptest.Fail(errRefused)
	tests := []waitMustFitTest{
		{name: "deadline too close: the response comes back at once",
			deadline: time.Second, replies: replies{reply(429, "Retry-After", "5")}, wantStatus: 429},
		{name: "deadline fits",
			deadline: 10 * time.Second, replies: replies{reply(429, "Retry-After", "5"), reply(200)}, wantWaits: []time.Duration{5 * time.Second}, wantStatus: 200},
		{name: "wait equal to what the deadline leaves does not fit",
			deadline: 400 * ms, replies: replies{reply(503)}, wantStatus: 503},
		{name: "budget: throttled retried, then success",
			budget: 10 * time.Second, replies: replies{reply(429, "Retry-After", "2"), reply(200)}, wantWaits: []time.Duration{2 * time.Second}, wantStatus: 200, wantWaited: 2 * time.Second},
		{name: "budget: Retry-After beyond the budget fails fast",
			budget: 10 * time.Second, replies: replies{reply(429, "Retry-After", "30")}, wantReason: OutOfTime, wantLimited: true},
		{name: "budget: 503 asking beyond the budget is a rate limit too",
			budget: 10 * time.Second, replies: replies{reply(503, "Retry-After", "20")}, wantReason: OutOfTime, wantLimited: true},
		{name: "budget: 503 whose backoff does not fit is handed back",
			budget: time.Second, replies: replies{reply(503), reply(503)}, wantWaits: []time.Duration{400 * ms}, wantStatus: 503, wantWaited: 400 * ms},
		{name: "budget: 503 with a short Retry-After but no room is handed back",
			budget: 300 * ms, replies: replies{reply(503, "Retry-After", "0.1")}, wantStatus: 503},
		{name: "budget: throttled to the end fails fast",
			budget: 10 * time.Second, replies: replies{reply(429), reply(429), reply(429)}, wantWaits: []time.Duration{400 * ms, 800 * ms}, wantReason: Exhausted, wantLimited: true, wantWaited: 1200 * ms},
		{name: "budget: transient to the end is handed back",
			budget: 10 * time.Second, replies: replies{reply(503), reply(502), reply(503)}, wantWaits: []time.Duration{400 * ms, 800 * ms}, wantStatus: 503, wantWaited: 1200 * ms},
		{name: "budget with no room: 503 handed back",
			budget: -1, replies: replies{reply(503)}, wantStatus: 503},
		{name: "budget with no room: 429 fails fast",
			budget: -1, replies: replies{reply(429)}, wantReason: OutOfTime, wantLimited: true},
		{name: "no budget: 429 with a long Retry-After is still waited",
			replies: replies{reply(429, "Retry-After", "299"), reply(200)}, wantWaits: []time.Duration{299 * time.Second}, wantStatus: 200},
		// no single wait of DefaultMaxWait or more is slept; the
		// response is handed back at once, as one that does not fit.
		{name: "no budget: a Retry-After of DefaultMaxWait is handed back",
			replies: replies{reply(429, "Retry-After", "300")}, wantStatus: 429},
		{name: "no budget: a Retry-After of 31.7 years is handed back",
			replies: replies{reply(429, "Retry-After", "1000000000")}, wantStatus: 429},
		{name: "budget: a Retry-After past DefaultMaxWait fails fast",
			budget: time.Hour, replies: replies{reply(429, "Retry-After", "1000000000")}, wantReason: OutOfTime, wantLimited: true},
		{name: "budget and deadline: the deadline is the smaller",
			budget: 10 * time.Second, deadline: 3 * time.Second, replies: replies{reply(429, "Retry-After", "5")}, wantReason: OutOfTime, wantLimited: true},
		{name: "budget and deadline: transport error that does not fit",
			budget: 10 * time.Second, deadline: 300 * ms, replies: replies{refused}, wantReason: OutOfTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkWaitMustFit(t, tt) })
	}
}

func checkWaitMustFit(t *testing.T, tt waitMustFitTest) {
	clk := newClock()
	var budget *Budget
	switch {
	case tt.budget > 0:
		budget = NewBudget(tt.budget)
	case tt.budget < 0:
		budget = NewBudget(0)
	}
	ctx := WithBudget(context.Background(), budget)
	if tt.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = clk.WithTimeout(ctx, tt.deadline)
		defer cancel()
	}
	var last *trackedBody // the last response's body
	script := retryhttptest.NewScript(tt.replies...).WithClock(clk)
	base := &spy{script: script, edit: func(_ int, resp *http.Response) {
		last = &trackedBody{r: resp.Body}
		resp.Body = last
	}}
	tr := New(base, WithClock(clk), WithBackoff(noJitter))
	resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))

	assertWaits(t, tt.wantWaits, clk.Waits())
	assert.Equal(t, len(tt.replies), script.Len(), "tries")
	if budget != nil {
		assert.Equal(t, tt.wantWaited, budget.Waited(), "charged to the Budget")
	}
	if tt.wantStatus != 0 {
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, tt.wantStatus, resp.StatusCode)
		return
	}
	require.Nil(t, resp, "a response and an error")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, tt.wantReason, e.Reason)
	assert.Equal(t, tt.wantLimited, errors.Is(err, ErrRateLimited), "errors.Is(%v, ErrRateLimited)", err)
	if tt.wantLimited && last != nil {
		assert.EqualValues(t, 1, last.closed.Load(), "times the rate-limited response's body was closed")
	}
}

// TestRateLimitedErrorFields checks the *Error a public-tier caller gets.
func TestRateLimitedErrorFields(t *testing.T) {
	ctx := WithBudget(context.Background(), NewBudget(PublicTierMaxWait))
	_, _, tr := scripted(replies{reply(503), reply(429, "Retry-After", "45")})
	_, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com", nil))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Error{Tries: 2, Waited: 400 * time.Millisecond, Status: 429, RetryAfter: 45 * time.Second, Reason: OutOfTime, Err: ErrRateLimited}, *e)
	assert.EqualError(t, e, "retryhttp: out_of_time after 2 tries, waited 400ms, status 429, retry-after 45s: rate limited")
}

// TestGiveUpIsImmediateOnTheRealClock runs R7 on the real clock: a
// Retry-After that does not fit the deadline is not slept. The bound is a
// guard against a 30 s sleep, not a speed claim.
func TestGiveUpIsImmediateOnTheRealClock(t *testing.T) {
	for _, withBudget := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if withBudget {
			ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
		}
		tr := New(retryhttptest.NewScript(reply(429, "Retry-After", "30")))
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com", nil))
		elapsed := time.Since(start)
		cancel()
		if resp != nil {
			resp.Body.Close()
		}
		assert.Less(t, elapsed, time.Second, "budget %v: gave up at once", withBudget)
		assert.Equal(t, withBudget, errors.Is(err, ErrRateLimited), "budget %v: err %v", withBudget, err)
	}
}

// TestBudgetSharedBySequentialCalls: two calls of one turn draw on one
// Budget; the second finds what the first left.
func TestBudgetSharedBySequentialCalls(t *testing.T) {
	budget := NewBudget(1500 * time.Millisecond)
	ctx := WithBudget(context.Background(), budget)
	clk, _, tr := scripted(replies{reply(503), reply(503), reply(200), reply(503)})

	resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com/a", nil))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "the first call")
	require.Equal(t, 1200*time.Millisecond, budget.Waited(), "after the first call")

	resp, err = tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com/b", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode, "the second call: the 503 back at once (400ms does not fit 300ms)")
	assertWaits(t, []time.Duration{400 * time.Millisecond, 800 * time.Millisecond}, clk.Waits(), "the first call's waits, and none of the second")
	assert.Equal(t, 1200*time.Millisecond, budget.Waited())
}

// TestBudgetReserveIsAtomic: callers at once on one Budget never charge
// more than it holds. The race is made certain, not likely: every caller
// reads the Budget before any of them charges it (reserveRace holds the first
// read of each there), so a charge that read and then stored apart would let
// all of them through; a compare-and-swap lets exactly the room through.
func TestBudgetReserveIsAtomic(t *testing.T) {
	const room, callers = 4, 12 // room for exactly 4 waits of 400ms; 12 callers want one each
	budget := NewBudget(room*400*time.Millisecond + time.Millisecond)
	var (
		arrivals atomic.Int32
		all      = make(chan struct{})
	)
	reserveRace = func() {
		switch n := arrivals.Add(1); {
		case n < callers:
			<-all // The first read of every caller meets here
		case n == callers:
			close(all)
		}
	}
	t.Cleanup(func() { reserveRace = nil })

	var (
		wg  sync.WaitGroup
		won atomic.Int32
	)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if budget.reserve(400*time.Millisecond, maxDuration) {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(room), won.Load(), "callers charged")
	assert.Equal(t, room*400*time.Millisecond, budget.Waited())
}

// TestBudgetSharedByConcurrentCalls: eight calls at once through the
// transport on one 2s Budget get exactly four 400ms waits between them,
// whatever the interleaving, and the Budget shows exactly what they waited.
// The calls share the kit's Clock, on which their waits overlap; what they
// were charged is what the Observer saw decided (on a shared clock a timer
// may be shorter than its wait, which counts from its response).
func TestBudgetSharedByConcurrentCalls(t *testing.T) {
	budget := NewBudget(2 * time.Second)
	ctx := WithBudget(context.Background(), budget)
	var (
		mu     sync.Mutex
		waited time.Duration
		waits  int
	)
	always503 := retryhttptest.NewScript(reply(503))
	tr := New(always503, WithClock(newClock()), WithMaxRetries(10), WithBackoff(Backoff{Base: 400 * time.Millisecond}),
		WithObserver(func(_ context.Context, a Attempt) {
			if a.Outcome == Retrying {
				mu.Lock()
				waited += a.Wait
				waits++
				mu.Unlock()
			}
		}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com", nil))
			if assert.NoError(t, err) {
				assert.Equal(t, 503, resp.StatusCode, "the last 503, handed back when the wait does not fit")
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	// 400ms fits while waited+400ms < 2s: four waits, 1.6s, and no more.
	assert.Equal(t, 4, waits)
	assert.Equal(t, 1600*time.Millisecond, waited)
	assert.Equal(t, 1600*time.Millisecond, budget.Waited())
	assert.Equal(t, 8+4, always503.Len(), "tries: one per call, one per wait")
}

// TestBudgetRefundOnCancel: a wait cut short gives back what it did not use.
func TestBudgetRefundOnCancel(t *testing.T) {
	budget := NewBudget(PublicTierMaxWait)
	ctx, cancel := context.WithCancel(WithBudget(context.Background(), budget))
	defer cancel()
	clk, _, tr := scripted(replies{reply(503, "Retry-After", "5")})
	var during time.Duration
	clk.AfterFunc(2*time.Second, func() { // two seconds into the 5 s wait
		during = budget.Waited()
		cancel()
	})
	_, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com", nil))
	assert.Equal(t, 5*time.Second, during, "charged during the wait: the whole wait, before the sleep")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Canceled, e.Reason)
	assert.Equal(t, 2*time.Second, e.Waited)
	assert.Equal(t, 2*time.Second, budget.Waited(), "after the cancel: 3s given back")
}

// TestBudgetFaultBoundaries pins the boundaries of R7, R8 and R10 that a planted fault
// once slipped past.
func TestBudgetFaultBoundaries(t *testing.T) {
	failingGetBody := func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	for _, tc := range []struct {
		name       string
		budget     time.Duration
		reply      retryhttptest.Reply
		getBody    func() (io.ReadCloser, error) // for a POST body; nil: no GetBody
		wantStatus int                           // 0: an error
		wantReason Outcome
		wantLimit  bool
		wantWaited time.Duration
	}{
		{
			name: "GetBody fails after the wait was charged: nothing stays charged", budget: PublicTierMaxWait,
			reply: reply(503), getBody: failingGetBody, wantStatus: 503,
		},
		{
			name: "no GetBody, 503 asking for all the Budget holds: the 503 back, not busy", budget: PublicTierMaxWait,
			reply: reply(503, "Retry-After", "10"), wantStatus: 503,
		},
		{
			name: "a 10s Budget and Retry-After: 10 fail fast (not shorter than what is left)", budget: PublicTierMaxWait,
			reply: reply(503, "Retry-After", "10"), getBody: okGetBody, wantReason: OutOfTime, wantLimit: true,
		},
		{
			name: "a 10s Budget and Retry-After: 9.999 is waited", budget: PublicTierMaxWait,
			reply: reply(503, "Retry-After", "9.999"), getBody: okGetBody, wantStatus: 200, wantWaited: 9999 * time.Millisecond,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			budget := NewBudget(tc.budget)
			ctx := WithBudget(context.Background(), budget)
			clk, _, tr := scripted(replies{tc.reply, reply(200)})
			req := newRequest(t, ctx, "POST", "https://api.example.com/v1", []byte(`{"q":1}`))
			req.GetBody = tc.getBody
			resp, err := tr.RoundTrip(req)
			assert.Equal(t, tc.wantWaited, budget.Waited(), "charged to the Budget")
			if tc.wantStatus != 0 {
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tc.wantStatus, resp.StatusCode)
				return
			}
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.wantReason, e.Reason)
			assert.Equal(t, tc.wantLimit, errors.Is(err, ErrRateLimited))
			assert.Empty(t, clk.Waits(), "no wait was slept")
		})
	}
}

func okGetBody() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(`{"q":1}`)), nil }

// TestCancelDuringWaitClosesFreshBody: the body GetBody made for the next
// try is closed when the caller cancels during the wait before it (R1, R9).
func TestCancelDuringWaitClosesFreshBody(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fresh []*trackedBody
	req := newRequest(t, ctx, "POST", "https://api.example.com/v1", []byte(`{"q":1}`))
	req.GetBody = func() (io.ReadCloser, error) {
		b := &trackedBody{r: strings.NewReader(`{"q":1}`)}
		fresh = append(fresh, b)
		return b, nil
	}
	clk, script, tr := scripted(replies{reply(503)})
	clk.AfterFunc(time.Millisecond, cancel) // a millisecond into the wait
	_, err := tr.RoundTrip(req)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Canceled, e.Reason)
	assert.Equal(t, 1, script.Len(), "tries")
	require.Len(t, fresh, 1, "GetBody calls")
	assert.EqualValues(t, 1, fresh[0].closed.Load(), "the unsent fresh body is closed")
}

// TestBudgetErrKeepsTheFirst checks R20 across the calls of one turn: Err is
// nil until a call carrying the Budget is rate limited, then the very *Error
// that call got, whatever the later calls get, a later rate limit included.
func TestBudgetErrKeepsTheFirst(t *testing.T) {
	budget := NewBudget(PublicTierMaxWait)
	ctx := WithBudget(context.Background(), budget)
	_, _, tr := scripted(replies{reply(503), reply(200), reply(429, "Retry-After", "30"), reply(429, "Retry-After", "45"),
		retryhttptest.Fail(errRefused)}, WithMaxRetries(0))
	call := func() error {
		resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))
		if resp != nil {
			resp.Body.Close()
		}
		return err
	}
	require.NoError(t, call(), "a 503, handed back")
	require.NoError(t, call(), "a 200")
	assert.NoError(t, budget.Err(), "no call was rate limited") // nil itself, not a nil *Error
	first := call()
	require.ErrorIs(t, first, ErrRateLimited)
	second := call()
	require.ErrorIs(t, second, ErrRateLimited)
	require.Error(t, call(), "refused, not rate limited")
	assert.Same(t, first, budget.Err(), "the first rate limit, not the second %v", second)
	var e *Error
	require.ErrorAs(t, budget.Err(), &e)
	assert.Equal(t, 30*time.Second, e.RetryAfter)
}
