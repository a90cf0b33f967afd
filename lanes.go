package retryhttp

import (
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/retryhttp/retryhttp/store"
)

// A key's lanes: a provider states several limits on one account, and a
// send must fit every one it counts against (R23). Each lane is a token
// bucket as package store keeps it (store.Lane): its schedule, which every
// send changes and a Store keeps atomically (R24), and its rates, which the
// policy learns from the answers (internal/pace).
const (
	laneRequests = store.Requests
	laneTokens   = store.Tokens
	laneInput    = store.InputTokens
	laneOutput   = store.OutputTokens
	numLanes     = store.LaneID(4) // the lanes a Cooldown keeps
)

// laneID names a lane of a key.
type laneID = store.LaneID

// laneMask is a set of lanes (signal.Lanes: bit l for lane l).
type laneMask = signal.Lanes

// laneOf returns lane l of r, made (with those before it) when r has none.
func laneOf(r *store.Record, l laneID) *store.Lane {
	for int(l) >= len(r.Lanes) {
		r.Lanes = append(r.Lanes, store.Lane{})
	}
	return &r.Lanes[l]
}

// isIdle reports whether the state of a key has nothing left to say at now:
// on every lane no hold, its bucket full (nobody waiting for a slot), and
// no limit for pace.IdleAfter; its circuit past its Open time by
// pace.IdleAfter with no probe out (an open circuit nobody calls goes: the
// next call is its probe), or closed with no failure in its row for
// store.KeepFor (a row lives that long: store.Apply's OpFail).
func isIdle(r *store.Record, now time.Time) bool {
	if c := &r.Circuit; c.IsOpen() && (now.Before(c.Open.Add(pace.IdleAfter)) || now.Before(c.Probe)) ||
		!c.IsOpen() && c.Failures > 0 && now.Before(c.Last.Add(store.KeepFor)) {
		return false
	}
	for l := range r.Lanes {
		s := &r.Lanes[l]
		if now.Before(s.Until) || now.Before(s.Next) || now.Sub(s.Limited) < pace.IdleAfter {
			return false
		}
	}
	return true
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// addNs adds ns nanoseconds (a float, saturating) to t.
func addNs(t time.Time, ns float64) time.Time {
	return t.Add(durNs(ns))
}

// durNs converts nanoseconds to a Duration (pace.DurNs).
func durNs(ns float64) time.Duration { return pace.DurNs(ns) }
