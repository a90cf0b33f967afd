package cooldown

import (
	"context"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
)

// A send's slot: when each lane it charged is due, what is left of its
// wait as the key's state moves, and whose word a hold in it is.

// takeReply is the reply to a take at epoch of a send of costs on r, a
// first try of Normal priority, or a retry when retry is set.
func takeReply(r store.Record, costs Costs, retry ...bool) store.State {
	r = r.Clone()
	op := store.Op{Kind: store.OpTake, Costs: costs[:], Within: time.Minute, Retry: len(retry) > 0 && retry[0]}
	res := store.Apply(&r, epoch, []store.Op{op})
	return store.State{Now: epoch, Record: r, Result: res}
}

// TestTicketDue: a lane is due when it covers the send: with no bucket,
// its slot (the schedule's end less the charge); with a bucket, a bucket
// before the schedule's end; never after the send's wait. The send queued
// on a lane when it is due a charge from now at least.
func TestTicketDue(t *testing.T) {
	ms := float64(time.Millisecond)
	tokens := func(next time.Duration, burst float64) store.Record {
		return store.Record{Lanes: []store.Lane{{}, {Per: ms, Burst: burst, Next: epoch.Add(next)}}}
	}
	// A full bucket of 100 ms, and the request lane's slot 500 ms on.
	bound := tokens(-time.Second, 100*ms)
	bound.Lanes[laneRequests] = store.Lane{Per: 500 * ms, Next: epoch.Add(500 * time.Millisecond)}
	roomy := tokens(-time.Second, 1000*ms)
	roomy.Lanes[laneRequests] = bound.Lanes[laneRequests]
	waiting := takeReply(bound, Costs{1, 10}).Record // a first try waits for the request lane's slot
	for _, tc := range []struct {
		name   string
		r      store.Record
		costs  Costs
		due    [2]time.Duration // requests, tokens
		queued laneMask
		retry  bool
	}{
		{"at once", tokens(-time.Second, 0), Costs{1, 10}, [2]time.Duration{0, 0}, 0, false},
		{"behind a send of 5 ms", tokens(5*time.Millisecond, 0), Costs{1, 10}, [2]time.Duration{0, 5 * time.Millisecond}, 0, false},
		{"behind a send of 10 ms", tokens(10*time.Millisecond, 0), Costs{1, 10}, [2]time.Duration{0, 10 * time.Millisecond}, 1 << laneTokens, false},
		{"a bucket, behind another lane", bound, Costs{1, 10}, [2]time.Duration{500 * time.Millisecond, 410 * time.Millisecond}, 1<<laneRequests | 1<<laneTokens, false},
		{"a bucket smaller than the send", bound, Costs{1, 200}, [2]time.Duration{500 * time.Millisecond, 500 * time.Millisecond}, 1<<laneRequests | 1<<laneTokens, false},
		// A retry that took the schedule's end, no first try of its
		// priority waiting, is due as a first try there is (R27).
		{"a retry at the end, a bucket, behind another lane", bound, Costs{1, 10}, [2]time.Duration{500 * time.Millisecond, 410 * time.Millisecond}, 1<<laneRequests | 1<<laneTokens, true},
		{"a retry at the end, at once", tokens(-time.Second, 0), Costs{1, 10}, [2]time.Duration{0, 0}, 0, true},
		{"a retry at the end, a roomy bucket, behind another lane", roomy, Costs{1, 10}, [2]time.Duration{500 * time.Millisecond, 0}, 1 << laneRequests, true},
		// A retry that went before a waiting first try is due when its
		// send is, on every lane it went before it on.
		{"a retry before a first try", waiting, Costs{1, 10}, [2]time.Duration{500 * time.Millisecond, 500 * time.Millisecond}, 1<<laneRequests | 1<<laneTokens, true},
	} {
		st := takeReply(tc.r, tc.costs, tc.retry)
		now := epoch.Add(time.Hour) // the engine's clock
		level := 2
		if tc.retry {
			level = 3
		}
		tk := ticketOf(&st, now, tc.costs, level, false)
		for l, want := range tc.due {
			if tk.charged.Has(laneID(l)) {
				assert.Equal(t, want, tk.due[l].Sub(now), "%s: lane %d", tc.name, l)
			}
		}
		assert.Equal(t, tc.queued, tk.queued, tc.name)
	}
}

// TestLeftToWait: what is left of a send's wait is the rest of a hold of
// a lane it costs something on, or of its slot; fromHold when a hold is
// in it (a hold now, or the schedule shifted by one since the slot), not
// for a slot alone, nor for a hold that ends now or of a lane it costs
// nothing on.
func TestLeftToWait(t *testing.T) {
	now := epoch
	for _, tc := range []struct {
		name     string
		costs    Costs
		hold     time.Time // of the token lane
		shift    time.Duration
		w        time.Duration
		fromHold bool
	}{
		{"a slot", Costs{1}, time.Time{}, 0, 500 * time.Millisecond, false},
		{"a hold of a lane it costs nothing on", Costs{1}, now.Add(2 * time.Second), 0, 500 * time.Millisecond, false},
		{"a hold that ends now", Costs{1, 100}, now, 0, 500 * time.Millisecond, false},
		{"a hold of its lane", Costs{1, 100}, now.Add(2 * time.Second), 0, 2 * time.Second, true},
		{"its slot shifted by a hold since", Costs{1}, time.Time{}, time.Second, 1500 * time.Millisecond, true},
	} {
		k := &KeyState{}
		k.state.Lanes = []store.Lane{{Per: 1e6, Scaled: 1e6, Shift: tc.shift}, {Until: tc.hold}}
		tk := ticket{costs: tc.costs, charged: 1 << laneRequests}
		tk.due[laneRequests], tk.perAt[laneRequests] = now.Add(500*time.Millisecond), 1e6
		w, fromHold := k.leftToWait(now, &tk)
		assert.Equal(t, tc.w, w, tc.name)
		assert.Equal(t, tc.fromHold, fromHold, tc.name)
	}
}

// TestHeldByProvider: a hold is the provider's word in a send's wait when
// it holds a lane the send costs something on.
func TestHeldByProvider(t *testing.T) {
	for _, tc := range []struct {
		name  string
		held  laneID
		costs Costs
		want  bool
	}{
		{"its request lane", laneRequests, Costs{1}, true},
		{"a token lane it costs nothing on", laneTokens, Costs{1}, false},
		{"a token lane it costs tokens on", laneTokens, Costs{1, 100}, true},
	} {
		k := &KeyState{}
		laneOf(&k.state.Record, tc.held).Until = epoch.Add(time.Second)
		assert.Equal(t, tc.want, k.heldByProvider(epoch, &ticket{costs: tc.costs}), tc.name)
	}
	assert.False(t, (&KeyState{}).heldByProvider(epoch, &ticket{costs: Costs{1}}), "no hold")
}

// TestScaledDue: a slot's due on a lane whose rate changed since is what
// was left of it when the schedule was scaled, stretched or shrunk as the
// schedule was; unchanged when the rate did not change, or the send was
// slotted on no rate.
func TestScaledDue(t *testing.T) {
	now := epoch
	for _, tc := range []struct {
		name          string
		perAt, scaled float64
		scaledAt      time.Time
		want          time.Time
	}{
		{"the same rate", 1e6, 1e6, now.Add(-time.Second), now.Add(2 * time.Second)},
		{"half the rate, now", 1e6, 2e6, now, now.Add(4 * time.Second)},
		{"half the rate, a second ago", 1e6, 2e6, now.Add(-time.Second), now.Add(5 * time.Second)},
		{"twice the rate, a second ago", 2e6, 1e6, now.Add(-time.Second), now.Add(500 * time.Millisecond)},
		{"scaled after now (a clock stepped back): from now", 1e6, 2e6, now.Add(3 * time.Second), now.Add(4 * time.Second)},
		{"slotted on no rate", 0, 2e6, now, now.Add(2 * time.Second)},
	} {
		k := &KeyState{}
		k.state.Lanes = []store.Lane{{Scaled: tc.scaled}}
		k.scaledAt[laneRequests] = tc.scaledAt
		tk := ticket{}
		tk.due[laneRequests], tk.perAt[laneRequests] = now.Add(2*time.Second), tc.perAt
		assert.Equal(t, tc.want, k.scaledDue(laneRequests, now, &tk), tc.name)
	}
}

// TestUpdateNotesScaled: a state whose lane's schedule was scaled to a new
// rate notes when, and wakes the sends waiting when the rate is faster;
// one with the rate unchanged leaves both.
func TestUpdateNotesScaled(t *testing.T) {
	k := &KeyState{}
	k.state.Lanes = []store.Lane{{Scaled: 1e6}}
	k.mu.Lock()
	woken := k.wokenAll()
	k.mu.Unlock()
	t1, t2, t3 := epoch.Add(time.Second), epoch.Add(2*time.Second), epoch.Add(3*time.Second)
	k.update(store.State{Now: t1, Record: store.Record{Seq: 1, Lanes: []store.Lane{{Scaled: 2e6}}}})
	assert.Equal(t, t1, k.scaledAt[laneRequests], "scaled")
	k.update(store.State{Now: t2, Record: store.Record{Seq: 2, Lanes: []store.Lane{{Scaled: 2e6}}}})
	assert.Equal(t, t1, k.scaledAt[laneRequests], "the same rate: not scaled again")
	select {
	case <-woken:
		t.Fatal("a slower rate, then the same: no send waiting goes sooner")
	default:
	}
	k.update(store.State{Now: t3, Record: store.Record{Seq: 3, Lanes: []store.Lane{{Scaled: 1e6}}}})
	assert.Equal(t, t3, k.scaledAt[laneRequests])
	select {
	case <-woken:
	default:
		t.Fatal("a faster rate wakes the sends waiting")
	}
}

// TestGiveBackCostsOnlyAMark: a slot given back with no mark (a retry's,
// the process's own state's, or no lane charged) costs the Store nothing;
// one with a mark is one op.
func TestGiveBackCostsOnlyAMark(t *testing.T) {
	e, now, cs := sharedEngine(t, time.Second)
	k := e.Watch("k", now.Now())
	e.giveBack(context.Background(), k, ticket{costs: Costs{1}})
	assert.Zero(t, cs.n, "no mark: nothing to give back")
	tk := ticket{costs: Costs{1}, charged: 1 << laneRequests}
	tk.mark[laneRequests], tk.charge[laneRequests] = now.Now(), 1e6
	e.giveBack(context.Background(), k, tk)
	assert.Equal(t, 1, cs.n)
}

// TestPushesFixedHead: a send's pushes on a lane are the lane's pushes of
// its level since it last looked; but the first send of a lower priority
// that a tenth jump let go (Fixed, FixedLevel) is pushed only up to
// FixedPushed and no more after. A ticket is that send when its due, as
// it was when the pushes stopped for it, is within half a charge of
// Fixed (strictly: a neighbour is a whole charge away).
func TestPushesFixedHead(t *testing.T) {
	const charge = 100 * time.Millisecond
	fixed := epoch.Add(time.Second)
	for _, tc := range []struct {
		name  string
		level int
		d     time.Duration // its due at the fix, less Fixed
		moved time.Duration
		fixed bool
	}{
		{"at the fixed slot", 0, 0, 100 * time.Millisecond, true},
		{"just within half a charge after it", 0, charge/2 - time.Nanosecond, 100 * time.Millisecond, true},
		{"just within half a charge before it", 0, -charge/2 + time.Nanosecond, 100 * time.Millisecond, true},
		{"half a charge after it", 0, charge / 2, 200 * time.Millisecond, false},
		{"half a charge before it", 0, -charge / 2, 200 * time.Millisecond, false},
		{"the slot after it", 0, charge, 200 * time.Millisecond, false},
		{"the slot before it", 0, -charge, 200 * time.Millisecond, false},
		{"at it, another level", 2, 0, 200 * time.Millisecond, false},
	} {
		s := store.Lane{Fixed: fixed, FixedLevel: 0, FixedPushed: 200 * time.Millisecond}
		s.Pushes[0], s.Pushes[2] = 300*time.Millisecond, 300*time.Millisecond
		tk := ticket{}
		tk.level, tk.charge[laneRequests] = tc.level, float64(charge)
		tk.pushedAt[laneRequests] = 100 * time.Millisecond // pushed a charge when it took its slot
		// its due now, before the pushes since: at the fix, it is 100 ms later
		due := fixed.Add(tc.d - 100*time.Millisecond)
		assert.Equal(t, tc.moved, tk.pushes(laneRequests, &s, due), tc.name)
		assert.Equal(t, tc.fixed, tk.fixed.Has(laneRequests), "%s: fixed", tc.name)
		if tc.fixed {
			s.Pushes[0] += charge
			assert.Zero(t, tk.pushes(laneRequests, &s, due), "%s: fixed, no push moves it", tc.name)
		}
	}
}
