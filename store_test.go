package retryhttp

import (
	"context"
	"errors"
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
	clk := retryhttptest.NewClock()
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
	clk := retryhttptest.NewClock()
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
