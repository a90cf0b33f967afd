package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strings"
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
	"go.uber.org/zap/zapcore"
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

// a Cooldown writes back to its Store only the holds it
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

// TestPlantedHoldIsNothing: a Record planted in the Store with a
// hold 10 hours ahead (refusing or not), or out of range otherwise, or
// bytes that do not decode, is read as nothing: 6 of 6 calls go at the
// key's pace, and after the Store is flushed nothing of it comes back. A
// push of such a hold arms nothing.
func TestPlantedHoldIsNothing(t *testing.T) {
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

// TestHeardHoldIsNotRestored: a hold this process only heard of
// (another replica's, by a push; or a push alone) that the Store then
// loses is not written back by it; the replica that armed it writes it
// back, for what is left of it.
func TestHeardHoldIsNotRestored(t *testing.T) {
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

// TestClockStepBack: a replica armed a 20 s hold, then its clock
// stepped back an hour; whether the Store kept the hold, lost it before
// the step, or lost it after, the fleet holds no longer than the 20 s:
// the other replica's call goes by then, and the Store's hold ends then.
func TestClockStepBack(t *testing.T) {
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

// TestHoldDoesNotCreep: a 3 s hold among 3 replicas sharing a
// Store a jittery round trip away, each calling all through it (calls with
// a deadline of 100 ms, which fail at once while it holds, and call
// again): the hold is published once (the issue: 106 to 299 times), and the Store's hold
// stays where the arming put it (it crept 145 to 329 ms).
func TestHoldDoesNotCreep(t *testing.T) {
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

// a Store's reply, or push, that cannot be true
// (a Record out of range, a take that did not do what it was asked, a zero
// now, a Seq no Store gives) is read as the Store failing: the Cooldown
// goes on with its own state. A Store is shared with every process that
// can reach it, and one bad reply must not shut a key for centuries.

// editStore is a Store whose replies edit changes, and whose pushes push
// changes: a Store that lies. Nil edits nothing.
type editStore struct {
	store.Store
	edit, push func(*store.State)
}

func (s *editStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	st, err := s.Store.Apply(ctx, key, ops)
	if err == nil && s.edit != nil {
		s.edit(&st)
	}
	return st, err
}

func (s *editStore) Listen(f func(string, store.State)) func() {
	return s.Store.Listen(func(key string, st store.State) {
		if s.push != nil {
			s.push(&st)
		}
		f(key, st)
	})
}

var year2255 = time.Date(2255, 1, 1, 0, 0, 0, 0, time.UTC)

// badReplies are the lies, each on every lane a Record has.
var badReplies = []struct {
	name string
	edit func(*store.State)
}{
	{"Per 1e300", func(st *store.State) {
		eachLane(st, func(s *store.Lane) { s.Per, s.Next = 1e300, st.Now.Add(time.Minute) })
	}},
	{"a refusing hold at year 2255", func(st *store.State) { eachLane(st, func(s *store.Lane) { s.Until, s.Refuse = year2255, true }) }},
	{"a schedule at year 2255", func(st *store.State) { eachLane(st, func(s *store.Lane) { s.Next = year2255 }) }},
	{"Rates of 8 MiB", func(st *store.State) { eachLane(st, func(s *store.Lane) { s.Rates = strings.Repeat("r", 8<<20) }) }},
	{"a take of 10 h", func(st *store.State) {
		if st.Took {
			st.Wait = 10 * time.Hour
		}
	}},
	{"a negative wait", func(st *store.State) { st.Wait = -time.Hour }},
	{"a zero now", func(st *store.State) { st.Now = time.Time{} }},
	{"a Seq of 2^64-1", func(st *store.State) { st.Seq = math.MaxUint64 }},
}

func eachLane(st *store.State, f func(*store.Lane)) {
	if len(st.Lanes) == 0 {
		st.Lanes = []store.Lane{{}}
	}
	for i := range st.Lanes {
		f(&st.Lanes[i])
	}
}

// TestBadRepliesAreTheStoreFailing: a key paced (a send per
// millisecond) and held 500 ms, over a Store that answers each lie: 6 of 6 calls with a
// deadline of a minute go, each held less than a second and never less
// than nothing (the issue: a take of 10 h slept the deadline and ended
// Canceled; a negative wait reported Held -1h), the key held no longer
// than pace.MaxHold (a zero now made a hold of 292 years), and the Store
// heard again when it answers right.
func TestBadRepliesAreTheStoreFailing(t *testing.T) {
	for _, tc := range badReplies {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			es := &editStore{Store: store.NewLocal(clk.Now)}
			cd := NewCooldown(nil, WithStore(es))
			var held []time.Duration
			tr := New(retryhttptest.NewScript(okReply).WithClock(clk), WithClock(clk), WithCooldown(cd),
				WithObserver(func(_ context.Context, a Attempt) { held = append(held, a.Held) }))
			paceAt(cd, clk.Now(), time.Millisecond)
			holdFor(cd, origin, clk.Now(), 500*time.Millisecond) // and held: a lie about the clock moves the hold
			es.edit = tc.edit
			for i := range 6 {
				ctx, cancel := clk.WithTimeout(context.Background(), time.Minute)
				resp, err := tr.RoundTrip(getReq(ctx))
				cancel()
				require.NoError(t, err, "call %d goes", i)
				resp.Body.Close()
			}
			require.Len(t, held, 6)
			for i, h := range held {
				assert.True(t, h >= 0 && h < time.Second, "call %d held %v", i, h)
			}
			assert.False(t, cd.Until(origin).After(clk.Now().Add(pace.MaxHold)), "no hold past pace.MaxHold: %v", cd.Until(origin))
			require.NotNil(t, cd.entry())
			own := cd.stateOf().Valid(cd.now())
			assert.True(t, own, "it goes on with its own state: nothing of the lie in it")

			// The Store answers right again, and another replica holds
			// the key: this one hears it (a Seq of 2^64-1 made it deaf).
			es.edit = nil
			other := NewCooldown(nil, WithStore(es))
			trOther := New(retryhttptest.NewScript(reply(429, "Retry-After", "20")).WithClock(clk), WithClock(clk), WithCooldown(other), WithMaxRetries(0))
			resp, err := trOther.RoundTrip(getReq(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, clk.Now().Add(20*time.Second), cd.Until(origin), "the other replica's hold, heard")
		})
	}
}

// TestBadPushesAreNothing: a push of each lie arms nothing, and
// the calls of the replica that heard it go at once.
func TestBadPushesAreNothing(t *testing.T) {
	for _, tc := range badReplies {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			local := store.NewLocal(clk.Now)
			es := &editStore{Store: local, push: tc.edit}
			cd := NewCooldown(nil, WithStore(es))
			tr := New(retryhttptest.NewScript(okReply).WithClock(clk), WithClock(clk), WithCooldown(cd))
			arming := NewCooldown(nil, WithStore(local))
			trArm := New(retryhttptest.NewScript(reply(429, "Retry-After-Ms", "1")).WithClock(clk), WithClock(clk), WithCooldown(arming), WithMaxRetries(0))
			resp, err := trArm.RoundTrip(getReq(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
			for range 6 {
				resp, err := tr.RoundTrip(getReq(context.Background()))
				require.NoError(t, err)
				resp.Body.Close()
			}
			assert.True(t, cd.Until(origin).IsZero())
			if tc.name != "a take of 10 h" && tc.name != "a negative wait" { // (a push is no take: its Wait is nothing)
				assert.Zero(t, cd.size(), "nothing armed")
				assert.Empty(t, clk.Waits(), "the calls go at once")
			}
		})
	}
}

// TestSeqAheadDeafensAMinuteAtMost: one reply whose Seq is in
// range but ahead of any its Store gives (2^53-1: the year 2255 in µs)
// counts as a minute past the Store's now (clampSeq): the other
// replica's news is heard again a minute later at most, not never.
func TestSeqAheadDeafensAMinuteAtMost(t *testing.T) {
	clk := newClock()
	es := &editStore{Store: store.NewLocal(clk.Now)}
	cd := NewCooldown(nil, WithStore(es))
	tr := New(retryhttptest.NewScript(okReply).WithClock(clk), WithClock(clk), WithCooldown(cd))
	paceAt(cd, clk.Now(), time.Millisecond)
	es.edit = func(st *store.State) { st.Seq = 1<<53 - 1 }
	resp, err := tr.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	es.edit = nil

	clk.Add(time.Minute + time.Second)
	other := NewCooldown(nil, WithStore(es))
	trOther := New(retryhttptest.NewScript(reply(429, "Retry-After", "20")).WithClock(clk), WithClock(clk), WithCooldown(other), WithMaxRetries(0))
	resp, err = trOther.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, clk.Now().Add(20*time.Second), cd.Until(origin), "heard")
}

// a Store's errors were dropped with no log, so that a
// third-party Store that always failed was invisible. The Cooldown writes
// one Warn entry when its Store starts failing, and one Info when it works
// again, on its logger: never one per failed Apply.

// flakyStore is a store.Local that fails every Apply while down, and
// counts them.
type flakyStore struct {
	*store.Local
	down     atomic.Bool
	failures atomic.Int64
}

var errFlaky = errors.New("flaky: connection refused")

func (s *flakyStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	if s.down.Load() {
		s.failures.Add(1)
		return store.State{}, errFlaky
	}
	return s.Local.Apply(ctx, key, ops)
}

// TestStoreFailingIsLogged: a Store down for 6 calls (many
// Applies) writes one Warn, with the error's text; back, one Info; down
// again, one Warn more. A reply that cannot be true is the Store failing
// too, and says so.
func TestStoreFailingIsLogged(t *testing.T) {
	clk := newClock()
	fs := &flakyStore{Local: store.NewLocal(clk.Now)}
	log, logs := logSink()
	cd := NewCooldown(nil, WithStore(fs))
	script := retryhttptest.NewScript(reply(429, "Retry-After", "2"), okReply).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd), WithLogger(log))
	calls := func(n int) {
		t.Helper()
		for range n {
			resp, err := tr.RoundTrip(getReq(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
		}
	}
	failing := func() []string {
		var out []string
		for _, e := range logs.All() {
			if e.Message == msgStoreFailing || e.Message == msgStoreBack {
				out = append(out, e.Level.String()+" "+e.Message)
			}
		}
		return out
	}
	warn, info := zapcore.WarnLevel.String()+" "+msgStoreFailing, zapcore.InfoLevel.String()+" "+msgStoreBack

	calls(1) // armed, on a Store that works
	assert.Empty(t, failing(), "a Store that works: nothing")
	fs.down.Store(true)
	calls(6)
	require.GreaterOrEqual(t, fs.failures.Load(), int64(6), "an Apply a call at least")
	assert.Equal(t, []string{warn}, failing(), "one Warn for them all")
	entry := logs.FilterMessage(msgStoreFailing).All()[0]
	assert.Equal(t, errFlaky.Error(), entry.ContextMap()["error"], "with the error's text")
	fs.down.Store(false)
	calls(1)
	assert.Equal(t, []string{warn}, failing(), "not back until it has worked storeSettle")
	clk.Add(storeSettle)
	calls(3)
	assert.Equal(t, []string{warn, info}, failing(), "back: one Info")
	fs.down.Store(true)
	calls(2)
	fs.down.Store(false)
	clk.Add(storeSettle)
	calls(1)
	assert.Equal(t, []string{warn, info, warn, info}, failing(), "each change once")

	t.Run("a reply out of range", func(t *testing.T) {
		log, logs := logSink()
		bad := &editStore{Store: store.NewLocal(clk.Now), edit: func(st *store.State) { st.Wait = -st.Wait - 1 }} // a negative wait: cannot be true
		cd := NewCooldown(nil, WithStore(bad))
		tr := New(retryhttptest.NewScript(reply(429, "Retry-After", "2"), okReply).WithClock(clk), WithClock(clk), WithCooldown(cd), WithLogger(log))
		for range 3 {
			resp, err := tr.RoundTrip(getReq(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
		}
		got := logs.FilterMessage(msgStoreFailing).All()
		require.Len(t, got, 1)
		assert.Equal(t, errBadReply.Error(), got[0].ContextMap()["error"])
	})
}

// TestStoreFalteringIsLoggedOnce: a Store that fails every other Apply
// (a loaded Redis missing its bound) is failing, said once, not twice an
// Apply; once it has worked for storeSettle, it is back, said once.
func TestStoreFalteringIsLoggedOnce(t *testing.T) {
	clk := newClock()
	fs := &flakyStore{Local: store.NewLocal(clk.Now)}
	log, logs := logSink()
	cd := NewCooldown(nil, WithStore(fs))
	tr := New(retryhttptest.NewScript(reply(429, "Retry-After", "1"), okReply).WithClock(clk), WithClock(clk), WithCooldown(cd), WithLogger(log))
	for i := range 200 {
		fs.down.Store(i%2 == 1)
		clk.Add(50 * time.Millisecond)
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, 1, logs.FilterMessage(msgStoreFailing).Len(), "failing, once")
	assert.Zero(t, logs.FilterMessage(msgStoreBack).Len(), "never working for a second")
	fs.down.Store(false)
	for range 30 {
		clk.Add(50 * time.Millisecond)
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, 1, logs.FilterMessage(msgStoreBack).Len(), "back, once")
}

// one Store timeout plus clock skew moved the fleet's
// schedule by the skew. The failed take's slot was given by the process's
// own state, on its own clock, and the correction by the count of its
// answer sent that mark to the Store, whose clock is another. A ticket of
// a local take carries no mark (ticketOf). And the other way round: the
// marks of the Store's tickets, in the news a failed take carried, moved
// the process's own schedule by the skew (an hour's wait: the failed call
// refused), and are dropped there (unmarked).

// failOnceStore is a Store that fails the next Apply once told to.
type failOnceStore struct {
	store.Store
	failNext atomic.Bool
}

func (s *failOnceStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	if s.failNext.CompareAndSwap(true, false) {
		return store.State{}, errors.New("store: timeout")
	}
	return s.Store.Apply(ctx, key, ops)
}

// TestLocalTakeHasNoMark: a Store whose clock is an hour off the
// Cooldown's, the token lane paced by OpenAI's counts; one take fails, its
// send goes on the process's own state (and is not refused), and its
// answer's count, and the counts after it, correct the schedule: the
// Store's Next, and what corrections moved it (Moved), change by no more
// than the counts say (a second), never by the skew.
func TestLocalTakeHasNoMark(t *testing.T) {
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		t.Run("the Store's clock "+skew.String()+" off", func(t *testing.T) {
			clk := newClock()
			fs := &failOnceStore{Store: store.NewLocal(offsetClock{clk, skew}.Now)}
			cd := NewCooldown(nil, WithStore(fs))
			counts := retryhttptest.Status(200, openAITokens("1000", "500", "500ms")...)
			script := retryhttptest.NewScript(retryhttptest.Status(429, append(openAITokens("1000", "0", "1s"), "Retry-After-Ms", "1")...), counts).WithClock(clk)
			tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
			call := func() {
				t.Helper()
				ctx, cancel := clk.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				resp, err := tr.RoundTrip(postOf(ctx, 400)) // 100 tokens
				require.NoError(t, err)
				resp.Body.Close()
			}
			next := func() (time.Duration, time.Duration) { // the Store's Next of the token lane, from its now, and its Moved
				st, err := fs.Store.Apply(context.Background(), origin, nil)
				require.NoError(t, err)
				return st.Lane(laneTokens).Next.Sub(st.Now), st.Lane(laneTokens).Moved
			}
			for range 4 { // armed, and paced by the counts
				call()
			}
			s := laneOfEntry(cd, laneTokens)
			require.Positive(t, s.Burst, "the counts state the bucket: corrections have marks")

			fs.failNext.Store(true)
			call() // its take fails: a slot of the process's own state
			before, movedBefore := next()
			for range 3 { // The first take carries its answer's correction
				call()
				after, moved := next()
				assert.Less(t, (after - before).Abs(), time.Minute, "the fleet's schedule moved %v (the skew is %v)", after-before, skew)
				assert.Less(t, (moved - movedBefore).Abs(), time.Minute, "the corrections moved it %v (the skew is %v)", moved-movedBefore, skew)
				before, movedBefore = after, moved
			}
		})
	}
}

// a Cooldown on a shared Store was never garbage
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

// TestCooldownIsCollected: a Cooldown on a shared Store that
// nothing reaches any more (alone, or with the Transport that used it) is
// collected, which stops its listener; Close stops it too, once, and the
// Cooldown still works.
func TestCooldownIsCollected(t *testing.T) {
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
