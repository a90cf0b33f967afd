package store

import (
	"math"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// epoch is the tests' now: whole µs, as a Store's clock is read.
var epoch = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// lane100 is a request lane paced one send per 100 ms, one after the other.
// normalWaiting is s with its Next the end of Normal first tries waiting:
// the tails of their level and below at Next, as Apply leaves them.
func normalWaiting(s Lane) Lane {
	s.Tails[0], s.Tails[1] = s.Next, s.Next
	return s
}

func lane100() Lane { return Lane{Per: float64(100 * ms), Scaled: float64(100 * ms)} }

func takeOp(within time.Duration, retry bool, costs ...float64) []Op {
	return []Op{{Kind: OpTake, Costs: costs, Within: within, Retry: retry}}
}

// TestTakeSlots: sends are given slots first come first served; a bucket
// lets sends go at once while it holds them; a send waits for every lane it
// counts against, and its hold; a wait that does not fit takes nothing; a
// refusing hold refuses whatever the time; a cost over the whole bucket
// goes when it is full and is charged the bucket, no more; a retry goes
// before the sends waiting and pushes them a charge on.
func TestTakeSlots(t *testing.T) {
	now := epoch
	type take struct {
		costs    []float64
		within   time.Duration
		retry    bool
		wait     time.Duration
		ok, refd bool
	}
	one := []float64{1}
	const long = time.Hour
	for _, tc := range []struct {
		name  string
		lanes []Lane
		takes []take
	}{
		{"one after the other, first come first served", []Lane{lane100()},
			[]take{{one, long, false, 0, true, false}, {one, long, false, 100 * ms, true, false}, {one, long, false, 200 * ms, true, false}}},
		{"a wait that does not fit takes nothing", []Lane{lane100()},
			[]take{{one, long, false, 0, true, false}, {one, 100 * ms, false, 100 * ms, false, false}, {one, long, false, 100 * ms, true, false}}},
		{"a bucket of 3 sends lets 3 go at once", []Lane{{Per: float64(100 * ms), Burst: float64(300 * ms), Next: now}},
			[]take{{one, long, false, 0, true, false}, {one, long, false, 0, true, false}, {one, long, false, 0, true, false}, {one, long, false, 100 * ms, true, false}}},
		{"a hold, then the schedule", []Lane{{Per: float64(100 * ms), Until: now.Add(time.Second)}},
			[]take{{one, long, false, time.Second, true, false}, {one, long, false, 1100 * ms, true, false}}},
		{"a refusing hold refuses, whatever the time", []Lane{{Until: now.Add(time.Second), Refuse: true}},
			[]take{{one, long, false, time.Second, false, true}}},
		{"a hold of a lane the send does not count against is no wait", []Lane{{}, {Until: now.Add(time.Second)}},
			[]take{{one, long, false, 0, true, false}}},
		{"every lane: the tokens bind", []Lane{lane100(), {Per: float64(ms), Burst: float64(1000 * ms), Next: now}},
			[]take{{[]float64{1, 1000}, long, false, 0, true, false}, {[]float64{1, 500}, long, false, 500 * ms, true, false}}},
		{"a cost over the whole bucket goes when it is full, charged the bucket", []Lane{{}, {Per: float64(ms), Burst: float64(100 * ms), Next: now.Add(50 * ms)}},
			[]take{{[]float64{1, 1000}, long, false, 50 * ms, true, false}, {[]float64{1, 10}, long, false, 60 * ms, true, false}}},
		{"a cost of centuries owes a minute at most where no bucket is known", []Lane{{}, {Per: float64(ms)}},
			[]take{{[]float64{1, 1e20}, long, false, 0, true, false}, {[]float64{1, 1}, long, false, MaxDebt, true, false}}},
		{"a cost of 2^63 on a bucket is charged the bucket, no more", []Lane{{}, {Per: float64(ms), Burst: float64(1000 * ms), Next: now}},
			[]take{{[]float64{1, math.MaxInt64}, long, false, 0, true, false}, {[]float64{1, 1000}, long, false, 1000 * ms, true, false}}},
		{"a retry of centuries owes the bucket, no more", []Lane{{}, {Per: float64(ms), Burst: float64(100 * ms), Next: now}},
			[]take{{[]float64{1, 1e20}, long, true, 0, true, false}, {[]float64{1, 10}, long, false, 10 * ms, true, false}}},
		{"a cost of +Inf or NaN counts 0", []Lane{{}, {Per: float64(ms), Next: now}},
			[]take{{[]float64{1, math.Inf(1)}, long, false, 0, true, false}, {[]float64{1, math.NaN()}, long, false, 0, true, false}, {[]float64{1, 1}, long, false, 0, true, false}}},
		{"a retry goes before the sends waiting, on the schedule's grid", []Lane{normalWaiting(Lane{Per: float64(100 * ms), Next: now.Add(350 * ms)})},
			[]take{{one, long, true, 50 * ms, true, false}, {one, long, true, 150 * ms, true, false}, {one, long, false, 550 * ms, true, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Record{Lanes: tc.lanes}
			for i, tk := range tc.takes {
				res := Apply(&r, now, takeOp(tk.within, tk.retry, tk.costs...))
				assert.Equal(t, tk.wait, res.Wait, "take %d: wait", i)
				assert.Equal(t, tk.ok, res.Took, "take %d: took", i)
				assert.Equal(t, tk.refd, res.Refused, "take %d: refused", i)
			}
		})
	}
}

// TestTakeRetryPushesTheQueue: a retry let in before the sends waiting
// pushes them one charge on (the Pushes of the first tries' level); one
// with nobody waiting does not.
func TestTakeRetryPushesTheQueue(t *testing.T) {
	r := Record{Lanes: []Lane{lane100()}}
	require.True(t, Apply(&r, epoch, takeOp(time.Hour, true, 1)).Took)
	assert.Zero(t, r.Lanes[0].Pushes[2], "nobody waiting")
	Apply(&r, epoch, takeOp(time.Hour, false, 1)) // waits 100 ms
	Apply(&r, epoch, takeOp(time.Hour, true, 1))
	assert.Equal(t, 100*ms, r.Lanes[0].Pushes[2], "one send waiting, pushed a charge on")
	assert.Equal(t, epoch.Add(200*ms), r.Lanes[0].tail(3), "the next retry no sooner than a charge after this one")
}

// TestHoldTo: forward only; the sends already given a slot past the old
// hold move on by what it grew, in their order and spacing; a refusing hold
// stays refusing while it lasts.
func TestHoldTo(t *testing.T) {
	now := epoch
	for _, tc := range []struct {
		name              string
		s                 Lane
		u                 time.Duration
		refuse            bool
		until, next       time.Duration
		shift             time.Duration
		refusing, publish bool
	}{
		{"no queue: the hold alone", Lane{}, time.Second, false, time.Second, -1, 0, false, true},
		{"a queue moves on by what the hold grew", Lane{Next: now.Add(300 * ms)}, time.Second, false, time.Second, 1300 * ms, time.Second, false, true},
		{"a shorter hold never shortens it", Lane{Until: now.Add(2 * time.Second)}, time.Second, false, 2 * time.Second, -1, 0, false, false},
		{"a longer one moves the queue by what it grew", Lane{Until: now.Add(time.Second), Next: now.Add(1500 * ms)}, 2 * time.Second, false,
			2 * time.Second, 2500 * ms, time.Second, false, true},
		{"refusing", Lane{}, time.Second, true, time.Second, -1, 0, true, true},
		{"a refusing hold extended stays refusing", Lane{Until: now.Add(time.Second), Refuse: true}, 2 * time.Second, false, 2 * time.Second, -1, 0, true, true},
		{"a refusing hold over is not", Lane{Until: now.Add(-time.Second), Refuse: true}, time.Second, false, time.Second, -1, 0, false, true},
		{"a hold past MaxAhead is MaxAhead", Lane{}, 10 * time.Hour, true, MaxAhead, -1, 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Record{Lanes: []Lane{tc.s}}
			res := Apply(&r, now, []Op{{Kind: OpHold, For: tc.u, Refuse: tc.refuse}})
			s := r.Lanes[0]
			assert.Equal(t, tc.publish, res.Publish, "published only when the hold grew")
			assert.Equal(t, now.Add(tc.until), s.Until)
			if tc.next >= 0 {
				assert.Equal(t, now.Add(tc.next), s.Next)
			}
			assert.Equal(t, tc.shift, s.Shift)
			assert.Equal(t, tc.shift, s.Moved, "Moved counts every move but a take's")
			assert.Equal(t, tc.refusing, s.Refuse)
		})
	}
}

// TestCorrect: the provider's count sets the schedule, either way, against
// the schedule as it stood after the send it answers (its mark, moved on by
// what moved the schedule since); the sends waiting keep their slots; a
// send that was not paced only moves it later; a mark no take could have
// given is none.
func TestCorrect(t *testing.T) {
	now := epoch
	mark := now.Add(time.Second)
	for _, tc := range []struct {
		name    string
		s       Lane
		full    time.Duration
		mark    time.Time
		movedAt time.Duration
		next    time.Time
		moved   time.Duration
	}{
		{"the provider has less: the schedule moves later", Lane{Next: now.Add(3 * time.Second)}, 1200 * ms, mark, 0, now.Add(3200 * ms), 200 * ms},
		{"the provider has more: earlier", Lane{Next: now.Add(3 * time.Second)}, 800 * ms, mark, 0, now.Add(2800 * ms), -200 * ms},
		{"as the schedule thought: nothing", Lane{Next: now.Add(3 * time.Second)}, time.Second, mark, 0, now.Add(3 * time.Second), 0},
		{"a mark moved on by a hold since", Lane{Next: now.Add(3 * time.Second), Moved: time.Second}, 2 * time.Second, mark, 0, now.Add(3 * time.Second), time.Second},
		{"a send not paced: later only", Lane{Next: now.Add(time.Second)}, 2 * time.Second, time.Time{}, 0, now.Add(2 * time.Second), time.Second},
		{"a send not paced: never earlier", Lane{Next: now.Add(time.Second)}, 0, time.Time{}, 0, now.Add(time.Second), 0},
		{"a mark before the epoch is none", Lane{Next: now.Add(time.Second)}, 2 * time.Second, time.Unix(-5, 0), 0, now.Add(2 * time.Second), time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Record{Lanes: []Lane{tc.s}}
			Apply(&r, now, []Op{{Kind: OpCorrect, For: tc.full, Mark: tc.mark, Moved: tc.movedAt}})
			assert.Equal(t, tc.next, r.Lanes[0].Next)
			assert.Equal(t, tc.moved, r.Lanes[0].Moved)
			assert.Zero(t, r.Lanes[0].Shift, "the sends waiting keep their slots")
		})
	}
}

// TestUntake: a slot given back reopens only when it was the last, by the
// charge it was given at (a later call jumped ahead when it was given back
// at the current one after a rate change).
func TestUntake(t *testing.T) {
	r := Record{Lanes: []Lane{lane100()}}
	Apply(&r, epoch, takeOp(time.Hour, false, 1))
	Apply(&r, epoch, takeOp(time.Hour, false, 1))
	mark, charge := r.Lanes[0].Next, r.Lanes[0].Per
	Apply(&r, epoch, []Op{{Kind: OpUntake, Mark: mark, Charge: charge}})
	assert.Equal(t, epoch.Add(100*ms), r.Lanes[0].Next, "back by the charge it was given at")
	Apply(&r, epoch, takeOp(time.Hour, false, 1))
	Apply(&r, epoch, takeOp(time.Hour, false, 1))
	Apply(&r, epoch, []Op{{Kind: OpUntake, Mark: mark, Charge: charge}})
	assert.Equal(t, epoch.Add(300*ms), r.Lanes[0].Next, "a slot given after it: a hole, not a reopening")
}

// TestSetRates: a rate that changes by more than 5% scales the schedule of
// the sends waiting by as much, both ways; less is noise; a rate over an
// older version is left out; rates out of range are clamped.
func TestSetRates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		per    float64
		next   time.Duration
		scaled float64
	}{
		{"a cut stretches the queue", float64(200 * ms), 2 * time.Second, float64(200 * ms)},
		{"a growth shrinks it", float64(50 * ms), 500 * ms, float64(50 * ms)},
		{"a change under 5% is noise", float64(102 * ms), time.Second, float64(100 * ms)},
		{"1e300 is MaxPer: the queue scaled 600-fold", 1e300, 600 * time.Second, float64(MaxPer)},
		{"NaN is no rate", math.NaN(), time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Record{Lanes: []Lane{lane100()}}
			r.Lanes[0].Next = epoch.Add(time.Second)
			res := Apply(&r, epoch, []Op{{Kind: OpRates, Per: tc.per, Rates: "r"}})
			assert.False(t, res.Stale)
			assert.Equal(t, epoch.Add(tc.next), r.Lanes[0].Next)
			assert.Equal(t, tc.scaled, r.Lanes[0].Scaled)
			assert.Equal(t, uint64(1), r.Lanes[0].Version)
			assert.True(t, r.Valid(epoch), "the Record stays in range")
			res = Apply(&r, epoch, []Op{{Kind: OpRates, Per: 1, Rates: "stale"}})
			assert.True(t, res.Stale, "over an older version")
			assert.Equal(t, "r", r.Lanes[0].Rates)
		})
	}
}

// TestUs: a float converts to whole µs, saturating at MaxAhead, never
// wrapping (one send per 292 years once came out as one per 100 µs).
func TestUs(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want time.Duration
	}{
		{0, 0}, {1400, time.Microsecond}, {1600, 2 * time.Microsecond}, {-1600, -2 * time.Microsecond}, {499, 0},
		{math.NaN(), 0}, {math.Inf(1), MaxAhead}, {math.Inf(-1), -MaxAhead}, {1e30, MaxAhead}, {-1e30, -MaxAhead},
	} {
		assert.Equal(t, tc.want, us(tc.in), "%v", tc.in)
	}
}

// TestTakeLevels: on a lane that binds, a send of a higher Priority goes
// before the sends waiting of a lower one, at the schedule's first free
// slot; a Priority's retries before its first tries, after a higher
// Priority's first tries; the lowest level takes the end of the queue; and
// the tenth jump in a row over a lower Priority gives the first of them
// its slot (the floor), while a retry before its own Priority's first
// tries is no jump.
func TestTakeLevels(t *testing.T) {
	type send struct {
		priority int8
		retry    bool
		wait     time.Duration
	}
	b := func(w time.Duration) send { return send{-1, false, w} }
	n := func(w time.Duration) send { return send{0, false, w} }
	nr := func(w time.Duration) send { return send{0, true, w} }
	i := func(w time.Duration) send { return send{1, false, w} }
	tens := func(mk func(time.Duration) send, from time.Duration, k int) []send {
		var out []send
		for j := range k {
			out = append(out, mk(from+time.Duration(j)*100*ms))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		sends []send
	}{
		{"an Interactive send before the Background waiting; the next Background after all",
			[]send{b(0), b(100 * ms), b(200 * ms), i(100 * ms), b(400 * ms)}},
		{"Interactive, then Normal, then Background",
			[]send{b(0), b(100 * ms), b(200 * ms), b(300 * ms), n(100 * ms), i(100 * ms), n(300 * ms), b(700 * ms)}},
		{"a retry before its Priority's first tries; the next first try after it",
			[]send{n(0), n(100 * ms), n(200 * ms), nr(100 * ms), n(400 * ms), b(500 * ms)}},
		{"a Normal retry after the Interactive first tries waiting",
			[]send{i(0), i(100 * ms), i(200 * ms), nr(300 * ms)}},
		{"each higher Priority before the one waiting",
			[]send{b(0), n(100 * ms), i(100 * ms), b(300 * ms)}},
		{"the tenth jump over a Background send waiting gives it its slot",
			append(append([]send{b(0), b(100 * ms)}, tens(i, 100*ms, 9)...), i(1100*ms), b(1200*ms))},
		{"a Normal retry jumping its own first tries is no jump over a lower Priority",
			append([]send{n(0), n(100 * ms)}, tens(nr, 100*ms, 12)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Record{Lanes: []Lane{lane100()}}
			for j, s := range tc.sends {
				res := Apply(&r, epoch, []Op{{Kind: OpTake, Costs: []float64{1}, Within: time.Hour, Priority: s.priority, Retry: s.retry}})
				require.True(t, res.Took, "send %d", j)
				assert.Equal(t, s.wait, res.Wait, "send %d (priority %d, retry %v)", j, s.priority, s.retry)
			}
			assert.True(t, r.Valid(epoch), "the record stays valid")
		})
	}
}

// TestTakeLevelsPush: the sends of the lower levels waiting are pushed a
// charge by each send let in before them, and the floor's head keeps the
// push it had when its slot was fixed.
func TestTakeLevelsPush(t *testing.T) {
	r := Record{Lanes: []Lane{lane100()}}
	take := func(p int8, retry bool) {
		Apply(&r, epoch, []Op{{Kind: OpTake, Costs: []float64{1}, Within: time.Hour, Priority: p, Retry: retry}})
	}
	take(-1, false)
	take(-1, false) // waits 100 ms
	take(0, false)  // jumps it
	take(1, false)  // jumps both, the first of a run of Interactive sends
	s := r.Lanes[0]
	assert.Equal(t, 200*ms, s.Pushed(0), "Background pushed twice")
	assert.Equal(t, 100*ms, s.Pushed(2), "Normal pushed once")
	assert.Zero(t, s.Pushed(4), "Interactive by none")
	assert.Zero(t, s.Pushed(5), "the highest level is pushed by none")
	assert.Zero(t, s.Pushed(-1))
	assert.Equal(t, 1, s.Jumps, "a run of jumps counts from its first")
	for range 9 {
		take(1, false)
	}
	s = r.Lanes[0]
	assert.Equal(t, epoch.Add(1000*ms), s.Fixed, "the tenth jump fixes the slot of the first waiting, the Normal send")
	assert.Equal(t, 2, s.FixedLevel)
	assert.Equal(t, 900*ms, s.FixedPushed, "the push it had then")
	assert.Zero(t, s.Jumps, "the count starts again")
}

// TestPublishNews: a take that moves back sends of a lower Priority
// waiting is news for every process (their sends that no longer fit end at
// once); a retry before its own Priority's first tries is not. A lane's
// first rates are news (every process watches the key); later ones are
// not.
func TestPublishNews(t *testing.T) {
	take := func(r *Record, p int8, retry bool) bool {
		return Apply(r, epoch, []Op{{Kind: OpTake, Costs: []float64{1}, Within: time.Hour, Priority: p, Retry: retry}}).Publish
	}
	r := Record{Lanes: []Lane{lane100()}}
	assert.False(t, take(&r, -1, false), "a take at once")
	assert.False(t, take(&r, -1, false), "a take at the end of the queue")
	assert.True(t, take(&r, 1, false), "an Interactive send before a Background one waiting")
	assert.True(t, take(&r, 1, false), "the next Interactive send moves it back again")

	r = Record{Lanes: []Lane{lane100()}}
	take(&r, 0, false)
	take(&r, 0, false)
	assert.False(t, take(&r, 0, true), "a retry before its Priority's first tries")

	rates := func(r *Record, per float64) bool {
		v := r.Lane(Requests).Version
		return Apply(r, epoch, []Op{{Kind: OpRates, Lane: Requests, Version: v, Per: per}}).Publish
	}
	r = Record{}
	assert.True(t, rates(&r, float64(100*ms)), "the lane's first rates")
	assert.False(t, rates(&r, float64(50*ms)), "a change of rates")
	assert.False(t, rates(&r, 0), "no rate")
	assert.True(t, rates(&r, float64(ms)), "paced again")
}

// TestTakeLevelsExhaustive: every sequence of six takes, each of any of
// the six levels, on a lane that binds (one send per 100 ms, all asked at
// once), as a process reads each send's slot (its wait at the take, moved
// on by the pushes of its level since): the slots are the schedule's
// grid, one per send, none shared and none skipped (the provider sees the
// rate), and the order is the levels', highest first, then the order they
// came; but for the first, which took the slot due now and goes whatever
// is let in after it (as a Cooldown's send does). (The floor needs
// ten jumps: TestTakeLevels has it.)
func TestTakeLevelsExhaustive(t *testing.T) {
	const n = 6
	seq := make([]int, n)
	var walk func(i int)
	walk = func(i int) {
		if i == n {
			checkLevels(t, seq)
			return
		}
		for l := range NumLevels {
			seq[i] = l
			walk(i + 1)
		}
	}
	walk(0)
}

func checkLevels(t *testing.T, levels []int) {
	t.Helper()
	r := Record{Lanes: []Lane{lane100()}}
	type sent struct {
		level, arrival int
		wait           time.Duration
		pushedAt       time.Duration
	}
	sends := make([]sent, len(levels))
	for i, l := range levels {
		op := Op{Kind: OpTake, Costs: []float64{1}, Within: time.Hour, Priority: int8(l/2 - 1), Retry: l%2 == 1}
		res := Apply(&r, epoch, []Op{op})
		if !res.Took {
			t.Fatalf("%v: send %d took nothing", levels, i)
		}
		sends[i] = sent{level: l, arrival: i, wait: res.Wait, pushedAt: r.Lanes[0].Pushed(l)}
	}
	slots := make([]time.Duration, len(sends))
	for i, s := range sends {
		slots[i] = s.wait
		if s.wait > 0 { // a slot due now is its send's: the pushes since are of sends after it
			slots[i] += r.Lanes[0].Pushed(s.level) - s.pushedAt
		}
	}
	want := make([]int, 0, len(sends))
	for i := 1; i < len(sends); i++ {
		want = append(want, i)
	}
	sort.SliceStable(want, func(a, b int) bool { return sends[want[a]].level > sends[want[b]].level })
	want = append([]int{0}, want...)
	for k, i := range want {
		if slots[i] != time.Duration(k)*100*ms {
			t.Fatalf("levels %v: send %d (level %d) at %v, want the %d-th slot, %v (slots %v)",
				levels, i, sends[i].level, slots[i], k, time.Duration(k)*100*ms, slots)
		}
	}
}
