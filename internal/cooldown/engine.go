package cooldown

import (
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/retryhttp/retryhttp/internal/anchor"
	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/store"
	"go.uber.org/zap"
)

// KeyKind says where a Cooldown's keys come from: it decides what a call
// must build to find its key (WatchSet.First) and how a key is logged.
type KeyKind uint8

// The KeyKinds.
const (
	DefaultKeys KeyKind = iota // scheme://host, lowercased
	ModelKeys                  // KeyByModel's scheme://host/model: logged as it is
	CallerKeys                 // a caller's key function's: logged as a hash (it may hold an API key)
)

// Circuit is a key's breaker's settings (R25), both above 0.
type Circuit struct {
	Failures int
	Open     time.Duration
}

// Config is an Engine's.
type Config struct {
	Store   store.Store // nil: the process's own state
	Circuit *Circuit    // nil: no circuit
	Keys    KeyKind
}

// An Engine is a Cooldown's state and what it does (the package doc). It
// is safe for concurrent use by multiple goroutines.
type Engine struct {
	keys    KeyKind
	store   store.Store
	stop    func() // ends the Store's Listen
	circuit *Circuit
	id      uint64 // names this process's failures in the fleet's row (processOf)

	// clock is the first Transport's (Bind; time.Now until then),
	// anchored where a Record can hold its instants (internal/anchor).
	clock atomic.Pointer[anchor.Clock]
	bound atomic.Bool
	log   atomic.Pointer[zap.Logger]
	// storeFailing: the Store is failing, as last logged (logStore);
	// storeFailedAt is when an Apply last failed, in ns on the clock.
	storeFailing  atomic.Bool
	storeFailedAt atomic.Int64

	// watched is the set of keys, copied on write: a call reads it with one
	// atomic load and no lock (R16), and it changes only when a key is
	// watched for the first time or goes.
	watched atomic.Pointer[WatchSet]
	mu      sync.Mutex // serializes writers of watched
	sweep   bool       // a sweep is scheduled; mu is held
	// fullSweep is when a new key last found the set full and looked for
	// room; mu is held.
	fullSweep time.Time
}

const (
	maxKeys = 4096 // bounds an engine's memory
	// sweepEvery is how often, in real time, the keys are looked over for
	// one that has gone quiet, while any is watched.
	sweepEvery = time.Second
	// maxDeferred bounds the ops deferred to a key's next take.
	maxDeferred = 32
)

// New returns an Engine with nothing watched. With a Store it listens to
// it (Store.Listen) until Close, or until the Engine is garbage collected.
func New(cfg Config) *Engine {
	e := &Engine{keys: cfg.Keys, store: cfg.Store, circuit: cfg.Circuit, id: processOf(cfg.Store)}
	e.clock.Store(anchor.New(time.Now))
	if e.store == nil {
		return e
	}
	// The Store holds the listener, and so would hold e for its whole
	// life: an Engine per test or per tenant would never go. The listener
	// reaches e weakly, and e's collection stops it.
	wp := weak.Make(e)
	e.stop = e.store.Listen(func(key string, st store.State) {
		if eng := wp.Value(); eng != nil {
			eng.onPush(key, st)
		}
	})
	runtime.AddCleanup(e, func(stop func()) { stop() }, e.stop)
	return e
}

// processID names this process in the fleet's circuit rows.
var processID = rand.Uint64()

// processOf is what names an engine's failures in the fleet's row of a
// circuit (R25), whose quorum is two processes: this process, given s.
// Engines of one process given one Store count once (two Cooldowns of
// one process whose network fails are one process failing). A Store made
// apart (a pointer of its own: retryredis.NewStore per replica in a
// benchmark of a fleet in one process) is a process apart, and every
// engine given a store.Local is one: a Local is one process's, and the
// Cooldowns sharing it are a test's replicas (retryhttptest/fleet).
func processOf(s store.Store) uint64 {
	if _, ok := s.(*store.Local); ok || s == nil {
		return rand.Uint64()
	}
	if v := reflect.ValueOf(s); v.Kind() == reflect.Pointer {
		return processID ^ uint64(v.Pointer())*0x9e3779b97f4a7c15
	}
	return processID
}

// Close stops the engine's listening to its Store. The engine still works
// after it, on what its process hears itself.
func (e *Engine) Close() {
	if e.stop != nil {
		e.stop()
	}
}

// Bind gives e the clock and the logger of the first Transport made with
// it; later calls do nothing.
func (e *Engine) Bind(now func() time.Time, log *zap.Logger) {
	if e.bound.CompareAndSwap(false, true) {
		e.clock.Store(anchor.New(now))
		e.log.Store(log)
	}
}

// HasCircuit reports whether e has a circuit (R25).
func (e *Engine) HasCircuit() bool { return e.circuit != nil }

// Now is e's clock, anchored: every time it keeps is on it.
func (e *Engine) Now() time.Time { return e.clock.Load().Now() }

// logger is the logger bound to e.
func (e *Engine) logger() *zap.Logger {
	if l := e.log.Load(); l != nil {
		return l
	}
	return zap.NewNop()
}

// Until returns the end of key's hold (the latest of its lanes'), on the
// clock e was bound to; the zero Time when key is not held.
func (e *Engine) Until(key string) time.Time {
	k := e.Find(key)
	if k == nil {
		return time.Time{}
	}
	now := e.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	var u time.Time
	for l := range k.state.Lanes {
		if until := k.state.Lanes[l].Until; until.After(now) {
			u = later(u, until)
		}
	}
	return e.clock.Load().Off(u)
}

// Down reports whether key's circuit refuses a call now, as far as this
// process knows; false without a circuit.
func (e *Engine) Down(key string) bool {
	if e.circuit == nil {
		return false
	}
	k := e.Find(key)
	if k == nil {
		return false
	}
	now := e.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.refuses(now)
}

// Reset forgets every key. A shared Store's keys are left as they are.
func (e *Engine) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ws := e.watched.Load(); ws != nil {
		for _, k := range ws.m {
			k.mu.Lock()
			k.swept = true
			k.mu.Unlock()
		}
	}
	e.watched.Store(nil)
}

// Watched is the set of watched keys: nil when none is.
func (e *Engine) Watched() *WatchSet { return e.watched.Load() }

// Find returns key's state, nil when it is not watched.
func (e *Engine) Find(key string) *KeyState {
	if ws := e.watched.Load(); ws != nil {
		return ws.m[key]
	}
	return nil
}

// Watch returns key's state, made if it has none; nil when maxKeys are
// watched and none is idle. A new key copies the set (it is read without
// a lock): arming is rare, once per key per episode of 429s.
func (e *Engine) Watch(key string, now time.Time) *KeyState {
	e.mu.Lock()
	defer e.mu.Unlock()
	var old map[string]*KeyState
	if ws := e.watched.Load(); ws != nil {
		old = ws.m
	}
	if k := old[key]; k != nil {
		return k
	}
	if len(old) >= maxKeys {
		if now.Sub(e.fullSweep) < sweepEvery {
			return nil // full, and looked over less than a second ago
		}
		e.fullSweep = now
		if old = live(old, now); len(old) >= maxKeys {
			return nil
		}
	}
	m := maps.Clone(old)
	if m == nil {
		m = make(map[string]*KeyState)
	}
	k := &KeyState{key: key, armedAt: now}
	m[key] = k
	e.watched.Store(newWatchSet(m, e.keys))
	e.scheduleSweep()
	return k
}

// live copies the keys of m that are not idle at now, and marks the
// others swept. e.mu is held.
func live(m map[string]*KeyState, now time.Time) map[string]*KeyState {
	out := make(map[string]*KeyState, len(m))
	for name, k := range m {
		k.mu.Lock()
		idle := len(k.deferred) == 0 && k.probes == 0 && isIdle(&k.state.Record, now) && isIdle(&k.ownRow, now) &&
			now.Sub(k.armedAt) >= pace.IdleAfter
		k.swept = idle
		k.mu.Unlock()
		if !idle {
			out[name] = k
		}
	}
	return out
}

// scheduleSweep makes sure a sweep will run; e.mu is held. The sweep runs
// on a real timer, not the injected clock: it is housekeeping, not a wait,
// and a test clock that only moves with waits (retryhttptest.Clock) must
// not have its waits cut by it. Whether a key is idle is read on the
// injected clock.
func (e *Engine) scheduleSweep() {
	if e.sweep {
		return
	}
	e.sweep = true
	time.AfterFunc(sweepEvery, e.Sweep)
}

// Sweep drops the keys that have nothing left to say, so that a key nobody
// calls again costs the others nothing: once none is watched, a call pays
// one atomic load (R16). It runs every sweepEvery while any key is
// watched; a test may run it itself.
func (e *Engine) Sweep() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sweep = false
	old := e.watched.Load()
	if old == nil {
		return
	}
	m := live(old.m, e.Now())
	if len(m) == len(old.m) {
		e.scheduleSweep()
		return
	}
	if len(m) == 0 {
		e.watched.Store(nil)
		return
	}
	e.watched.Store(newWatchSet(m, e.keys))
	e.scheduleSweep()
}

// Len is how many keys are watched.
func (e *Engine) Len() int {
	if ws := e.watched.Load(); ws != nil {
		return len(ws.m)
	}
	return 0
}
