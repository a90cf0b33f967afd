package store

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Local's map is bounded: it drops a key once the key's Record Expires
// (KeepFor past its latest time), looked over at most once a sweepEvery of
// its clock, by the next Apply. And a send's charge is bounded by its
// lane's bucket (Lane.Charge).

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

// TestLocalDropsExpiredKeys: 1,000 keys held a second, and one
// held 10 minutes; a read of a key it does not keep makes none. Once each
// has Expired, the next Apply after a sweepEvery drops it, and a key
// dropped and made again starts from nothing, its Seq still growing.
func TestLocalDropsExpiredKeys(t *testing.T) {
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

// TestChargeExhaustive: over a grid of lanes (paced or not, a
// bucket or not, the schedule behind, at or ahead of now, a hold) and of
// costs (none, one, a bucket's, centuries, 2^63, +Inf, NaN, negative),
// each a take or a retry: a send is charged a finite amount, at most its
// lane's whole bucket (Burst, or MaxDebt where none is known: a lane once
// owed 292 years), and a send of one unit after it waits at
// most that bucket (and its own charge) more than it did, or than it would
// have with no send before it.
func TestChargeExhaustive(t *testing.T) {
	now := epoch
	n := 0
	costs := []float64{0, 1, 100, 1e20, math.MaxInt64, math.Inf(1), math.NaN(), -5}
	for _, per := range []float64{0, float64(ms)} {
		for _, burst := range []float64{0, float64(100 * ms), float64(time.Minute)} {
			for _, next := range []time.Duration{-time.Second, 0, 30 * ms, 2 * time.Second} {
				for _, until := range []time.Duration{0, 500 * ms} {
					for _, cost := range costs {
						for _, retry := range []bool{false, true} {
							s := Lane{Per: per, Burst: burst, Next: now.Add(next)}
							if until > 0 {
								s.Until = now.Add(until)
							}
							n++
							checkCharge(t, now, s, cost, retry)
						}
					}
				}
			}
		}
	}
	t.Logf("%d lanes × costs", n)
}

func checkCharge(t *testing.T, now time.Time, s Lane, cost float64, retry bool) {
	t.Helper()
	fail := func(rule string, args ...any) {
		t.Errorf("%s %v:\nlane %+v cost %v retry %v", rule, args, s, cost, retry)
	}
	bucket := s.Burst
	if bucket <= 0 {
		bucket = float64(MaxDebt)
	}
	c := s.Charge(cost)
	if c != c || c < 0 || c > bucket {
		fail("a charge is finite, and at most the bucket", c)
	}
	unit := []Op{{Kind: OpTake, Costs: []float64{0, 1}, Within: time.Hour}}
	without := Record{Lanes: []Lane{{}, s}}
	alone := Apply(&without, now, unit) // the send of one unit, with no send before it
	r := Record{Lanes: []Lane{{}, s}}
	first := Apply(&r, now, []Op{{Kind: OpTake, Costs: []float64{0, cost}, Within: time.Hour, Retry: retry}})
	second := Apply(&r, now, unit)
	if !first.Took || !second.Took {
		fail("both are taken", first, second)
		return
	}
	base := max(first.Wait, alone.Wait) // (a send that cost nothing, or a retry, did not wait for the queue)
	if s.Per > 0 && second.Wait > base+time.Duration(bucket)+time.Duration(s.Charge(1))+time.Microsecond {
		fail("the next send waits at most a bucket more", first.Wait, second.Wait)
	}
	if !r.Valid(now) {
		fail("the Record stays in range")
	}
}
