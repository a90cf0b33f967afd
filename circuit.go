package retryhttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/retryhttp/retryhttp/store"
	"go.uber.org/zap"
)

// Circuit sets a Cooldown's breaker (R25): when a key's provider is down,
// not just busy, its calls fail at once with ErrUnavailable instead of
// paying for their retries, so that the caller falls back to another model
// at once and the provider is not sent a fleet's retries while it comes
// back.
type Circuit struct {
	// Failures is how many failed tries in a row, with no sign of life
	// between them, open a key's circuit; 0 or less: 5. A failure is a try
	// the Classifier calls Transient (a 5xx it retries, a transport error,
	// a try that ran out of WithTryTimeout); any other answer (a success, a
	// 4xx, a 429) is a sign of life, and the caller's own cancel is no news.
	Failures int
	// Open is how long the circuit stays open before one try, the probe,
	// goes; 0 or less: 1 s. A sign of life closes it; a failed probe opens
	// it for Open again.
	Open time.Duration
}

// WithCircuit gives the Cooldown a breaker per key (R25; see Circuit).
// While a key's circuit is open every call of the key fails at once,
// sending nothing, sleeping nothing and charged nothing: before its first
// try with an *Error of Reason Unavailable whose Err is ErrUnavailable; a
// call whose retry would go ends as when its retries run out (its last
// response handed back, or its last error in an *Error of Reason
// Unavailable). errors.Is(err, ErrUnavailable) holds for both errors, and
// Budget.Err reports them. Once Open has passed, the next try of the key is
// the probe, and every other call fails as while open until it answers.
// With a Store (WithStore) the circuit is the fleet's: every process's
// failures count in one row, any process's sign of life ends it, one probe
// goes for them all, and a process hears that a key opened as it hears of
// a hold; the row opens only on the failures of two processes at least, so
// that one process whose own network fails never refuses the others' calls
// (its own row, kept in the process, refuses its own calls). With the Store
// failing, each process's own row goes on. One Warn entry when a key's
// circuit opens, one Info when it closes, on the first Transport's logger;
// a key the key function made is written as a hash of it. Without
// WithCircuit a call tries as R2 to R9 say.
func WithCircuit(c Circuit) CooldownOption {
	if c.Failures <= 0 {
		c.Failures = store.DefaultFailures
	}
	if c.Open <= 0 {
		c.Open = store.DefaultOpen
	}
	return func(cfg *cooldownConfig) { cfg.circuit = &c }
}

// Down reports whether key's circuit refuses a call now, as far as this
// process knows (R25): it is open, or waits for its probe's answer. Once
// Open has passed with no probe out it is false: the next call is the
// probe (an app that routes by Down comes back to its provider). It is
// false without WithCircuit.
func (c *Cooldown) Down(key string) bool {
	if c == nil || c.circuit == nil {
		return false
	}
	e := c.entry(boundKey(key))
	if e == nil {
		return false
	}
	now := c.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refuses(now)
}

// What the process sees of a send before any round trip (seeBefore).
type seen uint8

const (
	seenTake     seen = iota // the send takes its slot (the Store's, or the process's own state's)
	seenOwnProbe             // it takes its slot as the probe of the process's own row (R25)
	seenFree                 // nothing it counts against is held or paced, and no probe is due: it goes with no take
	seenDown                 // the circuit refuses it
	seenHeld                 // a hold refuses it, or does not fit: the wait is what is left of it
)

// seeBefore says, before a send of e's key at now, what the process knows
// of it with no round trip (R24: a call refused on what the process knows
// costs the Store nothing; a key with nothing to hold or pace costs no
// take). A circuit refuses it while it is open (the fleet's as last heard,
// or the process's own row) or while this process's own probe is out;
// past the fleet's Open the Store's take decides (its probe). A hold of a
// lane it counts against refuses it when refusing, or when it is not
// shorter than within. With a Store, what it heard decides only while it
// is fresh (heard within freshFor, on a clock that has not stepped back
// since): else the Store's take does (a process whose clock stepped back
// an hour read a 15 s hold as an hour's). e.mu is held.
func (e *watchedKey) seeBefore(now time.Time, costs *[numLanes]float64, within time.Duration, circuit, shared bool) (seen, time.Duration) {
	if circuit && e.probes > 0 {
		return seenDown, 0 // this process's probe is out: it waits for its answer
	}
	if shared && !e.fresh(now) {
		return seenTake, 0
	}
	own := false
	if circuit {
		switch c := &e.st.Circuit; {
		case c.IsOpen():
			if refusing(c, now) {
				return seenDown, 0
			}
		case shared && e.row.Circuit.IsOpen():
			res := store.Apply(&e.row, now, []store.Op{{Kind: store.OpTake, Circuit: true}})
			if res.Unavailable {
				return seenDown, 0
			}
			own = res.Probe
		}
	}
	free := len(e.pending) == 0 && !e.st.Circuit.IsOpen() && !own
	for l := range numLanes {
		if costs[l] <= 0 {
			continue
		}
		s := e.st.Lane(l)
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

// fresh reports whether e's state, as the Store last said it, is fresh
// at now. e.mu is held.
func (e *watchedKey) fresh(now time.Time) bool {
	age := now.Sub(e.synced)
	return age >= 0 && age < freshFor
}

// refusesNow reports whether a send of e's key at now would be refused on
// what the process knows (refuses).
func (e *watchedKey) refusesNow(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.refuses(now)
}

// refuses reports whether a send of e's key at now would be refused on
// what the process knows: a circuit open, its probe out, or this
// process's own probe out (a probe's answer may take longer than its
// lease: the process knows it is still out). e.mu is held.
func (e *watchedKey) refuses(now time.Time) bool {
	return e.probes > 0 || refusing(&e.st.Circuit, now) || refusing(&e.row.Circuit, now)
}

// refusing reports whether c refuses a send at now: open, before its Open
// time or with its probe out.
func refusing(c *store.Circuit, now time.Time) bool {
	return c.IsOpen() && (now.Before(c.Open) || !c.Probe.IsZero() && now.Before(c.Probe))
}

// down reports whether e's key is down: its circuit open, or its probe
// out, as far as the process knows. e.mu is held.
func (e *watchedKey) down() bool { return e.st.Circuit.IsOpen() || e.row.Circuit.IsOpen() }

// failOp is the Store op of a failed try of this process.
func (c *Cooldown) failOp(probe, solo bool) store.Op {
	return store.Op{Kind: store.OpFail, From: c.id, Failures: c.circuit.Failures, Open: c.circuit.Open, Solo: solo, Probe: probe}
}

// circuitHeard tells the circuit what a try of e's key said: a failure,
// a sign of life, or, for a probe, no answer (its call ended). probe and
// ownProbe: the try was the fleet's probe, or the process's own row's.
func (c *Cooldown) circuitHeard(ctx context.Context, e *watchedKey, now time.Time, fail, alive, probe, ownProbe bool) {
	shared := c.store != nil
	var op store.Op
	e.mu.Lock()
	if (probe || ownProbe) && e.probes > 0 {
		e.probes-- // the probe's answer, or its end: this process's probe is back
	}
	switch {
	case fail:
		op = c.failOp(probe, !shared)
		if shared {
			store.Apply(&e.row, now, []store.Op{c.failOp(ownProbe, true)})
		}
	case alive:
		e.row = store.Record{}
		if e.st.Circuit == (store.Circuit{}) {
			c.noteCircuit(e, now)
			e.mu.Unlock()
			return // no row to end, nothing open: nothing to write (R16's habit)
		}
		op = store.Op{Kind: store.OpAlive}
	default: // a probe with no answer: the next try probes
		if ownProbe {
			store.Apply(&e.row, now, []store.Op{{Kind: store.OpProbeEnd}})
		}
		if !probe {
			e.mu.Unlock()
			return
		}
		op = store.Op{Kind: store.OpProbeEnd}
	}
	ops := append(e.takePending(now), op)
	c.noteCircuit(e, now) // (the process's own row; apply notes the Store's)
	e.mu.Unlock()
	c.apply(context.WithoutCancel(ctx), e, ops, nil)
}

// noteCircuit logs the circuit of e's key opening or closing, once each
// time, as the process sees it (R25), and ends the process's own row once
// the fleet's circuit opened: one probe for the fleet. e.mu is held.
func (c *Cooldown) noteCircuit(e *watchedKey, now time.Time) {
	if c.circuit == nil {
		return
	}
	if e.st.Circuit.IsOpen() && e.row.Circuit != (store.Circuit{}) {
		e.row = store.Record{}
	}
	down := e.down()
	if down == e.logged {
		return
	}
	e.logged = down
	l := c.logger()
	if down {
		e.wakeAll() // the sends waiting for a slot see it open, and are refused
		cc := e.st.Circuit
		if !cc.IsOpen() {
			cc = e.row.Circuit
		}
		if ce := l.Check(zap.WarnLevel, msgCircuitOpen); ce != nil {
			ce.Write(zap.String("key", c.logKey(e.key)), zap.Int("failures", cc.Failures),
				zap.Int64("open_ms", max(cc.Open.Sub(now), 0).Milliseconds()))
		}
		e.since = now
		return
	}
	if ce := l.Check(zap.InfoLevel, msgCircuitClosed); ce != nil {
		ce.Write(zap.String("key", c.logKey(e.key)), zap.Int64("down_ms", now.Sub(e.since).Milliseconds()))
	}
}

const (
	msgCircuitOpen   = "llm provider down — circuit open"
	msgCircuitClosed = "llm provider back — circuit closed"
)

// logKey is key as a log may hold it: a key the library made (the default
// scheme://host, KeyByModel's scheme://host/model) as it is: it holds no
// secret, and an operator must tell which model a line is about; one the
// caller's key function made (which may hold an API key) as the first 8
// bytes of its SHA-256, in hex.
func (c *Cooldown) logKey(key string) string {
	if c.key == nil || c.byModel {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// probeOut counts a probe of e's key this process sent (seeBefore).
func (e *watchedKey) probeOut() {
	e.mu.Lock()
	e.probes++
	e.mu.Unlock()
}
