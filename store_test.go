package retryhttp

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoreApply: the in-process Store applies ops in order, atomically;
// a rates op over an old version is left out and says so; ops out of range
// are left out or read as 0; Seq grows with each Apply, past the clock.
func TestStoreApply(t *testing.T) {
	clk := retryhttptest.NewClock()
	s := NewLocalStore(clk)
	ctx := context.Background()
	st, err := s.Apply(ctx, "k", nil)
	require.NoError(t, err)
	assert.Zero(t, st.Seq, "nothing of the key: no state")

	st, _ = s.Apply(ctx, "k", []StoreOp{
		{Kind: StoreRates, Lane: 0, Version: 0, Per: float64(100 * ms), Rates: "r1"},
		{Kind: StoreHold, Lane: 0, For: time.Second},
		{Kind: StoreTake, Costs: [4]float64{1}, Within: maxDuration},
	})
	assert.Equal(t, time.Second, st.Wait, "the take after the hold, in the same Apply")
	assert.True(t, st.Took)
	assert.Equal(t, uint64(1), st.Lanes[0].Version)
	assert.GreaterOrEqual(t, st.Seq, uint64(clk.Now().UnixNano()), "Seq is at least the clock")
	seq := st.Seq

	st, _ = s.Apply(ctx, "k", []StoreOp{{Kind: StoreRates, Lane: 0, Version: 0, Per: float64(ms), Rates: "stale"}})
	assert.True(t, st.Stale, "a rates op over an old version is left out")
	assert.Equal(t, "r1", st.Lanes[0].Rates)
	assert.Greater(t, st.Seq, seq)

	st, _ = s.Apply(ctx, "k", []StoreOp{
		{Kind: StoreHold, Lane: 7, For: time.Hour}, {Kind: StoreHold, Lane: -1, For: time.Hour},
		{Kind: StoreTake, Costs: [4]float64{math.NaN(), math.Inf(1), -5, 0}, Within: maxDuration},
		{Kind: StoreRates, Lane: 1, Version: 0, Per: math.NaN(), Burst: -1},
	})
	assert.True(t, st.Took, "NaN, infinite and negative costs count 0: nothing to wait for")
	assert.Zero(t, st.Wait)
	assert.Zero(t, st.Lanes[1].Per, "a NaN rate is 0")
	assert.Zero(t, st.Lanes[1].Burst)
	for l := range st.Lanes {
		assert.False(t, st.Lanes[l].Until.After(clk.Now().Add(2*time.Second)), "lanes out of range are left out")
	}

	ms := s.(*memStore)
	ms.forget("k")
	st, _ = s.Apply(ctx, "k", nil)
	assert.Zero(t, st.Seq, "forgotten")
}

// failingStore is a Store that fails every Apply, as a Redis gone does.
type failingStore struct{ applies atomic.Int64 }

func (f *failingStore) Apply(context.Context, string, []StoreOp) (StoreState, error) {
	f.applies.Add(1)
	return StoreState{}, errors.New("store down")
}
func (f *failingStore) Listen(func(string, StoreState)) func() { return func() {} }

// TestStoreFailingIsNotTheProviderFailing: with a Store that fails every
// op, a Cooldown goes on with what its process knows (R24): no call fails,
// and the key is still held and paced.
func TestStoreFailingIsNotTheProviderFailing(t *testing.T) {
	clk := retryhttptest.NewClock()
	store := &failingStore{}
	cd := NewCooldown(nil, WithStore(store))
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
	assert.Equal(t, []time.Duration{2 * time.Second, firstInterval, time.Duration(float64(firstInterval) * rampGrow)}, clk.Waits())
	assert.Positive(t, store.applies.Load(), "the Store was asked")
	s, _ := originLane(cd)
	assert.Positive(t, s.Per, "paced on its own")
}

// skewedStore is the in-process Store on a clock of its own, an hour
// ahead of the Cooldown's, as a Redis whose clock disagrees is; it counts
// its Applies.
type skewedStore struct {
	Store
	applies atomic.Int64
}

func (s *skewedStore) Apply(ctx context.Context, key string, ops []StoreOp) (StoreState, error) {
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
	clk := retryhttptest.NewClock()
	store := &skewedStore{Store: NewLocalStore(offsetClock{clk, time.Hour})}
	a, b := NewCooldown(nil, WithStore(store)), NewCooldown(nil, WithStore(store))
	script := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "20"), retryhttptest.Status(200)).WithClock(clk)
	ta := New(script, WithClock(clk), WithCooldown(a), WithMaxRetries(0))
	tb := New(script, WithClock(clk), WithCooldown(b))
	resp, err := ta.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 429, resp.StatusCode)

	// b has not heard of the key (the in-process Store pushes nothing):
	// its first call goes, gets the key armed, and holds the next.
	b.heardElsewhere("https://api.example.com", mustApply(t, store, nil))
	assert.Equal(t, clk.Now().Add(20*time.Second), b.Until(origin), "the hold, on b's clock")
	before := store.applies.Load()
	resp, err = tb.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []time.Duration{20 * time.Second}, clk.Waits(), "held exactly, across the clocks")
	assert.Equal(t, int64(1), store.applies.Load()-before, "a paced send is one Apply")
}

func mustApply(t *testing.T, s Store, ops []StoreOp) StoreState {
	t.Helper()
	st, err := s.Apply(context.Background(), origin, ops)
	require.NoError(t, err)
	return st
}

// TestStoreConcurrentApplies: Applies of many goroutines to one key are
// atomic: every take is given a slot of its own, one per interval.
func TestStoreConcurrentApplies(t *testing.T) {
	clk := retryhttptest.NewClock()
	s := NewLocalStore(clk)
	mustApply(t, s, []StoreOp{{Kind: StoreRates, Lane: 0, Per: float64(ms), Rates: "r"}})
	var mu sync.Mutex
	waits := map[time.Duration]bool{}
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			st := mustApply(t, s, []StoreOp{{Kind: StoreTake, Costs: [4]float64{1}, Within: maxDuration}})
			mu.Lock()
			waits[st.Wait] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Len(t, waits, 100, "a slot each")
}
