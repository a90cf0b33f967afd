package retryhttp

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 29, items 4 and 6: a Store's reply, or push, that cannot be true
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

// TestHardeningBadRepliesAreTheStoreFailing: a key paced (a send per
// millisecond) and held 500 ms, over a Store that answers each lie: 6 of 6 calls with a
// deadline of a minute go, each held less than a second and never less
// than nothing (the issue: a take of 10 h slept the deadline and ended
// Canceled; a negative wait reported Held -1h), the key held no longer
// than pace.MaxHold (a zero now made a hold of 292 years), and the Store
// heard again when it answers right.
func TestHardeningBadRepliesAreTheStoreFailing(t *testing.T) {
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
			require.NotNil(t, cd.entry(origin))
			own := cd.stateOf(origin).Valid(cd.now())
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

// TestHardeningBadPushesAreNothing: a push of each lie arms nothing, and
// the calls of the replica that heard it go at once.
func TestHardeningBadPushesAreNothing(t *testing.T) {
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

// TestHardeningSeqAheadDeafensAMinuteAtMost: one reply whose Seq is in
// range but ahead of any its Store gives (2^53-1: the year 2255 in µs)
// counts as a minute past the Store's now (clampSeq): the other
// replica's news is heard again a minute later at most, not never.
func TestHardeningSeqAheadDeafensAMinuteAtMost(t *testing.T) {
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
