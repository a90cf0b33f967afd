package cooldown

import (
	"context"
	"time"
)

// A Pass is one send's way through its key's Cooldown: the seam the retry
// loop meets the engine at (the package doc). The loop takes a Pass for
// each try, asks it before the send (Enter, then Next after each wait),
// and tells it what the answer said (Hear); a send that does not go gives
// its slot back (GiveBack) and, a probe, ends (End). A Pass is one
// goroutine's.
type Pass struct {
	eng     *Engine
	key     *KeyState // nil: the call's key is not watched
	probe   probeKind // the send is a circuit's probe (R25)
	slotted time.Time // when Enter gave the send its slot
	sent    time.Time // when Next let the send go; zero when it was not paced
	tk      ticket
	paced   bool
	atSlot  bool    // Enter gave it a slot at once: it goes, whatever comes in after
	order   Order   // where the send goes among its key's sends waiting (R27)
	w       *waiter // the send waits for its slot: its ticket is there (order.go)
}

// Pass returns a Pass for a send whose key's state is k (nil: not watched).
func (e *Engine) Pass(k *KeyState) Pass { return Pass{eng: e, key: k} }

// Watched reports whether the send's key is watched.
func (p *Pass) Watched() bool { return p.key != nil }

// A Verdict is what Enter says of a send.
type Verdict uint8

// The Verdicts.
const (
	Go   Verdict = iota // the send goes, after the wait Enter returns (its slot)
	Held                // a hold refuses it, or does not fit: the wait is what is left of it
	Down                // the key's circuit refuses it (R25)
)

// Enter asks, before a send, for its slot on every lane it costs
// something on (costs), if the wait for it is shorter than within (R7's
// fit): Go with the wait, or a refusal (Held with what is left of the
// hold, Down). Its order places it among the key's sends waiting (R27): a
// retry before its priority's first tries (R17), a higher priority before
// a lower one, and, in the process, a call that must end sooner first.
func (p *Pass) Enter(ctx context.Context, costs Costs, within time.Duration, o Order) (Verdict, time.Duration) {
	e, k := p.eng, p.key
	p.slotted, p.order = e.Now(), o
	k.mu.Lock()
	saw, w := k.seeBefore(p.slotted, &costs, within, e.circuit != nil, e.store != nil)
	k.mu.Unlock()
	switch saw {
	case seenDown:
		return Down, 0
	case seenHeld:
		return Held, w
	case seenFree:
		return Go, 0
	case seenOwnProbe:
		p.probe |= probesOwn
	}
	w, tk, res := e.take(ctx, k, p.slotted, costs, within, o)
	if res.Probe {
		p.probe |= probesFleet
	}
	if p.probe != 0 {
		k.mu.Lock()
		k.probes++
		k.mu.Unlock()
	}
	switch {
	case res.Unavailable:
		return Down, 0
	case !res.Took:
		return Held, w
	}
	p.tk, p.paced, p.atSlot = tk, true, w == 0
	if w > 0 {
		k.mu.Lock()
		if k.queue(p, p.slotted) {
			w, _ = k.leftToWait(p.slotted, &p.w.tk) // it traded for a sooner slot
		}
		k.mu.Unlock()
	}
	return Go, w
}

// HeldByProvider reports whether the provider's hold is in the send's wait
// (logged as its word, R17).
func (p *Pass) HeldByProvider() bool { return p.paced && p.key.heldByProvider(p.slotted, &p.tk) }

// Woken is closed when the send's wait may be shorter (its key's rate
// grew) or when its key's circuit opened: it asks Next again. A send whose
// call has an end is woken too when it is moved back (R27), so that one
// that no longer fits ends at once.
func (p *Pass) Woken() <-chan struct{} {
	k := p.key
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if p.w != nil && !p.w.mustEnd.IsZero() {
		return k.wokenPushed()
	}
	return k.wokenAll()
}

// Next is what is left of the send's wait now: the rest of a hold armed
// since its slot, its slot moved on by the holds and the sends let in
// before it, scaled to a rate changed since; fromHold when a hold is in
// it. down: the key's circuit opened meanwhile, and the send must not go
// (R25). At 0 the send goes.
func (p *Pass) Next() (w time.Duration, fromHold, down bool) {
	if !p.paced {
		return 0, false, false
	}
	now := p.eng.Now()
	if p.probe == 0 && p.key.refusesNow(now) {
		return 0, false, true
	}
	k := p.key
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case p.atSlot:
		// Its slot was now: the sends let in since went after it (a jump
		// takes the first slot after now); only a hold armed since holds
		// it.
		w = k.holdLeft(now, &p.tk.costs)
		fromHold = w > 0
	case p.w == nil:
		w, fromHold = k.leftToWait(now, &p.tk)
	default:
		if w, fromHold = k.leftToWait(now, &p.w.tk); w == 0 {
			p.leaveQueue()
		}
	}
	if w == 0 {
		p.sent = now
	}
	return w, fromHold, false
}

// leaveQueue takes the send out of its key's waiters, its ticket back.
// k.mu is held.
func (p *Pass) leaveQueue() {
	if p.w != nil {
		p.tk = p.w.tk
		p.key.unqueue(p.w)
		p.w = nil
	}
}

// GiveBack gives the send's slot back: it did not go (its caller's context
// ended, a wait did not fit, or the circuit opened).
func (p *Pass) GiveBack(ctx context.Context) {
	if p.paced {
		p.key.mu.Lock()
		p.leaveQueue()
		p.key.mu.Unlock()
		p.eng.giveBack(ctx, p.key, p.tk)
		p.paced = false
	}
}

// End ends a send that did not go: a probe's end lets the next try probe
// (R25).
func (p *Pass) End(ctx context.Context) {
	if p.probe != 0 {
		p.eng.tellCircuit(ctx, p.key, p.eng.Now(), NoNews, p.probe)
		p.probe = 0
	}
}

// Hear tells the engine what the send's answer said: its circuit (a
// failure arms a key nobody watched), and, when paces, its pace (R17, R23:
// an answer that limits arms the key, which key gives; costs gives the
// call's cost when the answer needs it). The Pass's key is the one it
// armed, after.
func (p *Pass) Hear(ctx context.Context, a *Answer, paces bool, costs func() Costs, key func() string) {
	e := p.eng
	now := e.Now()
	if e.circuit != nil && (p.probe != 0 || a.Circuit == Failure || p.key != nil && a.Circuit == SignOfLife) {
		p.hearCircuit(ctx, now, a.Circuit, key)
	}
	if !paces {
		return
	}
	var tk *ticket
	if p.paced {
		tk = &p.tk
	}
	if k := e.hearPace(ctx, p.key, now, a, p.sent, tk, costs, key); p.key == nil {
		p.key = k
	}
}

// hearCircuit tells the key's circuit what the try said (R25). A failure
// arms a key nobody watched.
func (p *Pass) hearCircuit(ctx context.Context, now time.Time, ev Event, key func() string) {
	if ev == NoNews && p.probe == 0 {
		return
	}
	if p.key == nil {
		if ev != Failure {
			return
		}
		name := key()
		if name == "" {
			return
		}
		if p.key = p.eng.Watch(name, now); p.key == nil {
			return // bounded memory: this key goes without a circuit
		}
	}
	p.eng.tellCircuit(ctx, p.key, now, ev, p.probe)
	p.probe = 0
}

// Refuses reports whether the key's circuit refuses a send now, as far as
// the process knows (R25): a retry would be refused, so the call ends
// before it.
func (p *Pass) Refuses() bool {
	if p.key == nil || p.eng.circuit == nil {
		return false
	}
	return p.key.refusesNow(p.eng.Now())
}

// HoldLeft is what remains of the hold of the lanes the send counts
// against (costs), for a retry's wait (R17): a retry never goes out
// before the hold ends. 0 when none.
func (p *Pass) HoldLeft(costs Costs) time.Duration {
	k := p.key
	if k == nil {
		return 0
	}
	now := p.eng.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.holdLeft(now, &costs)
}

// holdLeft is what remains at now of the hold of the lanes a send of costs
// counts against. k.mu is held.
func (k *KeyState) holdLeft(now time.Time, costs *Costs) time.Duration {
	var left time.Duration
	for l := range numLanes {
		if costs[l] > 0 {
			left = max(left, k.state.Lane(l).Until.Sub(now))
		}
	}
	return left
}

// CountsTokens reports whether the send's key has a token lane paced or
// held now: its cost in tokens is then needed (R23).
func (p *Pass) CountsTokens() bool { return p.key != nil && p.key.CountsTokens(p.eng.Now()) }

// Probing reports whether the send is a circuit's probe: its answer, or
// its end, is news to the circuit whatever it is.
func (p *Pass) Probing() bool { return p.probe != 0 }
