package retryhttp

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 29, item 2: a Cooldown writes back to its Store only the holds it
// armed on its own answers, bounded by pace.MaxHold and by the hold's own
// length, and only where the Store has none: a hold planted in the Store
// survived every flush, holds copied back and forth crept later and were
// published again and again, and a replica whose clock stepped back held
// the fleet an hour.

// storeHold is the hold of origin's request lane in s, on s's clock, and
// s's now.
func storeHold(t *testing.T, s store.Store) (until, now time.Time) {
	t.Helper()
	st, err := s.Apply(context.Background(), origin, nil)
	require.NoError(t, err)
	return st.Lane(laneRequests).Until, st.Now
}

// takeThenCancel makes one call on tr that fits a hold (its deadline a
// minute away), so that it takes its slot from the Store, and cancels it 1
// ms into its wait: an op of the process that sends nothing. (A call that
// does not fit a hold its process knows of is refused with no op.)
func takeThenCancel(t *testing.T, clk *retryhttptest.Clock, tr *Transport) {
	t.Helper()
	ctx, cancel := clk.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk.AfterFunc(time.Millisecond, cancel)
	resp, err := tr.RoundTrip(getReq(ctx))
	if err == nil {
		resp.Body.Close()
	}
}

// storeLeft is what is left of origin's request hold on s, as of its now:
// 0 or less when none. (The Store's times are its own: store.Local's
// clock is the test's moved into the range a Record holds.)
func storeLeft(t *testing.T, s store.Store) time.Duration {
	t.Helper()
	until, now := storeHold(t, s)
	if until.IsZero() {
		return 0
	}
	return until.Sub(now)
}

// call makes one call on tr within d, and returns its error and how long
// the Cooldown held it.
func callWithin(t *testing.T, clk *retryhttptest.Clock, tr *Transport, d time.Duration) (time.Duration, error) {
	t.Helper()
	ctx, cancel := clk.WithTimeout(context.Background(), d)
	defer cancel()
	var held time.Duration
	ctx = withObserved(ctx, &held)
	resp, err := tr.RoundTrip(getReq(ctx))
	if err == nil {
		resp.Body.Close()
	}
	return held, err
}

type heldKey struct{}

func withObserved(ctx context.Context, held *time.Duration) context.Context {
	return context.WithValue(ctx, heldKey{}, held)
}

// observeHeld is an Observer that adds each try's Held to the call's
// (withObserved).
func observeHeld(ctx context.Context, a Attempt) {
	if p, ok := ctx.Value(heldKey{}).(*time.Duration); ok {
		*p += a.Held
	}
}

// TestHardeningPlantedHoldIsNothing: a Record planted in the Store with a
// hold 10 hours ahead (refusing or not), or out of range otherwise, or
// bytes that do not decode, is read as nothing: 6 of 6 calls go at the
// key's pace, and after the Store is flushed nothing of it comes back. A
// push of such a hold arms nothing.
func TestHardeningPlantedHoldIsNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(now time.Time) []byte
	}{
		{"a hold 10 h ahead", func(now time.Time) []byte {
			return encoded(store.Record{Seq: 1, Lanes: []store.Lane{{Until: now.Add(10 * time.Hour)}}})
		}},
		{"a refusing hold 10 h ahead", func(now time.Time) []byte {
			return encoded(store.Record{Seq: 1, Lanes: []store.Lane{{Until: now.Add(10 * time.Hour), Refuse: true}}})
		}},
		{"a Per of 1e300", func(now time.Time) []byte {
			return encoded(store.Record{Seq: 1, Lanes: []store.Lane{{Per: 1e300, Next: now.Add(time.Minute)}}})
		}},
		{"bytes that do not decode", func(time.Time) []byte { return []byte("r3 junk") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			local := store.NewLocal(clk.Now)
			cd := NewCooldown(nil, WithStore(local))
			tr := New(retryhttptest.NewScript(okReply).WithClock(clk), WithClock(clk), WithCooldown(cd), WithObserver(observeHeld))
			paceAt(cd, clk.Now(), time.Millisecond) // watched: every call takes its slot from the Store
			require.NoError(t, local.Plant(origin, tc.plant(clk.Now())))
			for i := range 6 {
				held, err := callWithin(t, clk, tr, time.Second)
				require.NoError(t, err, "call %d goes", i)
				assert.Less(t, held, time.Second, "call %d", i)
			}
			assert.False(t, cd.Until(origin).After(clk.Now().Add(pace.MaxHold)), "no hold past pace.MaxHold")
			local.Reset()
			for range 6 {
				_, err := callWithin(t, clk, tr, time.Second)
				require.NoError(t, err)
			}
			assert.LessOrEqual(t, storeLeft(t, local), time.Duration(0), "nothing of it written back after a flush")
		})
	}
	t.Run("pushed", func(t *testing.T) {
		clk := newClock()
		cd := NewCooldown(nil, WithStore(store.NewLocal(clk.Now)))
		tr := New(retryhttptest.NewScript(okReply).WithClock(clk), WithClock(clk), WithCooldown(cd))
		now := clk.Now()
		cd.push(origin, store.State{Now: now, Record: store.Record{Seq: 1, Lanes: []store.Lane{{Until: now.Add(10 * time.Hour), Refuse: true}}}})
		assert.Zero(t, cd.size(), "nothing armed")
		for range 6 {
			resp, err := tr.RoundTrip(getReq(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Empty(t, clk.Waits())
	})
}

func encoded(r store.Record) []byte {
	b, _ := r.MarshalBinary()
	return b
}

// TestHardeningHeardHoldIsNotRestored: a hold this process only heard of
// (another replica's, by a push; or a push alone) that the Store then
// loses is not written back by it; the replica that armed it writes it
// back, for what is left of it.
func TestHardeningHeardHoldIsNotRestored(t *testing.T) {
	t.Run("another replica's", func(t *testing.T) {
		clk := newClock()
		local := store.NewLocal(clk.Now)
		a, b := NewCooldown(nil, WithStore(local)), NewCooldown(nil, WithStore(local))
		trA := New(retryhttptest.NewScript(reply(429, "Retry-After", "20"), okReply).WithClock(clk), WithClock(clk), WithCooldown(a), WithMaxRetries(0))
		trB := New(retryhttptest.NewScript(okReply).WithClock(clk), WithClock(clk), WithCooldown(b), WithMaxRetries(0))
		armed := clk.Now()
		resp, err := trA.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, armed.Add(20*time.Second), b.Until(origin), "b heard it")

		local.Reset()
		for range 3 {
			_, _ = callWithin(t, clk, trB, time.Millisecond) // (a wait never fits: the clock stays)
		}
		assert.LessOrEqual(t, storeLeft(t, local), time.Duration(0), "b wrote back no hold it did not arm")

		takeThenCancel(t, clk, trA) // a's op hears the loss, and writes its own hold back at once
		assert.Equal(t, armed.Add(20*time.Second).Sub(clk.Now()), storeLeft(t, local), "a wrote its own back, to the instant it armed")
	})
	t.Run("a push alone", func(t *testing.T) {
		clk := newClock()
		local := store.NewLocal(clk.Now)
		c := NewCooldown(nil, WithStore(local))
		tr := New(retryhttptest.NewScript(okReply).WithClock(clk), WithClock(clk), WithCooldown(c))
		st, err := local.Apply(context.Background(), origin, nil) // the Store's now: its clock is its own
		require.NoError(t, err)
		now := st.Now
		c.push(origin, store.State{Now: now, Record: store.Record{Seq: uint64(now.UnixMicro()),
			Lanes: []store.Lane{{Until: now.Add(20 * time.Second), Limited: now}}}})
		require.Equal(t, clk.Now().Add(20*time.Second), c.Until(origin))
		for range 3 { // the Store never had it: each take says no hold
			_, _ = callWithin(t, clk, tr, time.Millisecond) // (a wait never fits: the clock stays)
		}
		assert.LessOrEqual(t, storeLeft(t, local), time.Duration(0), "not written to the Store")
	})
}

// jumpClock is a clock that can step: its Now is the clock's plus by.
type jumpClock struct {
	clock.Clock
	by atomic.Int64
}

func (c *jumpClock) Now() time.Time { return c.Clock.Now().Add(time.Duration(c.by.Load())) }

// TestHardeningClockStepBack: a replica armed a 20 s hold, then its clock
// stepped back an hour; whether the Store kept the hold, lost it before
// the step, or lost it after, the fleet holds no longer than the 20 s:
// the other replica's call goes by then, and the Store's hold ends then.
func TestHardeningClockStepBack(t *testing.T) {
	for _, lost := range []string{"kept", "lost before the step", "lost after the step"} {
		t.Run(lost, func(t *testing.T) {
			clk := newClock()
			local := store.NewLocal(clk.Now)
			jc := &jumpClock{Clock: clk}
			a, b := NewCooldown(nil, WithStore(local)), NewCooldown(nil, WithStore(local))
			trA := New(retryhttptest.NewScript(reply(429, "Retry-After", "20"), okReply).WithClock(clk), WithClock(jc), WithCooldown(a), WithMaxRetries(0))
			trB := New(retryhttptest.NewScript(okReply).WithClock(clk), WithClock(clk), WithCooldown(b), WithObserver(observeHeld))
			armed := clk.Now()
			resp, err := trA.RoundTrip(getReq(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
			end := armed.Add(20 * time.Second)
			clk.Add(5 * time.Second) // 15 s left

			if lost == "lost before the step" {
				local.Reset()
				takeThenCancel(t, clk, trA) // hears the loss: its hold goes back at once
			}
			jc.by.Store(int64(-time.Hour))
			if lost == "lost after the step" {
				local.Reset()
			}
			for range 3 {
				takeThenCancel(t, clk, trA)
			}
			left, want := storeLeft(t, local), end.Sub(clk.Now())
			assert.LessOrEqual(t, left, want, "the Store holds no longer than the hold")
			assert.InDelta(t, want, left, float64(time.Millisecond), "a's own hold, kept or written back, to its end")
			held, err := callWithin(t, clk, trB, time.Hour)
			require.NoError(t, err)
			assert.LessOrEqual(t, held, want, "the other replica waits no longer")
		})
	}
}

// latencyStore is a Store a round trip away: each Apply waits before it
// reaches the Store and after, the wait after changing from one Apply to
// the next (a network's jitter), in a testing/synctest bubble's time.
type latencyStore struct {
	store.Store
	n atomic.Int64
}

func (s *latencyStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	n := s.n.Add(1)
	time.Sleep(time.Millisecond)
	st, err := s.Store.Apply(ctx, key, ops)
	time.Sleep(time.Duration(n%4) * time.Millisecond)
	return st, err
}

// TestHardeningHoldDoesNotCreep: a 3 s hold among 3 replicas sharing a
// Store a jittery round trip away, each calling all through it (calls with
// a deadline of 100 ms, which fail at once while it holds, and call
// again): the hold is published once (the issue: 106 to 299 times), and the Store's hold
// stays where the arming put it (it crept 145 to 329 ms).
func TestHardeningHoldDoesNotCreep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		local := store.NewLocal(nil)
		var mu sync.Mutex
		var heard []time.Time // each delivery's hold of the request lane
		stop := local.Listen(func(_ string, st store.State) {
			mu.Lock()
			heard = append(heard, st.Lane(laneRequests).Until)
			mu.Unlock()
		})
		defer stop()
		s := &latencyStore{Store: local}
		var trs []*Transport
		for i := range 3 {
			rs := []retryhttptest.Reply{okReply}
			if i == 0 {
				rs = []retryhttptest.Reply{reply(429, "Retry-After", "3"), okReply}
			}
			cd := NewCooldown(nil, WithStore(s))
			defer cd.Close()
			trs = append(trs, New(retryhttptest.NewScript(rs...), WithCooldown(cd), WithMaxRetries(0)))
		}
		resp, err := trs[0].RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, heard, 1, "the hold, published")
		first := heard[0]
		end := time.Now().Add(4 * time.Second)
		var wg sync.WaitGroup
		for _, tr := range trs {
			for range 2 {
				wg.Go(func() {
					for time.Now().Before(end) {
						ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond) // the hold does not fit: it fails at once, and calls again
						if resp, err := tr.RoundTrip(getReq(ctx)); err == nil {
							resp.Body.Close()
						}
						cancel()
						time.Sleep(10 * time.Millisecond)
					}
				})
			}
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, 1, len(heard), "published once, never again")
		until, _ := storeHold(t, local)
		assert.Equal(t, first, until, "the Store's hold did not creep (%v later)", until.Sub(first))
	})
}
