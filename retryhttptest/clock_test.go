package retryhttptest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: the kit
// promises to start none.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ready reports whether ch can be received from now.
func ready[T any](ch <-chan T) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestNewClockStartsNowOnWholeSecond(t *testing.T) {
	before := time.Now().Add(-time.Second)
	c := NewClock()
	now := c.Now()
	assert.True(t, now.After(before) && !now.After(time.Now()), "now %v", now)
	assert.Zero(t, now.Nanosecond())
	assert.Equal(t, now, now.Round(0), "no monotonic reading")
	assert.Empty(t, c.Waits())
}

func TestClockWaitsMoveAtOnce(t *testing.T) {
	tests := []struct {
		name string
		wait func(c *Clock, d time.Duration)
	}{
		{"Timer", func(c *Clock, d time.Duration) {
			tm := c.Timer(d)
			require.True(t, ready(tm.C), "C is ready at once")
			assert.False(t, tm.Stop(), "a fired timer's Stop is false")
		}},
		{"After", func(c *Clock, d time.Duration) { require.True(t, ready(c.After(d))) }},
		{"Sleep", func(c *Clock, d time.Duration) { c.Sleep(d) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock()
			start := c.Now()
			realStart := time.Now()
			tt.wait(c, 400*time.Millisecond)
			tt.wait(c, time.Hour)
			assert.Equal(t, []time.Duration{400 * time.Millisecond, time.Hour}, c.Waits())
			assert.Equal(t, time.Hour+400*time.Millisecond, c.Since(start))
			assert.Less(t, time.Since(realStart), time.Second, "no real sleep")
		})
	}
}

func TestClockTimerSendsEndOfWait(t *testing.T) {
	c := NewClock()
	start := c.Now()
	assert.Equal(t, start.Add(2*time.Second), <-c.Timer(2*time.Second).C)
	assert.Equal(t, start.Add(2*time.Second), c.Now())
}

func TestClockAddIsNotAWait(t *testing.T) {
	c := NewClock()
	start := c.Now()
	c.Add(time.Minute)
	c.Add(-time.Hour) // does nothing
	c.Add(0)
	assert.Equal(t, time.Minute, c.Since(start))
	assert.Equal(t, -time.Minute, c.Until(start))
	assert.Empty(t, c.Waits())
}

// Add of d <= 0 does nothing: it runs not even a function due at the
// clock's very instant (the second of two due where a wait stopped).
func TestClockAddZeroRunsNothing(t *testing.T) {
	c := NewClock()
	var ran []int
	c.AfterFunc(time.Second, func() { ran = append(ran, 1) })
	c.AfterFunc(time.Second, func() { ran = append(ran, 2) })
	tm := c.Timer(2 * time.Second) // stops at 1 s, where the first ran
	defer tm.Stop()
	require.Equal(t, []int{1}, ran)
	c.Add(0)
	c.Add(-time.Second)
	assert.Equal(t, []int{1}, ran, "Add(0) and Add(-1s) run nothing")
	c.Add(time.Nanosecond)
	assert.Equal(t, []int{1, 2}, ran, "a move runs what is due")
}

func TestClockAfterFuncFiresWhenTimePassesIt(t *testing.T) {
	tests := []struct {
		name  string
		moves []time.Duration // Add
		fired bool
		at    time.Duration // clock when f ran, from start
	}{
		{"not yet", []time.Duration{4 * time.Second}, false, 0},
		{"exactly", []time.Duration{5 * time.Second}, true, 5 * time.Second},
		{"past, at its instant", []time.Duration{3 * time.Second, time.Hour}, true, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock()
			start := c.Now()
			var ranAt time.Duration
			fired := false
			c.AfterFunc(5*time.Second, func() { fired, ranAt = true, c.Since(start) })
			for _, d := range tt.moves {
				c.Add(d)
			}
			assert.Equal(t, tt.fired, fired)
			assert.Equal(t, tt.at, ranAt)
		})
	}
}

func TestClockAfterFuncStop(t *testing.T) {
	c := NewClock()
	fired := false
	tm := c.AfterFunc(time.Second, func() { fired = true })
	assert.True(t, tm.Stop(), "not run yet")
	c.Add(time.Hour)
	assert.False(t, fired)
	assert.False(t, tm.Stop())

	tm = c.AfterFunc(time.Second, func() { fired = true })
	c.Add(time.Second)
	assert.True(t, fired)
	assert.False(t, tm.Stop(), "it ran")
}

func TestClockAfterFuncOrder(t *testing.T) {
	c := NewClock()
	var order []int
	c.AfterFunc(3*time.Second, func() { order = append(order, 3) })
	c.AfterFunc(time.Second, func() { order = append(order, 1) })
	c.AfterFunc(3*time.Second, func() { order = append(order, 4) }) // same instant: in order of arrival
	c.AfterFunc(2*time.Second, func() {
		order = append(order, 2)
		c.AfterFunc(500*time.Millisecond, func() { order = append(order, 25) }) // set from a running function
	})
	c.Add(10 * time.Second)
	assert.Equal(t, []int{1, 2, 25, 3, 4}, order)
}

func TestClockAfterFuncNowRunsInRealTime(t *testing.T) {
	c := NewClock()
	done := make(chan struct{})
	c.AfterFunc(0, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("AfterFunc(0, f) did not run f")
	}
}

func TestClockTimerRunsDueFunctions(t *testing.T) {
	c := NewClock()
	start := c.Now()
	var ranAt time.Duration
	tm := c.AfterFunc(time.Second, func() {})
	tm.Stop() // a stopped function does not interrupt a wait
	c.AfterFunc(5*time.Second, func() { ranAt = c.Since(start) })
	tm2 := c.Timer(2 * time.Second)
	require.True(t, ready(tm2.C), "nothing ran within the wait")
	assert.Zero(t, ranAt)
	c.Sleep(4 * time.Second)
	assert.Equal(t, 5*time.Second, ranAt)
	assert.Equal(t, 6*time.Second, c.Since(start))
}

// A function due within a wait stops the wait at its instant: when it ends
// the waiting context, the waiter sees only that, with the rest unused.
func TestClockWaitInterruptedByCancel(t *testing.T) {
	for _, at := range []time.Duration{time.Second, 2 * time.Second} { // within, and at the very end
		t.Run(at.String(), func(t *testing.T) {
			c := NewClock()
			start := c.Now()
			ctx, cancel := context.WithCancel(context.Background())
			c.AfterFunc(at, cancel)
			tm := c.Timer(2 * time.Second)
			select {
			case <-tm.C:
				t.Fatal("the wait ended though its context was cancelled first")
			case <-ctx.Done():
				assert.True(t, tm.Stop(), "the rest of the wait had not passed")
			}
			assert.Equal(t, at, c.Since(start))
			assert.Equal(t, []time.Duration{2 * time.Second}, c.Waits())
		})
	}
}

// When the function that interrupted a wait did not end the waiter's
// context, the rest of the wait passes after interruptGrace of real time.
func TestClockWaitInterruptedGoesOn(t *testing.T) {
	defer func(g time.Duration) { interruptGrace = g }(interruptGrace)
	interruptGrace = 10 * time.Millisecond

	c := NewClock()
	start := c.Now()
	var (
		mu    sync.Mutex
		ranAt []time.Duration
	)
	record := func() {
		mu.Lock()
		defer mu.Unlock()
		ranAt = append(ranAt, c.Since(start))
	}
	ran := func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), ranAt...)
	}
	c.AfterFunc(time.Second, record)
	c.AfterFunc(1500*time.Millisecond, record) // runs on the real timer's goroutine
	tm := c.Timer(2 * time.Second)
	assert.Equal(t, start.Add(2*time.Second), <-tm.C)
	assert.Equal(t, []time.Duration{time.Second, 1500 * time.Millisecond}, ran())
	assert.Equal(t, 2*time.Second, c.Since(start))
}

func TestClockWithTimeout(t *testing.T) {
	c := NewClock()
	ctx, cancel := c.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, ok := ctx.Deadline()
	require.True(t, ok)
	assert.Equal(t, c.Now().Add(5*time.Second), d)
	c.Add(4 * time.Second)
	require.NoError(t, ctx.Err())
	c.Add(time.Second)
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	assert.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded)
	assert.True(t, ready(ctx.Done()))
}

func TestClockWithDeadline(t *testing.T) {
	c := NewClock()
	t.Run("past", func(t *testing.T) {
		ctx, cancel := c.WithDeadline(context.Background(), c.Now())
		defer cancel()
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	})
	t.Run("cancel first", func(t *testing.T) {
		ctx, cancel := c.WithDeadline(context.Background(), c.Now().Add(time.Second))
		cancel()
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
		c.Add(time.Hour)
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
	})
	t.Run("parent ends first", func(t *testing.T) {
		parent, cancelParent := context.WithCancel(context.Background())
		ctx, cancel := c.WithDeadline(parent, c.Now().Add(time.Second))
		defer cancel()
		cancelParent()
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
	})
	t.Run("parent's deadline is earlier", func(t *testing.T) {
		parent, cancelParent := c.WithTimeout(context.Background(), time.Second)
		defer cancelParent()
		ctx, cancel := c.WithDeadline(parent, c.Now().Add(time.Hour))
		defer cancel()
		d, _ := ctx.Deadline()
		assert.Equal(t, c.Now().Add(time.Second), d)
		c.Add(time.Second)
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	})
}

// Many goroutines wait, add, set and stop functions on one Clock: run with
// -race. Time only moves forward, and every wait is recorded.
func TestClockConcurrentUse(t *testing.T) {
	defer func(g time.Duration) { interruptGrace = g }(interruptGrace)
	interruptGrace = time.Millisecond // waits here are often interrupted by others' functions

	c := NewClock()
	start := c.Now()
	const n = 32
	var fired, expected atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := c.Now()
			for j := range 20 {
				switch j % 4 {
				case 0:
					<-c.Timer(time.Millisecond).C
				case 1:
					c.Sleep(time.Millisecond)
				case 2:
					tm := c.AfterFunc(time.Millisecond, func() { fired.Add(1) })
					if i%2 == 1 || !tm.Stop() { // false: another goroutine's move ran it first
						expected.Add(1)
					}
				case 3:
					c.Add(time.Millisecond)
				}
				now := c.Now()
				assert.False(t, now.Before(last), "time went back")
				last = now
				_ = c.Waits()
			}
		}()
	}
	wg.Wait()
	c.Add(time.Second) // anything still due
	assert.Len(t, c.Waits(), n*10)
	assert.Equal(t, expected.Load(), fired.Load(), "every function not stopped in time ran, once")
	assert.GreaterOrEqual(t, fired.Load(), int32(n/2*5))
	// Each goroutine's own waits and Adds follow one another; those of
	// different goroutines overlap.
	assert.GreaterOrEqual(t, c.Since(start), 15*time.Millisecond+time.Second)
	assert.LessOrEqual(t, c.Since(start), 15*n*time.Millisecond+time.Second)
}
