package cooldown

import (
	"context"
	"errors"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/store"
	"go.uber.org/zap"
)

// The engine's side of its Store (R24): every op goes through apply, a
// Store's push through onPush, and what a Store lost goes back through
// restore. A key's state is on the engine's clock: without a Store it is
// the state (ops apply to it), with one it is the Store's as last heard,
// moved onto the engine's clock.

// errBadReply is a Store's reply that cannot be true (a take of 10 h, a
// negative wait, a zero now): read as the Store failing.
var errBadReply = errors.New("retryhttp: a Store's reply out of range")

// apply applies ops to k's key, and calls reply, k.mu held, with the state
// after them on the clock of whoever applied them (the Store's, or the
// engine's when there is no Store or it failed; here says which): a take
// reads its slot from it. Without a Store the ops apply to k's state; with
// one, what it returns becomes k's state, and when it fails the ops apply
// to k's state all the same: the call goes on with what the process knows
// (R24).
func (e *Engine) apply(ctx context.Context, k *KeyState, ops []store.Op, reply func(st *store.State, here bool)) {
	if e.store == nil {
		now := e.Now()
		k.mu.Lock()
		defer k.mu.Unlock()
		k.applyHere(now, ops)
		e.logCircuit(k, now)
		if reply != nil {
			reply(&k.state, true)
		}
		return
	}
	st, err := e.store.Apply(ctx, k.key, ops)
	if err == nil {
		err = checkReply(&st, ops)
	}
	clampSeq(&st)
	e.logStore(err)
	now := e.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		seq := k.state.Seq // the Store's, not ours: its next reply is newer
		k.applyHere(now, withoutMarks(ops))
		k.state.Seq = seq
		k.synced = now // what the process knows is the call's state: for a second, no op to a Store failing
		k.keepCircuitNews(ops, now)
		e.logCircuit(k, now)
		if reply != nil {
			reply(&k.state, true)
		}
		return
	}
	if reply != nil {
		reply(&st, false)
	}
	k.armedOnStore(ops, st.Now)
	k.synced = now
	local := toLocalClock(st, now)
	lost := k.restore(&local, now, st.Now)
	k.update(local)
	e.logCircuit(k, now)
	if lost {
		// What it armed goes back at once, not with the next take: the
		// replicas that start meanwhile must find it.
		back := k.takeDeferred(now)
		k.mu.Unlock()
		e.apply(context.WithoutCancel(ctx), k, back, nil)
		k.mu.Lock()
	}
}

// The entries of a Store failing and working again (R24).
const (
	MsgStoreFailing = "retryhttp: Store failing — pacing on the process's own state"
	MsgStoreBack    = "retryhttp: Store working again — pacing with the fleet"
)

// logStore writes one Warn entry when e's Store starts failing (err, an
// Apply's: an error, or a reply that cannot be true), and one Info when it
// works again, on e's logger; never one per failed Apply. Working again is
// an Apply that succeeds storeSettle after the last that failed: a Store
// that falters (one Apply in two timing out on a loaded Redis) wrote 147
// Warn and 145 Info lines in 10 s, and is failing, said once. A Store's
// errors are otherwise dropped, each call going on with its process's own
// state: a Store that always fails was invisible.
func (e *Engine) logStore(err error) {
	now := e.Now()
	if err != nil {
		e.storeFailedAt.Store(now.UnixNano())
		if e.storeFailing.CompareAndSwap(false, true) {
			e.logger().Warn(MsgStoreFailing, zap.String("error", err.Error()))
		}
		return
	}
	if !e.storeFailing.Load() || now.Sub(time.Unix(0, e.storeFailedAt.Load())) < storeSettle {
		return
	}
	if e.storeFailing.CompareAndSwap(true, false) {
		e.logger().Info(MsgStoreBack)
	}
}

// storeSettle is how long a Store that failed must work before it is
// logged as working again (logStore).
const storeSettle = time.Second

// applyHere applies ops to k's state at now, on the engine's clock, waking
// the sends waiting when a lane's schedule was scaled to a faster rate.
// k.mu is held.
func (k *KeyState) applyHere(now time.Time, ops []store.Op) {
	var scaled [numLanes]float64
	for l := range numLanes {
		scaled[l] = k.state.Lane(l).Scaled
	}
	was := pushesOf(&k.state.Record)
	k.state.Result = store.Apply(&k.state.Record, now, ops)
	k.state.Now = now
	k.notePushes(&was)
	faster := false
	for l := range numLanes {
		s := k.state.Lane(l).Scaled
		if s != scaled[l] {
			k.scaledAt[l] = now
		}
		faster = faster || s < scaled[l] && scaled[l] > 0
	}
	if faster {
		k.wakeAll()
	}
}

// keepCircuitNews keeps, of ops the Store did not apply, what the fleet's
// circuit waits for, for the next op of the key: a probe's answer (its
// sign of life, its failure) and its end. Lost, the fleet's probe stayed
// out, every replica refused for the rest of its lease while the provider
// answered (R25). k.mu is held.
func (k *KeyState) keepCircuitNews(ops []store.Op, now time.Time) {
	for _, op := range ops {
		probeNews := op.Kind == store.OpAlive || op.Kind == store.OpProbeEnd || op.Kind == store.OpFail && op.Probe
		if probeNews && len(k.deferred) < maxDeferred {
			k.deferred = append(k.deferred, deferredOp{op, now})
		}
	}
}

// withoutMarks returns ops with no Mark: a Mark is on the Store's clock (a
// ticket of a take the Store gave), and applied to the process's own state,
// on its own clock, a correction by it moved the schedule by the clocks'
// skew: one Store timeout on a Store an hour behind refused a call for an
// hour. Without its Mark, a correction only moves the schedule later,
// erring on the slow side, and a slot given back gives nothing back.
func withoutMarks(ops []store.Op) []store.Op {
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
// that is not must not make the engine deaf to every reply after it.
func clampSeq(st *store.State) {
	if top := uint64(max(st.Now.Add(time.Minute).UnixMicro(), 0)); st.Seq > top {
		st.Seq = top
	}
}

// onPush is a Store's push: another process limited or held key, or its
// circuit opened or closed, or its row began (R24, R25). A key this
// process does not watch is armed with it. A push out of range is left
// out.
func (e *Engine) onPush(key string, st store.State) {
	if st.Now.IsZero() || !st.Valid(st.Now) {
		return
	}
	clampSeq(&st)
	now := e.Now()
	k := e.Find(key)
	if k == nil {
		if k = e.Watch(key, now); k == nil {
			return
		}
	}
	local := toLocalClock(st, now)
	k.mu.Lock()
	k.update(local)
	k.synced = now
	e.logCircuit(k, now)
	k.mu.Unlock()
}

// restore puts back what the process itself knows of a key that its Store
// lost (flushed, restarted, expired): its rates, and the holds it armed on
// its own answers, so that the fleet converges again (R24). Only a loss: a
// lane the Store has rates for, or a hold on, is the fleet's, and what
// this process heard of it from others is not its to write back (a hold
// planted once survived every flush, and holds copied back and forth
// crept later with each round trip). A hold the Store applied is what is
// left of it on the Store's clock, at storeNow: a replica whose own clock
// stepped back an hour wrote back an hour. What it puts back applies to st
// too, so that the call that found the loss waits for it; lost reports a
// hold put back, which goes to the Store at once (apply). k.mu is held;
// st and now are on the engine's clock.
func (k *KeyState) restore(st *store.State, now, storeNow time.Time) (lost bool) {
	var back []store.Op
	for l := range numLanes {
		got, had := st.Lane(l), k.state.Lane(l)
		if got.Rates == "" && had.Rates != "" {
			back = append(back, store.Op{Kind: store.OpRates, Lane: l, Version: got.Version,
				Per: had.Per, Burst: had.Burst, Rates: had.Rates})
		}
		own := k.armed[l]
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
		k.deferred = append(k.deferred, deferredOp{op, now})
	}
	if len(back) > 0 {
		seq := st.Seq // the Store's: its next reply is newer
		store.Apply(&st.Record, now, back)
		st.Seq = seq
	}
	return lost
}

// armedOnStore keeps the holds among ops, which the Store applied at its
// now, as this process's own, on the Store's clock (restore). k.mu is
// held.
func (k *KeyState) armedOnStore(ops []store.Op, now time.Time) {
	for _, op := range ops {
		if op.Kind != store.OpHold || op.For <= 0 || op.Lane >= numLanes {
			continue
		}
		u := now.Add(min(op.For, pace.MaxHold))
		if own := &k.armed[op.Lane]; !own.onStore || u.After(own.until) {
			*own = armedHold{until: u, refuse: op.Refuse, onStore: true}
		}
	}
}

// toLocalClock returns st with its times moved from the Store's clock to
// the engine's: now on the engine's is st.Now on the Store's (R24: replicas
// whose clocks disagree pace the same; each converts a wait into its own).
// Its Record shares nothing with st's.
func toLocalClock(st store.State, now time.Time) store.State {
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
		s.Until, s.Next, s.Fixed, s.Limited = move(s.Until), move(s.Next), move(s.Fixed), move(s.Limited)
		for i := range s.Tails {
			s.Tails[i] = move(s.Tails[i])
		}
	}
	c := &st.Circuit
	c.Last, c.Open, c.Since, c.Probe = move(c.Last), move(c.Open), move(c.Since), move(c.Probe)
	return st
}
