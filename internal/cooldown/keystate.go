package cooldown

import (
	"math"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/retryhttp/retryhttp/store"
)

// A KeyState is one watched key: its state as the Store last said it, on
// the engine's clock (the process's own when there is no Store or it
// fails), what its answers said that waits for the next take, and the
// circuit of the process's own tries. Its fields are read and written with
// mu held.
type KeyState struct {
	key     string
	mu      sync.Mutex
	state   store.State   // on the engine's clock
	swept   bool          // swept: an answer heard later goes to the key's new state
	armedAt time.Time     // a key armed is kept pace.IdleAfter at least
	wake    chan struct{} // closed when the sends waiting may go sooner (wakeAll)
	// wakePush is closed when sends waiting are moved back (R27): the ones
	// whose calls have an end wait on it (order.go).
	wakePush chan struct{}
	waiting  []*waiter // this process's sends waiting for their slots
	arrivals uint64    // the sends queued so far, for their order
	// deferred is what answers said that is worth no round trip of its
	// own: it goes with the next take (R24: a paced send costs one).
	deferred []deferredOp
	// armed is the holds this process armed on its own answers: a Store
	// that loses them gets them back (restore).
	armed [numLanes]armedHold
	// scaledAt is when each lane's schedule was last scaled to a new rate,
	// for the sends that slept through it (scaledDue).
	scaledAt [numLanes]time.Time
	// ownRow is the circuit of this process's own tries, with a shared
	// Store (R25: it refuses this process's calls when its own network
	// fails, and goes on when the Store fails).
	ownRow store.Record
	// loggedDown: the key's circuit is down as last logged, since downSince.
	loggedDown bool
	downSince  time.Time
	// synced is when the Store last said the key's state (a reply, a
	// push), or failed to: a call refused on what the process knows costs
	// no round trip while that is fresh (seeBefore).
	synced time.Time
	// probes is how many of this process's probes of the key are out
	// (R25): until they answer, its other calls are refused, whatever the
	// probe's lease.
	probes int
}

// armedHold is a hold a process armed on an answer it got itself: until is
// on the Store's clock once the Store applied it (onStore), else on the
// engine's.
type armedHold struct {
	until   time.Time
	refuse  bool
	onStore bool
}

// The lanes an engine keeps: a provider states several limits on one
// account, and a send must fit every one it counts against (R23). Each is a
// token bucket as package store keeps it (store.Lane): its schedule, which
// every send changes and a Store keeps atomically (R24), and its rates,
// which the policy learns from the answers (internal/pace).
const (
	laneRequests = store.Requests
	laneTokens   = store.Tokens
	laneInput    = store.InputTokens
	laneOutput   = store.OutputTokens
	numLanes     = store.LaneID(4)
)

// NumLanes is how many lanes a call's Costs has.
const NumLanes = int(numLanes)

// Costs is what a send costs on each lane: 1 request, and its tokens.
type Costs = [NumLanes]float64

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

// CountsTokens reports whether a token lane of k binds at now: held, or
// paced and either limited by the provider within pace.IdleAfter or its
// bucket less than half full. A call then needs its cost in tokens (R23;
// else it is not estimated, and the lane's counts on each answer keep its
// schedule: a key whose provider states a roomy token limit, watched for
// its request limit, reads no body, R27).
func (k *KeyState) CountsTokens(now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for l := laneTokens; l < numLanes; l++ {
		s := k.state.Lane(l)
		if s.Until.After(now) {
			return true
		}
		if s.Per > 0 && (now.Sub(s.Limited) < pace.IdleAfter || s.Burst <= 0 || s.Next.After(now.Add(pace.DurNs(s.Burst/2)))) {
			return true
		}
	}
	return false
}

// Key is k's key.
func (k *KeyState) Key() string { return k.key }

// isSwept reports whether k was swept.
func (k *KeyState) isSwept() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.swept
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// addNs adds ns nanoseconds (a float, saturating) to t.
func addNs(t time.Time, ns float64) time.Time { return t.Add(pace.DurNs(ns)) }

func boolBit(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// maxDuration is the largest Duration.
const maxDuration = time.Duration(math.MaxInt64)

// A WatchSet is an engine's watched keys, read with no lock. lens has bit
// n%64 set for each key n bytes long: a call whose key has a length no
// watched key has is not watched, known without building its key or
// hashing it (R16: 30 ns a call without it). origins, for model keys,
// holds the scheme://host of each key (olens their lengths, as lens), so
// that a call to a host no watched key is of is not watched, known
// without reading its body (hashed: some key is kept by its SHA-256,
// whose host is not known). first is the bits a call looks at before
// anything else (MayWatch): lens for default keys, olens for model keys,
// every bit for a caller's keys or a hashed one.
type WatchSet struct {
	m       map[string]*KeyState
	lens    uint64
	origins map[string]struct{}
	olens   uint64
	hashed  bool
	first   uint64
}

func newWatchSet(m map[string]*KeyState, kind KeyKind) *WatchSet {
	ws := &WatchSet{m: m}
	if kind == ModelKeys {
		ws.origins = make(map[string]struct{}, len(m))
	}
	for k := range m {
		ws.lens |= 1 << (len(k) % 64)
		if kind == ModelKeys {
			o := OriginOf(k)
			ws.origins[o] = struct{}{}
			ws.olens |= 1 << (len(o) % 64)
			ws.hashed = ws.hashed || HashedForm(k)
		}
	}
	switch {
	case len(m) == 0:
	case kind == ModelKeys && !ws.hashed:
		ws.first = ws.olens
	case kind == DefaultKeys:
		ws.first = ws.lens
	default:
		ws.first = ^uint64(0)
	}
	return ws
}

// MayWatch is a call's first look, inlined: false when no watched key can
// be the call's, known from the length n of its scheme://host alone. True
// means the call must look further.
func (ws *WatchSet) MayWatch(n int) bool {
	return n > MaxKeyLen || ws.first&(1<<(n%64)) != 0
}

// Len is how many keys ws holds.
func (ws *WatchSet) Len() int { return len(ws.m) }

// HasLen reports whether a watched key is n bytes long (n%64).
func (ws *WatchSet) HasLen(n int) bool { return ws.lens&(1<<(n%64)) != 0 }

// Lookup returns the state of the key k, nil when it is not watched; it
// allocates nothing.
func (ws *WatchSet) Lookup(k []byte) *KeyState { return ws.m[string(k)] }

// Find returns the state of key, nil when it is not watched.
func (ws *WatchSet) Find(key string) *KeyState { return ws.m[key] }

// Hashed reports whether a watched model key is kept by its hash: its host
// is not known, and every call must build its key.
func (ws *WatchSet) Hashed() bool { return ws.hashed }

// HasOriginLen reports whether a watched model key's scheme://host is n
// bytes long (n%64): else no call of a host of that length is watched.
func (ws *WatchSet) HasOriginLen(n int) bool { return ws.olens&(1<<(n%64)) != 0 }

// HasOrigin reports whether a watched model key is of the scheme://host
// o; it allocates nothing.
func (ws *WatchSet) HasOrigin(o []byte) bool {
	_, ok := ws.origins[string(o)]
	return ok
}
