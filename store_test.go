package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingStore is a Store that fails every Apply, as a Redis gone does.
type failingStore struct{ applies atomic.Int64 }

func (f *failingStore) Apply(context.Context, string, []store.Op) (store.State, error) {
	f.applies.Add(1)
	return store.State{}, errors.New("store down")
}
func (f *failingStore) Listen(func(string, store.State)) func() { return func() {} }

// TestStoreFailingIsNotTheProviderFailing: with a Store that fails every
// op, a Cooldown goes on with what its process knows (R24): no call fails,
// and the key is still held and paced.
func TestStoreFailingIsNotTheProviderFailing(t *testing.T) {
	clk := newClock()
	fs := &failingStore{}
	cd := NewCooldown(nil, WithStore(fs))
	script := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "2"), retryhttptest.Status(200)).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd))
	for range 3 {
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
	}
	// The hold, then the slots at the learned pace (its first guess, grown
	// 2% by a success), from the process's own state.
	assert.Equal(t, []time.Duration{2 * time.Second, pace.FirstInterval, time.Duration(float64(pace.FirstInterval) * pace.RampGrow)}, clk.Waits())
	assert.Positive(t, fs.applies.Load(), "the Store was asked")
	s, _ := originLane(cd)
	assert.Positive(t, s.Per, "paced on its own")
}

// skewedStore is the in-process Store on a clock of its own, an hour
// ahead of the Cooldown's, as a Redis whose clock disagrees is; it counts
// its Applies.
type skewedStore struct {
	store.Store
	applies atomic.Int64
}

func (s *skewedStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	s.applies.Add(1)
	return s.Store.Apply(ctx, key, ops)
}

type offsetClock struct {
	clock.Clock
	d time.Duration
}

func (c offsetClock) Now() time.Time { return c.Clock.Now().Add(c.d) }

// TestStoreSharedOnAnotherClock: two Cooldowns share a Store whose clock is
// an hour off theirs; each converts the Store's times to its own (R24), so
// a hold armed by one holds the other's calls exactly, and a paced send is
// one Apply: the news of its answer go with the next take.
func TestStoreSharedOnAnotherClock(t *testing.T) {
	clk := newClock()
	sk := &skewedStore{Store: store.NewLocal(offsetClock{clk, time.Hour}.Now)}
	a, b := NewCooldown(nil, WithStore(sk)), NewCooldown(nil, WithStore(sk))
	script := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "20"), retryhttptest.Status(200)).WithClock(clk)
	ta := New(script, WithClock(clk), WithCooldown(a), WithMaxRetries(0))
	tb := New(script, WithClock(clk), WithCooldown(b))
	resp, err := ta.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 429, resp.StatusCode)

	// b heard of the key by the Store's push, and holds its call.
	assert.Equal(t, clk.Now().Add(20*time.Second), b.Until(origin), "the hold, on b's clock")
	before := sk.applies.Load()
	resp, err = tb.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []time.Duration{20 * time.Second}, clk.Waits(), "held exactly, across the clocks")
	assert.Equal(t, int64(1), sk.applies.Load()-before, "a paced send is one Apply")
}

// skewedLocal is a store.Local whose clock is clk's plus skew: a Store
// whose times, moved onto a process's clock, carry nanoseconds.
func skewedLocal(clk *retryhttptest.Clock, skew time.Duration) *store.Local {
	return store.NewLocal(func() time.Time { return clk.Now().Add(skew) })
}

// TestStoreFalteringKeepsWhatTheFleetSaid: what the process last heard from
// the fleet stays its state while the Store fails (R24): a fleet's 20 s
// hold is still waited, and an open circuit still refuses, whatever the
// skew between the Store's clock and the process's (an offset with
// nanoseconds once made the state junk to the process's own Apply).
func TestStoreFalteringKeepsWhatTheFleetSaid(t *testing.T) {
	for _, skew := range []time.Duration{0, 1234567 * time.Nanosecond, -time.Hour - 999*time.Nanosecond} {
		t.Run(fmt.Sprint("skew ", skew), func(t *testing.T) {
			clk := newClock()
			clk.Add(777) // the process's clock has nanoseconds, as a real one has
			fs := &flakyStore{Local: skewedLocal(clk, skew)}
			log, logs := logSink()
			circuit := WithCircuit(Circuit{Failures: 2, Open: time.Minute})
			a := NewCooldown(nil, WithStore(fs), circuit)
			b := NewCooldown(nil, WithStore(fs), circuit)
			a.setProcess(1) // two processes (one Store value in one process is one)
			b.setProcess(2)
			defer a.Close()
			defer b.Close()
			trA := New(retryhttptest.NewScript(reply(429, "Retry-After", "20"), reply(503)).WithClock(clk), WithClock(clk), WithCooldown(a), WithMaxRetries(0))
			scriptB := retryhttptest.NewScript(reply(503), okReply).WithClock(clk)
			trB := New(scriptB, WithClock(clk), WithCooldown(b), WithMaxRetries(0), WithLogger(log))
			closeResp(trA.RoundTrip(getReq(context.Background())))
			require.WithinDuration(t, clk.Now().Add(20*time.Second), b.Until(origin), time.Millisecond, "b heard the fleet's hold")

			fs.down.Store(true)
			clk.Add(time.Millisecond)
			_, err := trB.RoundTrip(getReq(WithBudget(context.Background(), NewBudget(time.Second))))
			assert.ErrorIs(t, err, ErrRateLimited, "the hold b heard still holds it")
			assert.Zero(t, scriptB.Len(), "b sent nothing")

			fs.down.Store(false)
			clk.Add(20 * time.Second)
			closeResp(trA.RoundTrip(getReq(context.Background())))
			closeResp(trB.RoundTrip(getReq(context.Background())))
			require.True(t, b.Down(origin), "two processes' failures opened the fleet's circuit")
			fs.down.Store(true)
			for range 3 {
				clk.Add(time.Second)
				_, err := trB.RoundTrip(getReq(context.Background()))
				assert.ErrorIs(t, err, ErrUnavailable, "the Store failing, b still refuses")
			}
			assert.Equal(t, 1, scriptB.Len())
			assert.Zero(t, logs.FilterMessage(msgCircuitClosed).Len(), "and never logs it closed")
		})
	}
}

func closeResp(resp *http.Response, err error) {
	if err == nil {
		resp.Body.Close()
	}
}
