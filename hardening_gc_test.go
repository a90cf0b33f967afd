package retryhttp

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 29, item 7(a): a Cooldown on a shared Store was never garbage
// collected: the Store held its listener, and the listener the Cooldown
// (Listen's stop was thrown away). A Cooldown per test or per tenant
// leaked. The listener now holds it weakly, and its collection, or Close,
// stops the listener.

// listenCounter is a Store that counts its live listeners.
type listenCounter struct {
	store.Store
	live atomic.Int64
}

func (s *listenCounter) Listen(f func(string, store.State)) func() {
	s.live.Add(1)
	stop := s.Store.Listen(f)
	var once sync.Once
	return func() { once.Do(func() { stop(); s.live.Add(-1) }) }
}

// collected runs the garbage collector until s has no live listener, a
// bounded number of times, and reports whether it got there.
func collected(s *listenCounter) bool {
	for range 100 {
		if s.live.Load() == 0 {
			return true
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // the cleanups run on a goroutine of their own
	}
	return s.live.Load() == 0
}

// TestHardeningCooldownIsCollected: a Cooldown on a shared Store that
// nothing reaches any more (alone, or with the Transport that used it) is
// collected, which stops its listener; Close stops it too, once, and the
// Cooldown still works.
func TestHardeningCooldownIsCollected(t *testing.T) {
	for _, tc := range []struct {
		name string
		use  func(cd *Cooldown)
	}{
		{"made and dropped", func(*Cooldown) {}},
		{"used by a Transport", func(cd *Cooldown) {
			tr := New(retryhttptest.NewScript(okReply), WithCooldown(cd))
			resp, err := tr.RoundTrip(getReq(context.Background()))
			if err == nil {
				resp.Body.Close()
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &listenCounter{Store: store.NewLocal(nil)}
			func() {
				cd := NewCooldown(nil, WithStore(s))
				tc.use(cd)
			}()
			require.Equal(t, int64(1), s.live.Load(), "listening while reachable")
			assert.True(t, collected(s), "collected, its listener stopped")
		})
	}
	t.Run("Close", func(t *testing.T) {
		clk := newClock()
		s := &listenCounter{Store: store.NewLocal(clk.Now)}
		cd := NewCooldown(nil, WithStore(s))
		require.Equal(t, int64(1), s.live.Load())
		require.NoError(t, cd.Close())
		assert.Zero(t, s.live.Load(), "Close stops the listener")
		require.NoError(t, cd.Close(), "twice")
		assert.Zero(t, s.live.Load())
		tr := New(retryhttptest.NewScript(reply(429, "Retry-After", "2"), okReply).WithClock(clk), WithClock(clk), WithCooldown(cd))
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []time.Duration{2 * time.Second}, clk.Waits(), "it still works, on what its process hears")
		runtime.KeepAlive(cd)
	})
}
