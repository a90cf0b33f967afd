package retryhttp

import (
	"context"
	"errors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBudgetAccounting(t *testing.T) {
	b := NewBudget(time.Second)
	if b.Left() != time.Second || b.Waited() != 0 {
		t.Fatalf("new budget: left %v waited %v", b.Left(), b.Waited())
	}
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
		if got := b.reserve(s.wait, s.limit); got != s.want || b.Left() != s.wantLeft {
			t.Errorf("step %d: reserve(%v) = %v, left %v; want %v, left %v", i, s.wait, got, b.Left(), s.want, s.wantLeft)
		}
	}
	b.refund(500 * time.Millisecond)
	if b.Left() != 501*time.Millisecond || b.Waited() != 499*time.Millisecond {
		t.Errorf("after refund: left %v waited %v, want 501ms, 499ms", b.Left(), b.Waited())
	}
	if b.reserve(100*time.Millisecond, 100*time.Millisecond) {
		t.Errorf("reserve with a wait not shorter than the deadline's limit succeeded")
	}
}

func TestBudgetEdges(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		b := NewBudget(d)
		if b.Left() != 0 || b.reserve(0, maxDuration) {
			t.Errorf("NewBudget(%v): left %v, reserve(0) allowed; want no room", d, b.Left())
		}
	}
	var nilBudget *Budget
	if nilBudget.Left() != 0 || nilBudget.Waited() != 0 {
		t.Errorf("nil budget: left %v waited %v", nilBudget.Left(), nilBudget.Waited())
	}
	ctx := context.Background()
	if WithBudget(ctx, nil) != ctx {
		t.Errorf("WithBudget(ctx, nil) did not return ctx unchanged")
	}
	b := NewBudget(PublicTierMaxWait)
	if got := BudgetFrom(WithBudget(ctx, b)); got != b {
		t.Errorf("BudgetFrom = %p, want %p", got, b)
	}
	//lint:ignore SA1012 a nil context on purpose: it must not panic
	//nolint:staticcheck // a nil context on purpose: it must not panic
	if BudgetFrom(ctx) != nil || BudgetFrom(nil) != nil {
		t.Errorf("BudgetFrom of a context without one is not nil")
	}
	if PublicTierMaxWait != 10*time.Second {
		t.Errorf("PublicTierMaxWait = %v", PublicTierMaxWait)
	}
}

// TestWaitMustFit checks R7 and R8 on single calls: whether the transport
// waits, stops at once, or fails fast with ErrRateLimited.
func TestWaitMustFit(t *testing.T) {
	const ms = time.Millisecond
	type step = func(*http.Request) (*http.Response, error)
	tests := []struct {
		name        string
		budget      time.Duration // 0: no Budget in the context; < 0: NewBudget(0)
		deadline    time.Duration // 0: none; on the injected clock
		steps       []step
		wantWaits   []time.Duration
		wantStatus  int // of the returned response; 0 when an error is returned
		wantReason  Outcome
		wantLimited bool
		wantWaited  time.Duration // charged to the Budget
	}{
		{name: "deadline too close: the response comes back at once",
			deadline: time.Second, steps: []step{status(429, "Retry-After", "5")}, wantStatus: 429},
		{name: "deadline fits",
			deadline: 10 * time.Second, steps: []step{status(429, "Retry-After", "5"), status(200)}, wantWaits: []time.Duration{5 * time.Second}, wantStatus: 200},
		{name: "wait equal to what the deadline leaves does not fit",
			deadline: 400 * ms, steps: []step{status(503)}, wantStatus: 503},
		{name: "budget: throttled retried, then success",
			budget: 10 * time.Second, steps: []step{status(429, "Retry-After", "2"), status(200)}, wantWaits: []time.Duration{2 * time.Second}, wantStatus: 200, wantWaited: 2 * time.Second},
		{name: "budget: Retry-After beyond the budget fails fast",
			budget: 10 * time.Second, steps: []step{status(429, "Retry-After", "30")}, wantReason: OutOfTime, wantLimited: true},
		{name: "budget: 503 asking beyond the budget is a rate limit too",
			budget: 10 * time.Second, steps: []step{status(503, "Retry-After", "20")}, wantReason: OutOfTime, wantLimited: true},
		{name: "budget: 503 whose backoff does not fit is handed back",
			budget: time.Second, steps: []step{status(503), status(503)}, wantWaits: []time.Duration{400 * ms}, wantStatus: 503, wantWaited: 400 * ms},
		{name: "budget: 503 with a short Retry-After but no room is handed back",
			budget: 300 * ms, steps: []step{status(503, "Retry-After", "0.1")}, wantStatus: 503},
		{name: "budget: throttled to the end fails fast",
			budget: 10 * time.Second, steps: []step{status(429), status(429), status(429)}, wantWaits: []time.Duration{400 * ms, 800 * ms}, wantReason: Exhausted, wantLimited: true, wantWaited: 1200 * ms},
		{name: "budget: transient to the end is handed back",
			budget: 10 * time.Second, steps: []step{status(503), status(502), status(503)}, wantWaits: []time.Duration{400 * ms, 800 * ms}, wantStatus: 503, wantWaited: 1200 * ms},
		{name: "budget with no room: 503 handed back",
			budget: -1, steps: []step{status(503)}, wantStatus: 503},
		{name: "budget with no room: 429 fails fast",
			budget: -1, steps: []step{status(429)}, wantReason: OutOfTime, wantLimited: true},
		{name: "no budget: 429 with a huge Retry-After is still waited",
			steps: []step{status(429, "Retry-After", "3600"), status(200)}, wantWaits: []time.Duration{time.Hour}, wantStatus: 200},
		{name: "budget and deadline: the deadline is the smaller",
			budget: 10 * time.Second, deadline: 3 * time.Second, steps: []step{status(429, "Retry-After", "5")}, wantReason: OutOfTime, wantLimited: true},
		{name: "budget and deadline: transport error that does not fit",
			budget: 10 * time.Second, deadline: 300 * ms, steps: []step{fail(errRefused)}, wantReason: OutOfTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			ctx := context.Background()
			var budget *Budget
			switch {
			case tt.budget > 0:
				budget = NewBudget(tt.budget)
			case tt.budget < 0:
				budget = NewBudget(0)
			}
			ctx = WithBudget(ctx, budget)
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = clk.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			var lastBody *trackedBody
			steps := slices.Clone(tt.steps)
			for i, s := range steps {
				steps[i] = func(r *http.Request) (*http.Response, error) {
					resp, err := s(r)
					if resp != nil {
						lastBody = &trackedBody{r: resp.Body}
						resp.Body = lastBody
					}
					return resp, err
				}
			}
			base := newScript(steps...)
			tr := New(base, WithClock(clk), WithBackoff(noJitter))
			got := drive(t, tr, clk, newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))

			if !slices.Equal(got.waits, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", got.waits, tt.wantWaits)
			}
			if base.tries() != len(tt.steps) {
				t.Errorf("tries = %d, want %d", base.tries(), len(tt.steps))
			}
			if budget != nil && budget.Waited() != tt.wantWaited {
				t.Errorf("budget waited %v, want %v", budget.Waited(), tt.wantWaited)
			}
			if tt.wantStatus != 0 {
				if got.err != nil || got.resp.StatusCode != tt.wantStatus {
					t.Fatalf("RoundTrip = %v, %v; want the %d response", got.resp, got.err, tt.wantStatus)
				}
				got.resp.Body.Close()
				return
			}
			var e *Error
			if !errors.As(got.err, &e) {
				t.Fatalf("RoundTrip = %v, %v; want an *Error", got.resp, got.err)
			}
			if e.Reason != tt.wantReason {
				t.Errorf("Reason = %v, want %v", e.Reason, tt.wantReason)
			}
			if errors.Is(got.err, ErrRateLimited) != tt.wantLimited {
				t.Errorf("errors.Is(err, ErrRateLimited) = %v, want %v (err %v)", !tt.wantLimited, tt.wantLimited, got.err)
			}
			if tt.wantLimited && lastBody != nil && lastBody.closed.Load() != 1 {
				t.Errorf("rate-limited response body closed %d times, want 1", lastBody.closed.Load())
			}
		})
	}
}

// TestRateLimitedErrorFields checks the *Error a public-tier caller gets.
func TestRateLimitedErrorFields(t *testing.T) {
	clk := newFakeClock()
	ctx := WithBudget(context.Background(), NewBudget(PublicTierMaxWait))
	tr := New(newScript(status(503), status(429, "Retry-After", "45")), WithClock(clk), WithBackoff(noJitter))
	got := drive(t, tr, clk, newRequest(t, ctx, "GET", "https://api.example.com", nil))
	var e *Error
	if !errors.As(got.err, &e) {
		t.Fatalf("err = %v, want *Error", got.err)
	}
	want := Error{Tries: 2, Waited: 400 * time.Millisecond, Status: 429, RetryAfter: 45 * time.Second, Reason: OutOfTime, Err: ErrRateLimited}
	if *e != want {
		t.Errorf("Error = %+v, want %+v", *e, want)
	}
	if want := "retryhttp: out_of_time after 2 tries, waited 400ms, status 429, retry-after 45s: rate limited"; e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
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
		tr := New(newScript(status(429, "Retry-After", "30")))
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com", nil))
		elapsed := time.Since(start)
		cancel()
		if resp != nil {
			resp.Body.Close()
		}
		if elapsed > time.Second {
			t.Errorf("budget %v: gave up after %v, want at once", withBudget, elapsed)
		}
		if withBudget != errors.Is(err, ErrRateLimited) {
			t.Errorf("budget %v: err = %v", withBudget, err)
		}
	}
}

// TestBudgetSharedBySequentialCalls: two calls of one turn draw on one
// Budget; the second finds what the first left.
func TestBudgetSharedBySequentialCalls(t *testing.T) {
	clk := newFakeClock()
	budget := NewBudget(1500 * time.Millisecond)
	ctx := WithBudget(context.Background(), budget)
	tr := New(newScript(status(503), status(503), status(200), status(503)), WithClock(clk), WithBackoff(noJitter))

	first := drive(t, tr, clk, newRequest(t, ctx, "GET", "https://api.example.com/a", nil))
	if first.err != nil || first.resp.StatusCode != 200 {
		t.Fatalf("first call: %v, %v", first.resp, first.err)
	}
	first.resp.Body.Close()
	if budget.Waited() != 1200*time.Millisecond {
		t.Fatalf("after the first call waited %v, want 1.2s", budget.Waited())
	}
	second := drive(t, tr, clk, newRequest(t, ctx, "GET", "https://api.example.com/b", nil))
	if second.err != nil || second.resp.StatusCode != 503 || len(second.waits) != 0 {
		t.Fatalf("second call: %v, %v, waits %v; want the 503 back at once (400ms does not fit 300ms)", second.resp, second.err, second.waits)
	}
	second.resp.Body.Close()
	if budget.Waited() != 1200*time.Millisecond {
		t.Errorf("budget waited %v, want 1.2s", budget.Waited())
	}
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
			<-all // the first read of every caller meets here
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
func TestBudgetSharedByConcurrentCalls(t *testing.T) {
	clk := newFakeClock()
	budget := NewBudget(2 * time.Second)
	ctx := WithBudget(context.Background(), budget)
	var (
		mu     sync.Mutex
		waited time.Duration
		waits  int
	)
	always503 := roundTripperFunc(func(*http.Request) (*http.Response, error) { return respond(503, "busy"), nil })
	tr := New(always503, WithClock(clk), WithMaxRetries(10), WithBackoff(Backoff{Base: 400 * time.Millisecond}),
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
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	timeout := time.After(10 * time.Second)
	for finished := false; !finished; {
		select {
		case d := <-clk.waits:
			clk.Add(d)
		case <-done:
			finished = true
		case <-timeout:
			t.Fatal("calls did not finish")
		}
	}
	// 400ms fits while waited+400ms < 2s: four waits, 1.6s, and no more.
	assert.Equal(t, 4, waits)
	assert.Equal(t, 1600*time.Millisecond, waited)
	assert.Equal(t, 1600*time.Millisecond, budget.Waited())
}

// TestBudgetRefundOnCancel: a wait cut short gives back what it did not use.
func TestBudgetRefundOnCancel(t *testing.T) {
	clk := newFakeClock()
	budget := NewBudget(PublicTierMaxWait)
	ctx, cancel := context.WithCancel(WithBudget(context.Background(), budget))
	defer cancel()
	tr := New(newScript(status(503, "Retry-After", "5")), WithClock(clk))
	got := driveWith(t, tr, clk, newRequest(t, ctx, "GET", "https://api.example.com", nil), func(d time.Duration) time.Duration {
		if budget.Waited() != 5*time.Second {
			t.Errorf("during the wait the budget shows %v charged, want 5s (charged before the sleep)", budget.Waited())
		}
		clk.Add(2 * time.Second)
		cancel()
		return 0
	})
	var e *Error
	if !errors.As(got.err, &e) || e.Reason != Canceled || e.Waited != 2*time.Second {
		t.Fatalf("err = %v, want Canceled after waiting 2s", got.err)
	}
	if budget.Waited() != 2*time.Second {
		t.Errorf("budget waited %v after cancel, want 2s (3s given back)", budget.Waited())
	}
}

// TestBudgetFaultBoundaries pins the boundaries of R7, R8 and R10 that a planted fault
// once slipped past.
func TestBudgetFaultBoundaries(t *testing.T) {
	failingGetBody := func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	for _, tc := range []struct {
		name       string
		budget     time.Duration
		reply      func(*http.Request) (*http.Response, error)
		getBody    func() (io.ReadCloser, error) // for a POST body; nil: no GetBody
		wantStatus int                           // 0: an error
		wantReason Outcome
		wantLimit  bool
		wantWaited time.Duration
	}{
		{
			name: "GetBody fails after the wait was charged: nothing stays charged", budget: PublicTierMaxWait,
			reply: status(503), getBody: failingGetBody, wantStatus: 503,
		},
		{
			name: "no GetBody, 503 asking for all the Budget holds: the 503 back, not busy", budget: PublicTierMaxWait,
			reply: status(503, "Retry-After", "10"), wantStatus: 503,
		},
		{
			name: "a 10s Budget and Retry-After: 10 fail fast (not shorter than what is left)", budget: PublicTierMaxWait,
			reply: status(503, "Retry-After", "10"), getBody: okGetBody, wantReason: OutOfTime, wantLimit: true,
		},
		{
			name: "a 10s Budget and Retry-After: 9.999 is waited", budget: PublicTierMaxWait,
			reply: status(503, "Retry-After", "9.999"), getBody: okGetBody, wantStatus: 200, wantWaited: 9999 * time.Millisecond,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			budget := NewBudget(tc.budget)
			ctx := WithBudget(context.Background(), budget)
			tr := New(newScript(tc.reply, status(200)), WithClock(clk))
			req := newRequest(t, ctx, "POST", "https://api.example.com/v1", []byte(`{"q":1}`))
			req.GetBody = tc.getBody
			got := drive(t, tr, clk, req)
			assert.Equal(t, tc.wantWaited, budget.Waited(), "charged to the Budget")
			if tc.wantStatus != 0 {
				require.NoError(t, got.err)
				got.resp.Body.Close()
				assert.Equal(t, tc.wantStatus, got.resp.StatusCode)
				return
			}
			var e *Error
			require.ErrorAs(t, got.err, &e)
			assert.Equal(t, tc.wantReason, e.Reason)
			assert.Equal(t, tc.wantLimit, errors.Is(got.err, ErrRateLimited))
			assert.Empty(t, got.waits, "no wait was slept")
		})
	}
}

func okGetBody() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(`{"q":1}`)), nil }

// TestCancelDuringWaitClosesFreshBody: the body GetBody made for the next
// try is closed when the caller cancels during the wait before it (R1, R9).
func TestCancelDuringWaitClosesFreshBody(t *testing.T) {
	clk := newFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fresh []*trackedBody
	req := newRequest(t, ctx, "POST", "https://api.example.com/v1", []byte(`{"q":1}`))
	req.GetBody = func() (io.ReadCloser, error) {
		b := &trackedBody{r: strings.NewReader(`{"q":1}`)}
		fresh = append(fresh, b)
		return b, nil
	}
	got := driveWith(t, New(newScript(status(503)), WithClock(clk)), clk, req, func(time.Duration) time.Duration {
		cancel()
		return 0
	})
	var e *Error
	require.ErrorAs(t, got.err, &e)
	assert.Equal(t, Canceled, e.Reason)
	require.Len(t, fresh, 1, "GetBody calls")
	assert.EqualValues(t, 1, fresh[0].closed.Load(), "the unsent fresh body is closed")
}
