package cooldown

import (
	"context"
	"time"

	"github.com/retryhttp/retryhttp/store"
	"go.uber.org/zap"
)

// The circuit's engine (R25): what a key's circuit refuses before a send,
// what a try's answer does to it, and its log lines. Its state machine is
// store.Apply's (store/circuit.go); each process also keeps a row of its
// own tries (KeyState.ownRow), with a shared Store.

// probeKind says which circuits a send probes: the fleet's (the Store's
// take gave it), the process's own row's, or both.
type probeKind uint8

const (
	probesFleet probeKind = 1 << iota
	probesOwn
)

// What the process sees of a send before any round trip (seeBefore).
type seen uint8

const (
	seenTake     seen = iota // the send takes its slot (the Store's, or the process's own state's)
	seenOwnProbe             // it takes its slot as the probe of the process's own row (R25)
	seenFree                 // nothing it counts against is held or paced, and no probe is due: it goes with no take
	seenDown                 // the circuit refuses it
	seenHeld                 // a hold refuses it, or does not fit: the wait is what is left of it
)

// seeBefore says, before a send of k's key at now, what the process knows
// of it with no round trip (R24: a call refused on what the process knows
// costs the Store nothing; a key with nothing to hold or pace costs no
// take). A circuit refuses it while it is open (the fleet's as last heard,
// or the process's own row) or while this process's own probe is out;
// past the fleet's Open the Store's take decides (its probe). A hold of a
// lane it counts against refuses it when refusing, or when it is not
// shorter than within. With a Store, what it heard decides only while it
// is fresh (heard within freshFor, on a clock that has not stepped back
// since): else the Store's take does (a process whose clock stepped back
// an hour read a 15 s hold as an hour's). k.mu is held.
func (k *KeyState) seeBefore(now time.Time, costs *Costs, within time.Duration, circuit, shared bool) (seen, time.Duration) {
	if circuit && k.probes > 0 {
		return seenDown, 0 // this process's probe is out: it waits for its answer
	}
	own := false
	if circuit && shared && !k.state.Circuit.IsOpen() && k.ownRow.Circuit.IsOpen() {
		// The process's own row is its own, fresh whatever the Store last
		// said: its probe goes once, and its other calls are refused.
		res := store.Apply(&k.ownRow, now, []store.Op{{Kind: store.OpTake, Circuit: true}})
		if res.Unavailable {
			return seenDown, 0
		}
		own = res.Probe
	}
	if shared && !k.fresh(now) {
		if own {
			return seenOwnProbe, 0 // the Store's take decides the rest
		}
		return seenTake, 0
	}
	if c := &k.state.Circuit; circuit && c.IsOpen() && refusing(c, now) {
		return seenDown, 0
	}
	free := len(k.deferred) == 0 && !k.state.Circuit.IsOpen() && !own
	for l := range numLanes {
		if costs[l] <= 0 {
			continue
		}
		s := k.state.Lane(l)
		if w := s.Until.Sub(now); w > 0 {
			if s.Refuse || w >= within {
				return seenHeld, w
			}
			free = false
		}
		free = free && s.Per <= 0
	}
	switch {
	case own:
		return seenOwnProbe, 0
	case free:
		return seenFree, 0
	}
	return seenTake, 0
}

// freshFor is how long what a process heard of a key from its Store is
// its word for the calls it refuses with no round trip (R24: a process
// hears within a second in any case).
const freshFor = time.Second

// fresh reports whether k's state, as the Store last said it, is fresh at
// now. k.mu is held.
func (k *KeyState) fresh(now time.Time) bool {
	age := now.Sub(k.synced)
	return age >= 0 && age < freshFor
}

// refusesNow reports whether a send of k's key at now would be refused on
// what the process knows (refuses).
func (k *KeyState) refusesNow(now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.refuses(now)
}

// refuses reports whether a send of k's key at now would be refused on
// what the process knows: a circuit open, its probe out, or this
// process's own probe out (a probe's answer may take longer than its
// lease: the process knows it is still out). k.mu is held.
func (k *KeyState) refuses(now time.Time) bool {
	return k.probes > 0 || refusing(&k.state.Circuit, now) || refusing(&k.ownRow.Circuit, now)
}

// refusing reports whether c refuses a send at now: open, before its Open
// time or with its probe out.
func refusing(c *store.Circuit, now time.Time) bool {
	return c.IsOpen() && (now.Before(c.Open) || !c.Probe.IsZero() && now.Before(c.Probe))
}

// down reports whether k's key is down: its circuit open, or its probe
// out, as far as the process knows. k.mu is held.
func (k *KeyState) down() bool { return k.state.Circuit.IsOpen() || k.ownRow.Circuit.IsOpen() }

// failOp is the Store op of a failed try of this process.
func (e *Engine) failOp(probe, solo bool) store.Op {
	return store.Op{Kind: store.OpFail, From: e.id, Failures: e.circuit.Failures, Open: e.circuit.Open, Solo: solo, Probe: probe}
}

// tellCircuit tells k's circuit what a try said (ev), and, for a probe
// (probe), that it is back: a failure counts in the row (the fleet's and,
// with a Store, the process's own), a sign of life ends them, and a probe
// with no news (its call ended) lets the next try probe.
func (e *Engine) tellCircuit(ctx context.Context, k *KeyState, now time.Time, ev Event, probe probeKind) {
	shared := e.store != nil
	var op store.Op
	k.mu.Lock()
	if probe != 0 && k.probes > 0 {
		k.probes-- // the probe's answer, or its end: this process's probe is back
	}
	switch ev {
	case Failure:
		op = e.failOp(probe&probesFleet != 0, !shared)
		if shared {
			store.Apply(&k.ownRow, now, []store.Op{e.failOp(probe&probesOwn != 0, true)})
		}
	case SignOfLife:
		k.ownRow = store.Record{}
		if k.state.Circuit == (store.Circuit{}) {
			e.logCircuit(k, now)
			k.mu.Unlock()
			return // no row to end, nothing open: nothing to write (R16's habit)
		}
		op = store.Op{Kind: store.OpAlive}
	default: // a probe with no news: the next try probes
		if probe&probesOwn != 0 {
			store.Apply(&k.ownRow, now, []store.Op{{Kind: store.OpProbeEnd}})
		}
		if probe&probesFleet == 0 {
			k.mu.Unlock()
			return
		}
		op = store.Op{Kind: store.OpProbeEnd}
	}
	ops := append(k.takeDeferred(now), op)
	e.logCircuit(k, now) // (the process's own row; apply logs the Store's)
	k.mu.Unlock()
	e.apply(context.WithoutCancel(ctx), k, ops, nil)
}

// logCircuit logs the circuit of k's key opening or closing, once each
// time, as the process sees it (R25), and ends the process's own row once
// the fleet's circuit opened: one probe for the fleet. k.mu is held.
func (e *Engine) logCircuit(k *KeyState, now time.Time) {
	if e.circuit == nil {
		return
	}
	if k.state.Circuit.IsOpen() && k.ownRow.Circuit != (store.Circuit{}) {
		k.ownRow = store.Record{}
	}
	down := k.down()
	if down == k.loggedDown {
		return
	}
	k.loggedDown = down
	l := e.logger()
	if down {
		k.wakeAll() // the sends waiting for a slot see it open, and are refused
		cc := k.state.Circuit
		if !cc.IsOpen() {
			cc = k.ownRow.Circuit
		}
		if ce := l.Check(zap.WarnLevel, MsgCircuitOpen); ce != nil {
			ce.Write(zap.String("key", e.logKey(k.key)), zap.Int("failures", cc.Failures),
				zap.Int64("open_ms", max(cc.Open.Sub(now), 0).Milliseconds()))
		}
		k.downSince = now
		return
	}
	if ce := l.Check(zap.InfoLevel, MsgCircuitClosed); ce != nil {
		ce.Write(zap.String("key", e.logKey(k.key)), zap.Int64("down_ms", now.Sub(k.downSince).Milliseconds()))
	}
}

// The entries of a key's circuit opening and closing (R25).
const (
	MsgCircuitOpen   = "llm provider down — circuit open"
	MsgCircuitClosed = "llm provider back — circuit closed"
)
