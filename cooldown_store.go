package retryhttp

import (
	"context"
	"errors"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/store"
	"go.uber.org/zap"
)

// The Cooldown's side of its Store (R24): every op goes through apply, a
// Store's push through heardElsewhere, and what a Store lost goes back
// through restore. A key's entry keeps its state on the Cooldown's clock:
// without a Store it is the state (ops apply to it), with one it is the
// Store's as last heard, converted.

// errBadReply is a Store's reply that cannot be true (a take of
// 10 h, a negative wait, a zero now): read as the Store failing.
var errBadReply = errors.New("retryhttp: a Store's reply out of range")

// apply applies ops to e's key, and calls reply, e.mu held, with the
// state after them on the clock of whoever applied them (the Store's, or
// the Cooldown's when there is no Store or it failed; local says which):
// a take reads its slot from it. Without a Store the ops apply to e's
// state; with one, what it returns becomes e's state, and when it fails
// the ops apply to e's state all the same: the call goes on with what the
// process knows (R24).
func (c *Cooldown) apply(ctx context.Context, e *watchedKey, ops []store.Op, reply func(st *store.State, local bool)) {
	if c.store == nil {
		now := c.now()
		e.mu.Lock()
		defer e.mu.Unlock()
		e.applyLocal(now, ops)
		c.noteCircuit(e, now)
		if reply != nil {
			reply(&e.st, true)
		}
		return
	}
	st, err := c.store.Apply(ctx, e.key, ops)
	if err == nil {
		err = checkReply(&st, ops)
	}
	clampSeq(&st)
	c.noteStore(err)
	now := c.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		seq := e.st.Seq // the Store's, not ours: its next reply is newer
		e.applyLocal(now, unmarked(ops))
		e.st.Seq = seq
		e.synced = now // what the process knows is the call's state: for a second, no op to a Store failing
		e.keepCircuitNews(ops, now)
		c.noteCircuit(e, now)
		if reply != nil {
			reply(&e.st, true)
		}
		return
	}
	if reply != nil {
		reply(&st, false)
	}
	e.heldOnStore(ops, st.Now)
	e.synced = now
	local := onClock(st, now)
	lost := e.restore(&local, now, st.Now)
	e.adopt(local)
	c.noteCircuit(e, now)
	if lost {
		// What it armed goes back at once, not with the next take: the
		// replicas that start meanwhile must find it.
		back := e.takePending(now)
		e.mu.Unlock()
		c.apply(context.WithoutCancel(ctx), e, back, nil)
		e.mu.Lock()
	}
}

// The entries of a Store failing and working again (R24).
const (
	msgStoreFailing = "retryhttp: Store failing — pacing on the process's own state"
	msgStoreBack    = "retryhttp: Store working again — pacing with the fleet"
)

// noteStore writes one Warn entry when c's Store starts failing (err, an
// Apply's: an error, or a reply that cannot be true), and one Info when it
// works again, on c's logger; never one per failed Apply. Working again is
// an Apply that succeeds storeSettle after the last that failed: a Store
// that falters (one Apply in two timing out on a loaded Redis) wrote 147
// Warn and 145 Info lines in 10 s, and is failing, said once. A Store's
// errors are otherwise dropped, each call going on with its process's own
// state: a Store that always fails was invisible.
func (c *Cooldown) noteStore(err error) {
	now := c.now()
	if err != nil {
		c.storeFailedAt.Store(now.UnixNano())
		if c.storeFailing.CompareAndSwap(false, true) {
			c.logger().Warn(msgStoreFailing, zap.String("error", err.Error()))
		}
		return
	}
	if !c.storeFailing.Load() || now.Sub(time.Unix(0, c.storeFailedAt.Load())) < storeSettle {
		return
	}
	if c.storeFailing.CompareAndSwap(true, false) {
		c.logger().Info(msgStoreBack)
	}
}

// storeSettle is how long a Store that failed must work before it is
// logged as working again (noteStore).
const storeSettle = time.Second

// applyLocal applies ops to e's state at now, on the Cooldown's clock,
// waking the sends waiting when a lane's schedule was scaled to a faster
// rate. e.mu is held.
func (e *watchedKey) applyLocal(now time.Time, ops []store.Op) {
	var scaled [numLanes]float64
	for l := range numLanes {
		scaled[l] = e.st.Lane(l).Scaled
	}
	e.st.Result = store.Apply(&e.st.Record, now, ops)
	e.st.Now = now
	faster := false
	for l := range numLanes {
		s := e.st.Lane(l).Scaled
		if s != scaled[l] {
			e.scaledAt[l] = now
		}
		faster = faster || s < scaled[l] && scaled[l] > 0
	}
	if faster {
		e.wakeAll()
	}
}

// keepCircuitNews keeps, of ops the Store did not apply, what the fleet's
// circuit waits for, for the next op of the key: a probe's answer (its
// sign of life, its failure) and its end. Lost, the fleet's probe stayed
// out, every replica refused for the rest of its lease while the provider
// answered (R25). e.mu is held.
func (e *watchedKey) keepCircuitNews(ops []store.Op, now time.Time) {
	for _, op := range ops {
		probeNews := op.Kind == store.OpAlive || op.Kind == store.OpProbeEnd || op.Kind == store.OpFail && op.Probe
		if probeNews && len(e.pending) < maxPending {
			e.pending = append(e.pending, pendingOp{op, now})
		}
	}
}

// unmarked returns ops with no Mark: a Mark is on the Store's clock (a
// ticket of a take the Store gave), and applied to the process's own state,
// on its own clock, a correction by it moved the schedule by the clocks'
// skew: one Store timeout on a Store an hour behind refused a call for an
// hour. Unmarked, a correction only moves the schedule later,
// erring on the slow side, and a slot given back (giveBack) gives nothing back.
func unmarked(ops []store.Op) []store.Op {
	for i := range ops {
		if !ops[i].Mark.IsZero() {
			out := append([]store.Op(nil), ops...)
			for j := range out {
				out[j].Mark = time.Time{}
			}
			return out
		}
	}
	return ops
}

// checkReply reports a Store's reply that cannot be true as an error: a
// zero now, a Record out of range, or a take that did not do what it was
// asked (a wait below zero, or one it took that does not fit).
func checkReply(st *store.State, ops []store.Op) error {
	if st.Now.IsZero() || !st.Valid(st.Now) || st.Wait < 0 {
		return errBadReply
	}
	for i := range ops {
		if ops[i].Kind == store.OpTake && st.Took && st.Wait > 0 && st.Wait >= ops[i].Within {
			return errBadReply
		}
	}
	return nil
}

// clampSeq bounds a State's Seq to a minute past its Store's now in µs,
// what any Store gives (store.Record.Seq): one Seq of 2^64-1 from a Store
// that is not must not make the Cooldown deaf to every reply after it.
func clampSeq(st *store.State) {
	if top := uint64(max(st.Now.Add(time.Minute).UnixMicro(), 0)); st.Seq > top {
		st.Seq = top
	}
}

// heardElsewhere is a Store's push: another process limited or held key,
// or its circuit opened or closed (R24, R25). A key this process does not
// watch is armed with it. A push out of range is left out.
func (c *Cooldown) heardFromStore(key string, st store.State) {
	if st.Now.IsZero() || !st.Valid(st.Now) {
		return
	}
	clampSeq(&st)
	now := c.now()
	e := c.entry(key)
	if e == nil {
		if e = c.watch(key, now); e == nil {
			return
		}
	}
	local := onClock(st, now)
	e.mu.Lock()
	e.adopt(local)
	e.synced = now
	c.noteCircuit(e, now)
	e.mu.Unlock()
}

// restore puts back what the process itself knows of a key that its Store
// lost (flushed, restarted, expired): its rates, and the holds it armed on
// its own answers, with the next op, so that the fleet converges again
// (R24). Only a loss: a lane the Store has rates for, or a hold on, is the
// fleet's, and what this process heard of it from others is not its to
// write back (a hold planted once survived every flush, and
// holds copied back and forth crept later with each round trip). A hold
// the Store applied is what is left of it on the Store's clock, at
// storeNow: a replica whose own clock stepped back an hour wrote back an
// hour. What it puts back applies to st too, so that the call that found
// the loss waits for it; lost reports a hold put back, which goes to the
// Store at once (apply). e.mu is held; st and now are on the Cooldown's
// clock.
func (e *watchedKey) restore(st *store.State, now, storeNow time.Time) (lost bool) {
	var back []store.Op
	for l := range numLanes {
		got, had := st.Lane(l), e.st.Lane(l)
		if got.Rates == "" && had.Rates != "" {
			back = append(back, store.Op{Kind: store.OpRates, Lane: l, Version: got.Version,
				Per: had.Per, Burst: had.Burst, Rates: had.Rates})
		}
		own := e.own[l]
		d := own.until.Sub(now)
		if own.onStore {
			d = own.until.Sub(storeNow)
		}
		if d > 0 && !got.Until.After(now) {
			back = append(back, store.Op{Kind: store.OpHold, Lane: l, For: min(d, pace.MaxHold), Refuse: own.refuse})
			lost = true
		}
	}
	for _, op := range back {
		e.pending = append(e.pending, pendingOp{op, now})
	}
	if len(back) > 0 {
		// The call that found the loss waits what its process armed too.
		seq := st.Seq // the Store's: its next reply is newer
		store.Apply(&st.Record, now, back)
		st.Seq = seq
	}
	return lost
}

// heldOnStore keeps the holds among ops, which the Store applied at its
// now, as this process's own, on the Store's clock (restore). e.mu is
// held.
func (e *watchedKey) heldOnStore(ops []store.Op, now time.Time) {
	for _, op := range ops {
		if op.Kind != store.OpHold || op.For <= 0 || op.Lane >= numLanes {
			continue
		}
		u := now.Add(min(op.For, pace.MaxHold))
		if own := &e.own[op.Lane]; !own.onStore || u.After(own.until) {
			*own = ownHold{until: u, refuse: op.Refuse, onStore: true}
		}
	}
}

// onClock returns st with its times moved from the Store's clock to the
// Cooldown's: now on the Cooldown's is st.Now on the Store's (R24: replicas
// whose clocks disagree pace the same; each converts a wait into its own).
// Its Record shares nothing with st's.
func onClock(st store.State, now time.Time) store.State {
	// Whole µs both sides: a Record's times are (store.Record.Valid), and
	// an offset with nanoseconds made the fleet's state junk to the
	// process's own Apply the first time the Store failed.
	now = now.Truncate(time.Microsecond)
	d := now.Sub(st.Now.Truncate(time.Microsecond))
	move := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.Add(d)
	}
	st.Now = now
	st.Record = st.Clone()
	for l := range st.Lanes {
		s := &st.Lanes[l]
		s.Until, s.Next, s.RetryNext, s.Limited = move(s.Until), move(s.Next), move(s.RetryNext), move(s.Limited)
	}
	c := &st.Circuit
	c.Last, c.Open, c.Since, c.Probe = move(c.Last), move(c.Open), move(c.Since), move(c.Probe)
	return st
}
