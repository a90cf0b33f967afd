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

// Down reports whether key's circuit is open, or waits for its probe's
// answer, as far as this process knows now (R25). It is false without
// WithCircuit.
func (c *Cooldown) Down(key string) bool {
	if c == nil || c.circuit == nil {
		return false
	}
	e := c.entry(boundKey(key))
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st.Circuit.IsOpen() || e.row.Circuit.IsOpen()
}

// admit reports, before a send of e's key at now, whether the circuit
// refuses it on what the process knows (no round trip: the fleet's circuit
// as last heard, open or with its probe out, or the process's own row), and
// whether the send is the probe of the process's own row. Past the fleet's
// Open time the Store's take decides (its probe). e.mu is held.
func (e *watchedKey) admit(now time.Time, shared bool) (refuse, ownProbe bool) {
	if c := &e.st.Circuit; c.IsOpen() {
		return refusing(c, now), false
	}
	if shared && e.row.Circuit.IsOpen() {
		res := store.Apply(&e.row, now, []store.Op{{Kind: store.OpTake, Circuit: true}})
		return res.Unavailable, res.Probe
	}
	return false, false
}

// refuses reports whether a send of e's key at now would be refused on
// what the process knows: a circuit open, or its probe out. e.mu is held.
func (e *watchedKey) refuses(now time.Time) bool {
	return refusing(&e.st.Circuit, now) || refusing(&e.row.Circuit, now)
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

// logKey is key as a log may hold it: the default key (scheme://host) as it
// is, one the caller's key function made (which may hold an API key) as the
// first 8 bytes of its SHA-256, in hex.
func (c *Cooldown) logKey(key string) string {
	if c.key == nil {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:8])
}
