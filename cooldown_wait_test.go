package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCooldownWaitsFitAndAreCharged: every wait a Cooldown imposes, a hold
// or a slot, fits the deadline and the Budget or fails at once with
// ErrRateLimited, sending nothing; what is waited is charged.
func TestCooldownWaitsFitAndAreCharged(t *testing.T) {
	t.Run("slots: a queue longer than the Budget fails the calls it cannot serve, at once", slotsPastTheBudgetFailAtOnce)
	t.Run("a hold that does not fit the deadline sends nothing, with or without a Budget", holdPastTheDeadlineSendsNothing)
	t.Run("a hold equal to what is left does not fit", holdEqualToWhatIsLeftDoesNotFit)
	t.Run("a hold is charged, and canceled during it, refunded", holdChargedAndRefunded)
	t.Run("a slot free now is sent with nothing left to wait", slotFreeNowNeedsNoRoom)
	t.Run("a hold armed while a call waits must fit as well", laterHoldMustFit)
}

// laterHoldMustFit is a subtest of TestCooldownWaitsFitAndAreCharged: a
// call waiting for its slot when another call's 429 holds the key must fit
// the rest too; exactly what its deadline leaves does not fit (R7), and the
// call fails at once with ErrRateLimited, sending nothing.
func laterHoldMustFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		start := time.Now()
		var sent sync.WaitGroup
		sent.Add(1)
		limited := New(roundTripperFunc(func(*http.Request) (*http.Response, error) {
			sent.Done()
			time.Sleep(50 * time.Millisecond)
			return respond(429, "", "Retry-After-Ms", "300"), nil // at 50 ms: every call held to 350 ms
		}), WithCooldown(cd), WithMaxRetries(0))
		var tries int
		waiting := New(roundTripperFunc(func(*http.Request) (*http.Response, error) {
			tries++
			return respond(200, "ok"), nil
		}), WithCooldown(cd))
		paceAt(cd, start, 100*time.Millisecond)
		go func() {
			resp, err := limited.RoundTrip(getReq(context.Background()))
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}()
		sent.Wait() // the first slot is taken: the next is at 100 ms
		// At 100 ms the call must wait 300 ms more: all its deadline leaves.
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(400*time.Millisecond))
		defer cancel()
		resp, err := waiting.RoundTrip(getReq(ctx))
		require.Nil(t, resp)
		assert.ErrorIs(t, err, ErrRateLimited)
		assert.Equal(t, 100*time.Millisecond, time.Since(start), "it failed as it found the hold, without waiting it out")
		assert.Zero(t, tries, "nothing was sent")
	})
}

// slotFreeNowNeedsNoRoom is a subtest of TestCooldownWaitsFitAndAreCharged:
// a call on a paced key whose slot is free now waits nothing, so it is sent
// though its Budget has no room left (R7 fits waits, and this is none).
func slotFreeNowNeedsNoRoom(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(retryhttptest.Status(200)).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd))
	paceAt(cd, clk.Now(), time.Second)
	resp, err := tr.RoundTrip(getReq(WithBudget(context.Background(), NewBudget(0))))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 1, script.Len())
}

// slotsPastTheBudgetFailAtOnce is a subtest of TestCooldownWaitsFitAndAreCharged:
// slots: a queue longer than the Budget fails the calls it cannot serve, at once.
func slotsPastTheBudgetFailAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		script := retryhttptest.NewScript(retryhttptest.Status(200))
		tr := New(script, WithCooldown(cd))
		start := time.Now()
		paceAt(cd, start, time.Second)
		budget := NewBudget(3500 * time.Millisecond) // shared by the six calls: room for slots at 0, 1 and 2 s
		ctx := WithBudget(context.Background(), budget)
		type result struct {
			err   error
			after time.Duration
		}
		results := make([]result, 6)
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * time.Millisecond)
				resp, err := tr.RoundTrip(getReq(ctx))
				if err == nil {
					resp.Body.Close()
				}
				results[i] = result{err, time.Since(start) - time.Duration(i)*time.Millisecond}
			}()
		}
		wg.Wait()
		ok := 0
		for i, r := range results {
			if r.err == nil {
				ok++
				continue
			}
			var e *Error
			require.ErrorAs(t, r.err, &e, "call %d", i)
			assert.ErrorIs(t, r.err, ErrRateLimited)
			assert.Equal(t, OutOfTime, e.Reason)
			assert.Zero(t, r.after, "call %d failed at once, without waiting", i)
		}
		assert.Equal(t, 3, ok, "the slots at 0, 1 and 2 s fit (1 + 2 = 3 s charged)")
		assert.Equal(t, 3, script.Len(), "the others sent nothing")
		assert.Equal(t, 3*time.Second-3*time.Millisecond, budget.Waited(), "exactly what was waited")
		assert.Error(t, budget.Err())
	})
}

// holdPastTheDeadlineSendsNothing is a subtest of TestCooldownWaitsFitAndAreCharged:
// a hold that does not fit the deadline sends nothing, with or without a Budget.
func holdPastTheDeadlineSendsNothing(t *testing.T) {
	for _, withBudget := range []bool{false, true} {
		clk := newClock()
		cd := NewCooldown(nil)
		script := retryhttptest.NewScript(retryhttptest.Status(200)).WithClock(clk)
		tr := New(script, WithClock(clk), WithCooldown(cd))
		holdFor(cd, origin, clk.Now(), 30*time.Second)
		ctx, cancel := clk.WithTimeout(context.Background(), 10*time.Second)
		var budget *Budget
		if withBudget {
			budget = NewBudget(PublicTierMaxWait)
			ctx = WithBudget(ctx, budget)
		}
		resp, err := tr.RoundTrip(getReq(ctx))
		cancel()
		require.Nil(t, resp)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.ErrorIs(t, err, ErrRateLimited)
		assert.Equal(t, OutOfTime, e.Reason)
		assert.Equal(t, 30*time.Second, e.RetryAfter)
		assert.Zero(t, e.Tries)
		assert.Zero(t, script.Len(), "nothing was sent")
		assert.Empty(t, clk.Waits(), "nothing was slept")
		if withBudget {
			assert.Zero(t, budget.Waited())
			assert.Same(t, e, budget.Err(), "R20: the Budget remembers")
		}
	}
}

// holdEqualToWhatIsLeftDoesNotFit is a subtest of TestCooldownWaitsFitAndAreCharged:
// a hold equal to what is left does not fit.
func holdEqualToWhatIsLeftDoesNotFit(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	tr := New(retryhttptest.NewScript(retryhttptest.Status(200)), WithClock(clk), WithCooldown(cd))
	holdFor(cd, origin, clk.Now(), 10*time.Second)
	ctx, cancel := clk.WithTimeout(context.Background(), 10*time.Second)
	_, err := tr.RoundTrip(getReq(ctx))
	cancel() // (a deadline left pending on the kit's Clock would cut the next wait)
	assert.ErrorIs(t, err, ErrRateLimited)
	ctx2, cancel2 := clk.WithTimeout(context.Background(), 10*time.Second+time.Nanosecond)
	defer cancel2()
	resp, err := tr.RoundTrip(getReq(ctx2))
	require.NoError(t, err, "a nanosecond more fits")
	resp.Body.Close()
}

// holdChargedAndRefunded is a subtest of TestCooldownWaitsFitAndAreCharged:
// a hold is charged, and canceled during it, refunded.
func holdChargedAndRefunded(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(retryhttptest.Status(200)).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd))
	holdFor(cd, origin, clk.Now(), 4*time.Second)
	budget := NewBudget(PublicTierMaxWait)
	resp, err := tr.RoundTrip(getReq(WithBudget(context.Background(), budget)))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 4*time.Second, budget.Waited())

	holdFor(cd, origin, clk.Now(), 4*time.Second)
	budget = NewBudget(PublicTierMaxWait)
	ctx, cancel := context.WithCancel(WithBudget(context.Background(), budget))
	defer cancel()
	clk.AfterFunc(time.Second, cancel)
	resp, err = tr.RoundTrip(getReq(ctx))
	require.Nil(t, resp)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Canceled, e.Reason)
	assert.Equal(t, time.Second, e.Waited)
	assert.Equal(t, time.Second, budget.Waited(), "3 s given back")
	assert.Equal(t, 1, script.Len(), "the canceled call sent nothing")
}

// TestCooldownNeverHangsOnTheKitClock: a watched key whose tries fail in
// every way ends on the kit's Clock (the old Cooldown waited on a grace
// timer nothing moved when a call's own probe failed).
func TestCooldownNeverHangsOnTheKitClock(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(retryhttptest.Status(429), retryhttptest.Fail(errors.New("connection reset")),
		retryhttptest.Status(429), retryhttptest.Status(200)).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(5))
	done := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(getReq(context.Background()))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the call hangs")
	}
	assert.Equal(t, 4, script.Len())
}

// TestCooldownBasePanics: a base that panics leaves the Cooldown as it was:
// the next calls are paced as before (the old Cooldown leaked the send it
// counted in flight, and held its key for good).
func TestCooldownBasePanics(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	calls := 0
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		if calls++; calls == 1 {
			panic("base bug")
		}
		return respond(200, "ok"), nil
	})
	tr := New(base, WithClock(clk), WithCooldown(cd))
	paceAt(cd, clk.Now(), 100*time.Millisecond)
	require.Panics(t, func() { _, _ = tr.RoundTrip(getReq(context.Background())) })
	for range 3 {
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}, clk.Waits(), "a slot each, no more")
}

// TestCooldownQuietKeysGo: a key nobody calls again goes once it has
// nothing left to say, without anyone calling it; the other keys then pay
// one atomic load (the old Cooldown kept every key on its slow path for
// good; alloc_test.go counts the cost while a key is watched).
func TestCooldownQuietKeysGo(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	New(retryhttptest.NewScript(), WithClock(clk), WithCooldown(cd)) // binds the clock
	holdFor(cd, origin, clk.Now(), 2*time.Second)
	assert.Equal(t, 1, cd.size())
	clk.Add(pace.IdleAfter - time.Second)
	time.Sleep(sweepEvery + 100*time.Millisecond) // a sweep, in real time
	assert.Equal(t, 1, cd.size(), "not yet quiet")
	clk.Add(2 * time.Second)
	require.Eventually(t, func() bool { return cd.eng.Watched() == nil }, 3*sweepEvery, 10*time.Millisecond,
		"gone without anyone calling it")
}

// TestCooldownMemoryBounded: at most 4096 keys are watched; a key that
// cannot be is simply not shared; keys gone quiet make room.
func TestCooldownMemoryBounded(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	cd.bind(clk, nil)
	for i := range 3 * maxCoolingKeys {
		holdFor(cd, fmt.Sprintf("https://h%d.example.com", i), clk.Now(), time.Hour)
	}
	assert.Equal(t, maxCoolingKeys, cd.size())
	clk.Add(2 * time.Hour) // every hold is over and quiet: the next key makes room
	require.NotNil(t, cd.watch("https://one-more.example.com", cd.now()))
	assert.Equal(t, 1, cd.size())

	// Full, a new key looks for room at most once a second: a second after
	// it last looked, it looks again.
	for i := range maxCoolingKeys - 1 {
		require.NotNil(t, cd.watch(fmt.Sprintf("https://k%d.example.com", i), cd.now()))
	}
	armed := clk.Now()
	clk.Add(pace.IdleAfter - time.Second/2)
	assert.Nil(t, cd.watch("https://late.example.com", cd.now()), "full, none quiet yet")
	clk.Add(sweepEvery - time.Nanosecond) // every key quiet now, but looked less than a second ago
	require.True(t, clk.Now().Sub(armed) >= pace.IdleAfter)
	assert.Nil(t, cd.watch("https://late.example.com", cd.now()), "looked over less than a second ago")
	clk.Add(time.Nanosecond)
	assert.NotNil(t, cd.watch("https://late.example.com", cd.now()), "a second on, it looks again and finds room")
	cd.Reset()
	for i := range 100 {
		require.NotNil(t, cd.watch(fmt.Sprintf("https://new%d.example.com", i), cd.now()))
	}
	assert.Equal(t, 100, cd.size())
}
