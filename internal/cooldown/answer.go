package cooldown

import (
	"context"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/retryhttp/retryhttp/store"
)

// An Answer is what one try tells the engine (R17, R18, R23, R25): for
// the pace, the server's ask on a failed try (with the resolution of its
// form), each lane's count, an exhausted lane's reset, and which limit an
// error body says a 429 is about; for the circuit, whether the try failed,
// answered, or said nothing (the caller's own cancel). The zero Answer
// says nothing.
type Answer struct {
	Limited bool // a 429, or a try the Classifier calls Throttled
	OK      bool // a success (status below 400): a learned rate may grow
	// Ask is the server's ask on a failed try (R5, R19), and AskRes its
	// resolution: what the true wait may be shorter by (1 s for whole
	// seconds).
	Ask, AskRes time.Duration
	HasAsk      bool
	Counts      [numLanes]signal.Counts
	// Reset is the reset of each lane exhausted (R18), and ResetRes its
	// resolution.
	Reset, ResetRes [numLanes]time.Duration
	HasReset        [numLanes]bool
	Body            signal.Lanes // the limit the error body names
	// TooLarge: OpenAI's "Request too large" (a call asking for more than
	// the whole limit): the caller's mistake, which says nothing of the
	// provider's limit, so no limit, cut or hold (it halved the shared
	// token lane's rate and paused it).
	TooLarge bool
	// Circuit is what the try says to the key's circuit (R25).
	Circuit Event
}

// An Event is what a try says to a key's circuit (R25).
type Event uint8

// The Events.
const (
	NoNews     Event = iota // the caller's own cancel: nothing of the provider
	Failure                 // a try the Classifier calls Transient
	SignOfLife              // any other answer
)

// arms reports whether an answer arms a key nobody watches: a limit, an
// ask, an exhausted limit's reset, or a count of the provider's request
// limit that states its rate (R27: a fan-out on a key whose limit was
// stated is paced from its first try, not after a storm of 429s).
func (a *Answer) arms() bool {
	if c := a.Counts[laneRequests]; a.Limited && !a.TooLarge || a.HasAsk && a.Ask > 0 || c.OK && c.Limit > c.Remaining && c.Window > 0 {
		return true
	}
	for l := range a.Reset {
		if a.HasReset[l] && a.Reset[l] > 0 {
			return true
		}
	}
	return false
}

// needsCosts reports whether what a says of a token lane needs the call's
// cost in tokens.
func (a *Answer) needsCosts() bool {
	for l := laneTokens; l < numLanes; l++ {
		if a.Counts[l].OK || a.HasReset[l] || a.Body.Has(l) {
			return true
		}
	}
	return false
}

// hitLanes is the lanes a limit is about (R23: a 429 cuts or holds only the
// limit it hit): those its error body names; else those its counts say
// could not take the send (remaining below its cost) or are exhausted;
// else, when nothing says, the request lane. A call too large hits none.
func (a *Answer) hitLanes(costs Costs) laneMask {
	if a.TooLarge || !a.Limited && (!a.HasAsk || a.Ask <= 0) {
		return 0
	}
	if a.Body != 0 {
		return a.Body
	}
	var m laneMask
	for l := range numLanes {
		if c := a.Counts[l]; c.OK && costs[l] > 0 && float64(c.Remaining) < costs[l] || a.HasReset[l] {
			m |= 1 << l
		}
	}
	if m == 0 {
		m = 1 << laneRequests
	}
	return m
}

// hearPace records what an answer says of the pace. k is its call's key,
// nil when it was not watched; an answer that limits arms the key, which
// key gives ("" leaves the call out). costs gives the call's cost when the
// answer needs it. sent and tk are the send's slot, when it was paced.
func (e *Engine) hearPace(ctx context.Context, k *KeyState, now time.Time, a *Answer, sent time.Time, tk *ticket,
	costs func() Costs, key func() string) *KeyState {
	if k == nil {
		if !a.arms() {
			return nil // free flow, nothing to arm: no lock (R16)
		}
		name := key()
		if name == "" {
			return nil
		}
		if k = e.Watch(name, now); k == nil {
			return nil // bounded memory: this key goes unshared
		}
	}
	if k.isSwept() {
		// Swept while the try was out (an answer after 10 s, the sweep at
		// 5 s): what it says goes to the key as it is now, not to a state
		// nobody looks at.
		if k = e.Watch(k.key, now); k == nil {
			return nil
		}
	}
	cost := Costs{1}
	if tk != nil {
		cost = tk.costs
	}
	if a.needsCosts() && cost[laneTokens]+cost[laneInput]+cost[laneOutput] == 0 && (!a.OK || k.CountsTokens(now)) {
		// A token lane is heard of for the first time, by a limit or
		// while it binds: a success on a roomy one reads no body (R27).
		cost = costs()
	}
	e.applyAnswer(ctx, k, now, a, sent, tk, cost)
	return k
}

// applyAnswer applies the policy to what an answer says of each lane of
// k's key (pace.Hear), and has the Store do what it decided: at once when
// the provider limited or held the key (the other calls, and other
// processes, must know now), else with the next take (R24: a paced send
// costs one round trip; the in-process state has no round trip to save).
func (e *Engine) applyAnswer(ctx context.Context, k *KeyState, now time.Time, a *Answer, sent time.Time, tk *ticket, cost Costs) {
	if e.store == nil {
		e.applyAnswerHere(k, now, a, sent, tk, cost)
		return
	}
	k.mu.Lock()
	st := k.state
	ops, urgent := answerOps(nil, &st, now, a, sent, tk, cost)
	if len(ops) == 0 {
		k.mu.Unlock()
		return
	}
	for _, op := range ops {
		if op.Kind == store.OpHold { // this process's own: restore may put it back (sync.go)
			k.armed[op.Lane] = armedHold{until: now.Add(op.For), refuse: op.Refuse}
		}
	}
	urgent = urgent || st.Seq == 0 || e.store == nil
	if !urgent && len(k.deferred) < maxDeferred {
		k.deferOps(ops, now)
		k.mu.Unlock()
		return
	}
	ops = append(k.takeDeferred(now), ops...)
	k.mu.Unlock()
	e.apply(context.WithoutCancel(ctx), k, ops, nil)
}

// applyAnswerHere is applyAnswer on the process's own state (no Store):
// at once, with nothing to defer, and no allocation (R16, R27).
func (e *Engine) applyAnswerHere(k *KeyState, now time.Time, a *Answer, sent time.Time, tk *ticket, cost Costs) {
	var buf [4 * numLanes]store.Op // answerOps's most: rates, a limit, a hold and a correction per lane
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.state
	ops, _ := answerOps(buf[:0], &st, now, a, sent, tk, cost)
	if len(ops) == 0 {
		return
	}
	for _, op := range ops {
		if op.Kind == store.OpHold {
			k.armed[op.Lane] = armedHold{until: now.Add(op.For), refuse: op.Refuse}
		}
	}
	at := e.Now()
	k.applyHere(at, ops)
	e.logCircuit(k, at)
}

// answerOps is what the policy makes of a for each lane of st, as Store
// ops appended to ops, and whether any of them is a limit or a hold.
func answerOps(ops []store.Op, st *store.State, now time.Time, a *Answer, sent time.Time, tk *ticket, cost Costs) (_ []store.Op, urgent bool) {
	hit := a.hitLanes(cost)
	for l := range numLanes {
		s := st.Lane(l)
		r := pace.DecodeRates(s.Rates)
		// The request lane is spaced (pace.News.Spacing) while it binds:
		// the provider limited it lately, or sends wait for their slots.
		// A limit only stated, with nobody waiting, lets its bucket go at
		// once, as the provider would (R27: a fan-out sends what the limit
		// lets through, and the rest spaced).
		spaced := l == laneRequests && (hit.Has(l) && a.Limited || s.Next.After(now.Add(pace.DurNs(s.Burst))) ||
			!s.Limited.IsZero() && now.Sub(s.Limited) < pace.IdleAfter)
		n := pace.News{Counts: a.Counts[l], Hit: hit.Has(l), OK: a.OK, Cost: cost[l], Sent: sent, Spacing: spaced,
			Reset: a.Reset[l], ResetRes: a.ResetRes[l], HasReset: a.HasReset[l]}
		if n.Hit {
			n.Ask, n.AskRes, n.HasAsk = a.Ask, a.AskRes, a.HasAsk
			n.Explained = n.Counts.OK && float64(n.Counts.Remaining) < max(cost[l], 1)
		}
		if tk != nil && tk.charged.Has(l) {
			n.Paced, n.Generation, n.PacedPer = true, tk.gen[l], tk.charge[l]/max(cost[l], 1)
			n.Queued = tk.queued.Has(l)
		}
		if !n.Counts.OK && !n.Hit && !n.HasReset && !(n.OK && r.Per() > 0) {
			continue // nothing said of this lane
		}
		quiet := maxDuration
		if !s.Limited.IsZero() {
			quiet = now.Sub(s.Limited)
		}
		eff := pace.Hear(r, now, quiet, n)
		if eff.Changed {
			ops = append(ops, store.Op{Kind: store.OpRates, Lane: l, Version: s.Version,
				Per: eff.Rates.Per(), Burst: eff.Rates.Burst(), Rates: eff.Rates.Encode()})
		}
		if eff.Limited {
			ops, urgent = append(ops, store.Op{Kind: store.OpLimited, Lane: l}), true
		}
		if !eff.Hold.IsZero() && eff.Hold.After(s.Until) {
			ops = append(ops, store.Op{Kind: store.OpHold, Lane: l, For: eff.Hold.Sub(now), Refuse: eff.Refuse})
			urgent = true
		}
		if !eff.Full.IsZero() && eff.Rates.Per() > 0 {
			op := store.Op{Kind: store.OpCorrect, Lane: l, For: eff.Full.Sub(now)}
			if n.Paced {
				op.Mark, op.Moved = tk.mark[l], tk.movedAt[l]
			}
			ops = append(ops, op)
		}
	}
	return ops, urgent
}

// deferredOp is an op deferred to the key's next take, made at at.
type deferredOp struct {
	op store.Op
	at time.Time
}

// deferOps keeps ops, made at now, for the next take: one rates op per
// lane (the newest, over the version the first was made from), and k's
// rates as they will be, so that the next answer's policy starts from
// them. k.mu is held.
func (k *KeyState) deferOps(ops []store.Op, now time.Time) {
	for _, op := range ops {
		if op.Kind == store.OpRates {
			s := laneOf(&k.state.Record, op.Lane)
			s.Per, s.Burst, s.Rates = op.Per, op.Burst, op.Rates
			if i := k.deferredRates(op.Lane); i >= 0 {
				op.Version = k.deferred[i].op.Version
				k.deferred[i].op = op
				continue
			}
		}
		k.deferred = append(k.deferred, deferredOp{op, now})
	}
}

func (k *KeyState) deferredRates(lane store.LaneID) int {
	for i, d := range k.deferred {
		if d.op.Kind == store.OpRates && d.op.Lane == lane {
			return i
		}
	}
	return -1
}

// takeDeferred returns the ops deferred to the next take, their times from
// now again, and forgets them. k.mu is held.
func (k *KeyState) takeDeferred(now time.Time) []store.Op {
	if len(k.deferred) == 0 {
		return nil
	}
	ops := make([]store.Op, len(k.deferred), len(k.deferred)+1)
	for i, d := range k.deferred {
		ops[i] = d.op
		if d.op.Kind == store.OpCorrect || d.op.Kind == store.OpHold {
			ops[i].For -= max(now.Sub(d.at), 0) // a clock stepped back adds nothing to it
		}
	}
	k.deferred = nil
	return ops
}
