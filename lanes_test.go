package retryhttp

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// lane100 is a request lane paced one send per 100 ms, one after the other.
func lane100() StoreLane { return StoreLane{Per: float64(100 * ms), Scaled: float64(100 * ms)} }

// TestTakeSlots: sends are given slots first come first served; a bucket
// lets sends go at once while it holds them; a send waits for every lane it
// counts against, and its hold; a wait that does not fit takes nothing; a
// refusing hold refuses whatever the time; a cost over the whole bucket
// goes when it is full; a retry goes before the sends waiting and pushes
// them a charge on.
func TestTakeSlots(t *testing.T) {
	now := epoch
	type take struct {
		costs  [numLanes]float64
		within time.Duration
		retry  bool
		wait   time.Duration
		ok     bool
	}
	one := [numLanes]float64{1}
	for _, tc := range []struct {
		name  string
		st    StoreState
		takes []take
	}{
		{"one after the other, first come first served", StoreState{Lanes: [4]StoreLane{lane100()}},
			[]take{{one, maxDuration, false, 0, true}, {one, maxDuration, false, 100 * ms, true}, {one, maxDuration, false, 200 * ms, true}}},
		{"a wait that does not fit takes nothing", StoreState{Lanes: [4]StoreLane{lane100()}},
			[]take{{one, maxDuration, false, 0, true}, {one, 100 * ms, false, 100 * ms, false}, {one, maxDuration, false, 100 * ms, true}}},
		{"a bucket of 3 sends lets 3 go at once", StoreState{Lanes: [4]StoreLane{{Per: float64(100 * ms), Burst: float64(300 * ms), Next: now}}},
			[]take{{one, maxDuration, false, 0, true}, {one, maxDuration, false, 0, true}, {one, maxDuration, false, 0, true}, {one, maxDuration, false, 100 * ms, true}}},
		{"a hold, then the schedule", StoreState{Lanes: [4]StoreLane{{Per: float64(100 * ms), Until: now.Add(time.Second)}}},
			[]take{{one, maxDuration, false, time.Second, true}, {one, maxDuration, false, 1100 * ms, true}}},
		{"a refusing hold refuses, whatever the time", StoreState{Lanes: [4]StoreLane{{Until: now.Add(time.Second), Refuse: true}}},
			[]take{{one, maxDuration, false, time.Second, false}}},
		{"a hold of a lane the send does not count against is no wait", StoreState{Lanes: [4]StoreLane{{}, {Until: now.Add(time.Second)}}},
			[]take{{one, maxDuration, false, 0, true}}},
		{"every lane: the tokens bind", StoreState{Lanes: [4]StoreLane{lane100(), {Per: float64(ms), Burst: float64(1000 * ms), Next: now}}},
			[]take{{[4]float64{1, 1000}, maxDuration, false, 0, true}, {[4]float64{1, 500}, maxDuration, false, 500 * ms, true}}},
		{"a cost over the whole bucket goes when it is full, never never", StoreState{Lanes: [4]StoreLane{{}, {Per: float64(ms), Burst: float64(100 * ms), Next: now.Add(50 * ms)}}},
			[]take{{[4]float64{1, 1000}, maxDuration, false, 50 * ms, true}, {[4]float64{1, 10}, maxDuration, false, 960 * ms, true}}},
		{"a retry goes before the sends waiting, on the schedule's grid", StoreState{Lanes: [4]StoreLane{{Per: float64(100 * ms), Next: now.Add(350 * ms)}}},
			[]take{{one, maxDuration, true, 50 * ms, true}, {one, maxDuration, true, 150 * ms, true}, {one, maxDuration, false, 550 * ms, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			for i, tk := range tc.takes {
				wait, refused, ok := st.take(now, tk.costs, tk.within, tk.retry)
				assert.Equal(t, tk.wait, wait, "take %d: wait", i)
				assert.Equal(t, tk.ok, ok, "take %d: ok", i)
				assert.Equal(t, !ok && st.Lanes[0].Refuse, refused, "take %d: refused", i)
			}
		})
	}
}

// TestTakeRetryPushesTheQueue: a retry let in before the sends waiting
// pushes them one charge on (Pushed); one with nobody waiting does not.
func TestTakeRetryPushesTheQueue(t *testing.T) {
	now := epoch
	st := StoreState{Lanes: [4]StoreLane{lane100()}}
	_, _, ok := st.take(now, [4]float64{1}, maxDuration, true)
	require.True(t, ok)
	assert.Zero(t, st.Lanes[0].Pushed, "nobody waiting")
	st.take(now, [4]float64{1}, maxDuration, false) // waits 100 ms
	st.take(now, [4]float64{1}, maxDuration, true)
	assert.Equal(t, 100*ms, st.Lanes[0].Pushed, "one send waiting, pushed a charge on")
	assert.Equal(t, now.Add(200*ms), st.Lanes[0].RetryNext, "the next retry no sooner than a charge after this one")
}

// TestHoldTo: forward only; the sends already given a slot past the old
// hold move on by what it grew, in their order and spacing; a refusing hold
// stays refusing while it lasts.
func TestHoldTo(t *testing.T) {
	now := epoch
	for _, tc := range []struct {
		name             string
		s                StoreLane
		u                time.Duration
		refuse           bool
		until, next      time.Duration
		shift            time.Duration
		refusing, change bool
	}{
		{"no queue: the hold alone", StoreLane{}, time.Second, false, time.Second, -1, 0, false, true},
		{"a queue moves on by what the hold grew", StoreLane{Next: now.Add(300 * ms)}, time.Second, false, time.Second, 1300 * ms, time.Second, false, true},
		{"a shorter hold never shortens it", StoreLane{Until: now.Add(2 * time.Second)}, time.Second, false, 2 * time.Second, -1, 0, false, false},
		{"a longer one moves the queue by what it grew", StoreLane{Until: now.Add(time.Second), Next: now.Add(1500 * ms)}, 2 * time.Second, false,
			2 * time.Second, 2500 * ms, time.Second, false, true},
		{"refusing", StoreLane{}, time.Second, true, time.Second, -1, 0, true, true},
		{"a refusing hold extended stays refusing", StoreLane{Until: now.Add(time.Second), Refuse: true}, 2 * time.Second, false, 2 * time.Second, -1, 0, true, true},
		{"a refusing hold over is not", StoreLane{Until: now.Add(-time.Second), Refuse: true}, time.Second, false, time.Second, -1, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			assert.Equal(t, tc.change, s.holdTo(now, now.Add(tc.u), tc.refuse))
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
// send that was not paced only moves it later.
func TestCorrect(t *testing.T) {
	now := epoch
	mark := now.Add(time.Second)
	for _, tc := range []struct {
		name            string
		s               StoreLane
		full, mark      time.Time
		movedAt         time.Duration
		next            time.Time
		moved           time.Duration
		change, shifted bool
	}{
		{"the provider has less: the schedule moves later", StoreLane{Next: now.Add(3 * time.Second)}, mark.Add(200 * ms), mark, 0, now.Add(3200 * ms), 200 * ms, true, false},
		{"the provider has more: earlier", StoreLane{Next: now.Add(3 * time.Second)}, mark.Add(-200 * ms), mark, 0, now.Add(2800 * ms), -200 * ms, true, false},
		{"as the schedule thought: nothing", StoreLane{Next: now.Add(3 * time.Second)}, mark, mark, 0, now.Add(3 * time.Second), 0, false, false},
		{"a mark moved on by a hold since", StoreLane{Next: now.Add(3 * time.Second), Moved: time.Second}, mark.Add(time.Second), mark, 0, now.Add(3 * time.Second), time.Second, false, false},
		{"a send not paced: later only", StoreLane{Next: now.Add(time.Second)}, now.Add(2 * time.Second), time.Time{}, 0, now.Add(2 * time.Second), time.Second, true, false},
		{"a send not paced: never earlier", StoreLane{Next: now.Add(time.Second)}, now, time.Time{}, 0, now.Add(time.Second), 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			assert.Equal(t, tc.change, s.correct(tc.full, tc.mark, tc.movedAt))
			assert.Equal(t, tc.next, s.Next)
			assert.Equal(t, tc.moved, s.Moved)
			assert.Zero(t, s.Shift, "the sends waiting keep their slots")
		})
	}
}

// TestUntake: a slot given back reopens only when it was the last, by the
// charge it was given at (issue 21: by the current one, a later call
// jumped ahead after a rate change).
func TestUntake(t *testing.T) {
	now := epoch
	st := StoreState{Lanes: [4]StoreLane{lane100()}}
	st.take(now, [4]float64{1}, maxDuration, false)
	st.take(now, [4]float64{1}, maxDuration, false)
	mark, charge := st.Lanes[0].Next, st.Lanes[0].Per
	st.Lanes[0].setRates(now, float64(300*ms), 0, "") // a rate change after the take
	st.Lanes[0].Next = mark                           // (no queue to scale in this step)
	assert.True(t, st.Lanes[0].untake(mark, charge))
	assert.Equal(t, now.Add(100*ms), st.Lanes[0].Next, "back by the charge it was given at")
	st.take(now, [4]float64{1}, maxDuration, false)
	st.take(now, [4]float64{1}, maxDuration, false)
	assert.False(t, st.Lanes[0].untake(mark, charge), "a slot given after it: a hole, not a reopening")
}

// TestSetRates: a rate that changes by more than rescaleBy scales the
// schedule of the sends waiting by as much, both ways; less is noise.
func TestSetRates(t *testing.T) {
	now := epoch
	for _, tc := range []struct {
		name   string
		per    time.Duration
		next   time.Duration
		scaled float64
	}{
		{"a cut stretches the queue", 200 * ms, 2 * time.Second, float64(200 * ms)},
		{"a growth shrinks it", 50 * ms, 500 * ms, float64(50 * ms)},
		{"a change under 5% is noise", 102 * ms, time.Second, float64(100 * ms)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := lane100()
			s.Next = now.Add(time.Second)
			s.setRates(now, float64(tc.per), 0, "r")
			assert.Equal(t, now.Add(tc.next), s.Next)
			assert.Equal(t, tc.scaled, s.Scaled)
			assert.Equal(t, float64(tc.per), s.Per)
			assert.Equal(t, uint64(1), s.Version)
		})
	}
}

// TestDurNs: a float converts to a Duration saturating, never wrapping
// (issue 21: one send per 292 years came out as one per 100 µs on amd64).
func TestDurNs(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want time.Duration
	}{
		{0, 0}, {1.4, 1}, {1.6, 2}, {-1.6, -2}, {math.NaN(), 0}, {math.Inf(1), maxDuration}, {math.Inf(-1), -maxDuration},
		{1e30, maxDuration}, {-1e30, -maxDuration}, {float64(292 * 365 * 24 * time.Hour), 292 * 365 * 24 * time.Hour},
	} {
		assert.Equal(t, tc.want, durNs(tc.in), "%v", tc.in)
	}
}
