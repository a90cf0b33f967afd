package store

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 29, item 7(b): Local's map grew without bound. It drops a key once
// the key's Record Expires (KeepFor past its latest time), looked over at
// most once a sweepEvery of its clock, by the next Apply.

// movingClock is a clock a test moves.
type movingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *movingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *movingClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestHardeningLocalDropsExpiredKeys: 1,000 keys held a second, and one
// held 10 minutes; a read of a key it does not keep makes none. Once each
// has Expired, the next Apply after a sweepEvery drops it, and a key
// dropped and made again starts from nothing, its Seq still growing.
func TestHardeningLocalDropsExpiredKeys(t *testing.T) {
	clk := &movingClock{now: epoch}
	s := NewLocal(clk.Now)
	ctx := context.Background()
	hold := func(key string, d time.Duration) State {
		t.Helper()
		st, err := s.Apply(ctx, key, []Op{{Kind: OpHold, For: d}})
		require.NoError(t, err)
		return st
	}
	for i := range 1000 {
		hold("k"+strconv.Itoa(i), time.Second)
	}
	long := hold("long", 10*time.Minute)
	_, err := s.Apply(ctx, "never", nil)
	require.NoError(t, err)
	require.Equal(t, 1001, s.Len(), "a read makes no key")

	for _, step := range []struct {
		after time.Duration // since epoch
		keys  int           // kept after an Apply to "long" then
	}{
		{KeepFor, 1001},                         // a second held and KeepFor: not yet
		{KeepFor + time.Second + sweepEvery, 1}, // the 1,000 expired
		{10*time.Minute + KeepFor - time.Second, 1},
	} {
		clk.add(epoch.Add(step.after).Sub(clk.Now()))
		_, err := s.Apply(ctx, "long", []Op{{Kind: OpLimited}})
		require.NoError(t, err)
		assert.Equal(t, step.keys, s.Len(), "at %v", step.after)
	}
	// The long one, limited last at 10 min + KeepFor - 1 s, expires a
	// KeepFor after that.
	clk.add(KeepFor + 2*sweepEvery)
	st := hold("k0", time.Second)
	assert.Equal(t, 1, s.Len(), "the long one went too")
	assert.Greater(t, st.Seq, long.Seq, "a key made again: Seq grows")
	assert.Equal(t, clk.Now().Add(time.Second), st.Lane(0).Until, "from nothing")
}
