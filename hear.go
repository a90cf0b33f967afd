package retryhttp

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/store"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/internal/signal"
)

// heard is what one try tells a Cooldown (R17, R18, R23): the server's ask
// on a failed try (with the resolution of its form), and, on any answer,
// each lane's count, an exhausted lane's reset, and which limit an error
// body says a 429 is about.
type heard struct {
	limited bool // a 429, or a try the Classifier calls Throttled
	ok      bool // a success (status below 400): a learned rate may grow
	// The server's ask on a failed try (R5, R19), and its resolution: what
	// the true wait may be shorter by (1 s for whole seconds).
	ask, askRes time.Duration
	hasAsk      bool
	counts      [numLanes]signal.Counts
	// The reset of each lane exhausted (R18), and its resolution.
	reset, resetRes [numLanes]time.Duration
	hasReset        [numLanes]bool
	body            laneMask  // the limit the error body names (bodyLimits)
	sent            time.Time // when the Cooldown let the try go; zero when it did not pace it
	tk              *ticket   // the try's slot; nil when it was not paced
	// tooLarge: OpenAI's "Request too large" (a call asking for more than
	// the whole limit): the caller's mistake, which says nothing of the
	// provider's limit, so no limit, cut or hold (it halved the
	// shared token lane's rate and paused it).
	tooLarge bool
}

// heardOf reads what resp, classified class, says for a Cooldown.
func heardOf(resp *http.Response, class Class, ask time.Duration, hasAsk, askInBody bool, now time.Time) heard {
	var h heard
	if resp == nil {
		return h
	}
	h.limited = resp.StatusCode == http.StatusTooManyRequests || class == Throttled
	h.ok = resp.StatusCode < 400
	if class != Permanent && hasAsk {
		h.ask, h.hasAsk = ask, true
		h.askRes = askResolution(resp.Header, askInBody)
	}
	h.reset, h.resetRes, h.hasReset = signal.LaneResets(resp.Header, now)
	h.counts = signal.LaneCounts(resp.Header, now)
	return h
}

// arms reports whether an answer arms a key nobody watches: a limit, an
// ask, or an exhausted limit's reset.
func (h *heard) arms() bool {
	if h.limited && !h.tooLarge || h.hasAsk && h.ask > 0 {
		return true
	}
	for l := range h.reset {
		if h.hasReset[l] && h.reset[l] > 0 {
			return true
		}
	}
	return false
}

// needsCosts reports whether what the answer says of a token lane needs
// the call's cost in tokens.
func (h *heard) needsCosts() bool {
	for l := laneTokens; l < numLanes; l++ {
		if h.counts[l].OK || h.hasReset[l] || h.body.Has(l) {
			return true
		}
	}
	return false
}

// hitLanes is the lanes a limit is about (R23: a 429 cuts or holds only the
// limit it hit): those its error body names; else those its counts say
// could not take the send (remaining below its cost) or are exhausted;
// else, when nothing says, the request lane. A call too large hits none.
func (h *heard) hitLanes(costs [numLanes]float64) laneMask {
	if h.tooLarge || !h.limited && (!h.hasAsk || h.ask <= 0) {
		return 0
	}
	if h.body != 0 {
		return h.body
	}
	var m laneMask
	for l := range numLanes {
		if c := h.counts[l]; c.OK && costs[l] > 0 && float64(c.Remaining) < costs[l] || h.hasReset[l] {
			m |= 1 << l
		}
	}
	if m == 0 {
		m = 1 << laneRequests
	}
	return m
}

// askResolution is how much shorter than it says the server's ask may truly
// be: an ask in a body (a protobuf duration) is exact, retry-after-ms and a
// decimal Retry-After are good to the millisecond, and whole seconds or an
// HTTP-date to the second.
func askResolution(h http.Header, inBody bool) time.Duration {
	switch {
	case inBody:
		return 0
	case h.Get("Retry-After-Ms") != "":
		return time.Millisecond
	case strings.Contains(h.Get("Retry-After"), "."):
		return time.Millisecond
	}
	return time.Second
}

// hear records what an answer says. e is its call's entry, nil when the
// call's key was not watched; an answer that limits arms the key, which key
// gives ("" leaves the call out). costs gives the call's cost when the
// answer needs it.
func (c *Cooldown) hear(ctx context.Context, e *watchedKey, now time.Time, h heard, costs func() [numLanes]float64, key func() string) {
	if e == nil {
		if !h.arms() {
			return // free flow, nothing to arm: no lock (R16)
		}
		key := key()
		if key == "" {
			return
		}
		if e = c.watch(key, now); e == nil {
			return // bounded memory: this key goes unshared
		}
	}
	if e.isGone() {
		// Swept while the try was out (an answer after 10 s, the sweep at
		// 5 s): what it says goes to the key as it is now, not to an entry
		// nobody looks at.
		if e = c.watch(e.key, now); e == nil {
			return
		}
	}
	cost := [numLanes]float64{1}
	if h.tk != nil {
		cost = h.tk.costs
	}
	if h.needsCosts() && cost[laneTokens]+cost[laneInput]+cost[laneOutput] == 0 {
		cost = costs() // a token lane is heard of for the first time
	}
	c.applyAnswer(ctx, e, now, h, cost)
}

func (e *watchedKey) isGone() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gone
}

// applyAnswer applies the policy to what an answer says of each lane of e's key
// (pace.Hear), and has the Store do what it decided: at once when the
// provider limited or held the key (the other calls, and other processes,
// must know now), else with the next take (R24: a paced send costs one
// round trip; the in-process Store has no round trip to save).
func (c *Cooldown) applyAnswer(ctx context.Context, e *watchedKey, now time.Time, h heard, cost [numLanes]float64) {
	e.mu.Lock()
	st := e.st
	ops, urgent := newsOps(&st, now, h, cost)
	if len(ops) == 0 {
		e.mu.Unlock()
		return
	}
	for _, op := range ops {
		if op.Kind == store.OpHold { // this process's own: restore may put it back (cooldown_store.go)
			e.own[op.Lane] = ownHold{until: now.Add(op.For), refuse: op.Refuse}
		}
	}
	urgent = urgent || st.Seq == 0 || c.store == nil
	if !urgent && len(e.pending) < maxPending {
		e.addPending(ops, now)
		e.mu.Unlock()
		return
	}
	ops = append(e.takePending(now), ops...)
	e.mu.Unlock()
	c.apply(context.WithoutCancel(ctx), e, ops, nil)
}

// newsOps is what the policy makes of h for each lane of st, as Store ops,
// and whether any of them is a limit or a hold.
func newsOps(st *store.State, now time.Time, h heard, cost [numLanes]float64) (ops []store.Op, urgent bool) {
	hit := h.hitLanes(cost)
	for l := range numLanes {
		s := st.Lane(l)
		r := pace.DecodeRates(s.Rates)
		n := pace.News{Counts: h.counts[l], Hit: hit.Has(l), OK: h.ok, Cost: cost[l], Sent: h.sent, Spacing: l == laneRequests,
			Reset: h.reset[l], ResetRes: h.resetRes[l], HasReset: h.hasReset[l]}
		if n.Hit {
			n.Ask, n.AskRes, n.HasAsk = h.ask, h.askRes, h.hasAsk
			n.Explained = n.Counts.OK && float64(n.Counts.Remaining) < max(cost[l], 1)
		}
		if h.tk != nil && h.tk.charged.Has(l) {
			n.Paced, n.Generation, n.PacedPer = true, h.tk.gen[l], h.tk.charge[l]/max(cost[l], 1)
			n.Queued = h.tk.queued.Has(l)
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
				op.Mark, op.Moved = h.tk.mark[l], h.tk.movedAt[l]
			}
			ops = append(ops, op)
		}
	}
	return ops, urgent
}

// pendingOp is news kept for the next take, computed at at.
type pendingOp struct {
	op store.Op
	at time.Time
}

// addPending keeps ops, computed at now, for the next take: one rates op
// per lane (the newest, over the version the first was computed from), and
// e's rates as they will be, so that the next answer's policy starts from
// them. e.mu is held.
func (e *watchedKey) addPending(ops []store.Op, now time.Time) {
	for _, op := range ops {
		if op.Kind == store.OpRates {
			s := laneOf(&e.st.Record, op.Lane)
			s.Per, s.Burst, s.Rates = op.Per, op.Burst, op.Rates
			if i := e.pendingRates(op.Lane); i >= 0 {
				op.Version = e.pending[i].op.Version
				e.pending[i].op = op
				continue
			}
		}
		e.pending = append(e.pending, pendingOp{op, now})
	}
}

func (e *watchedKey) pendingRates(lane store.LaneID) int {
	for i, p := range e.pending {
		if p.op.Kind == store.OpRates && p.op.Lane == lane {
			return i
		}
	}
	return -1
}

// takePending returns the ops kept for the next take, their times from now
// again, and forgets them. e.mu is held.
func (e *watchedKey) takePending(now time.Time) []store.Op {
	if len(e.pending) == 0 {
		return nil
	}
	ops := make([]store.Op, len(e.pending), len(e.pending)+1)
	for i, p := range e.pending {
		ops[i] = p.op
		if p.op.Kind == store.OpCorrect || p.op.Kind == store.OpHold {
			ops[i].For -= max(now.Sub(p.at), 0) // a clock stepped back adds nothing to it
		}
	}
	e.pending = nil
	return ops
}
