package retryhttp

import (
	"crypto/sha256"
	"maps"
	"math/rand/v2"
	"net/http"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/internal/anchor"
	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/store"
	"go.uber.org/zap"
)

// A Cooldown shares what a provider says about the client across every call
// of every Transport given it (WithCooldown): a 429 with Retry-After: 20 is
// about the client, not one request (RFC 9110: "the user agent ought to
// wait"), so the other calls to that provider hold too instead of each
// collecting its own 429 (R17).
//
// It keeps, per key, a lane per limit the provider states (requests, and
// tokens: R23): until when the provider asked clients not to come back, and
// how fast to send once it has limited them. The key is by default the
// request URL's scheme://host, lowercased; NewCooldown takes any other: per
// model (KeyByModel), per API key, ...
//
// The hold. The server's ask (Retry-After, retry-after-ms, or a body's
// retryDelay) on a failed try holds every call to the limit it is about,
// forward only, for all of it when it is longer than the resolution of its
// form: Retry-After: 20 holds every call 20 s. An ask within one resolution
// (a whole-second Retry-After: 1 may mean a millisecond) holds only the call
// that got it, which never retries before its ask ends. An exhausted limit's
// reset (ParseRateLimitReset) holds every call until the limit may be back
// (a second before a whole-second reset), where the provider states no
// bucket to wait in. A hold armed while sends wait for their slots moves
// them on in their order and spacing. No hold is longer than DefaultMaxWait:
// a provider that asks for more has every call fail at once meanwhile.
//
// The pace. A lane the provider limits (a 429 about it, or a failed try
// with an ask) is paced from then on, and so is one whose counts it states
// on the answers of a watched key: each send takes the next slot of every
// lane it counts against, first come first served (a retry goes before the
// calls waiting), when each lane's bucket covers its cost: one request, and
// its tokens (WithTokens, else EstimateTokens) on a token lane. The rate is
// the provider's word when it gives its counts at a useful resolution
// (limit − remaining in the reset window; the count also sets the bucket and
// corrects the schedule); otherwise it is learned, growing with each success
// and cut by a 429 to a send paced at it. A 429 cuts or holds only the limit
// it hit. A key not limited for 5 s, with nobody waiting, flows freely again.
//
// Every wait a Cooldown imposes, hold or slot, is known when it starts and is
// a wait like any other: it must fit the deadline and the Budget, it is
// charged to the Budget, and it ends when the caller's context does. A wait
// that does not fit sends nothing: the call fails at once with
// ErrRateLimited. No call ever waits for another call's answer.
//
// What it costs. A call to a key that is not watched pays a map lookup (one
// atomic load when no key is); its success is handed back unread and its
// cost is not estimated, so a first try costs what it costs without a
// Cooldown (R16). Only the answers to a key the Cooldown watches, and every
// failed try, are read for it.
//
// Its state is kept by a Store: the process's own by default, or one shared
// with other processes (WithStore, R24). The zero Cooldown is not usable;
// make one with NewCooldown. A Cooldown is safe for concurrent use by
// multiple goroutines. Transports sharing a Cooldown should share one clock:
// its times are read on the clock of the first Transport made with it.
// Memory stays bounded: a key goes when it has nothing left to say, at most
// 4096 keys are watched at once (a signal for another key is then ignored),
// and a key longer than 256 bytes is kept by its SHA-256.
type Cooldown struct {
	key func(*http.Request) string
	// byModel: key is KeyByModel itself, which the Cooldown reads without
	// calling it (keys.go): a call's body is read only for a host that has
	// a watched key.
	byModel bool
	// clock is the first Transport's (New; time.Now until then), anchored
	// where a Record can hold its instants (internal/anchor: clock.NewMock
	// starts at the Unix epoch): every time the Cooldown keeps is on it.
	clock atomic.Pointer[anchor.Clock]
	bound atomic.Bool

	// store is WithStore's, shared with other processes (R24); nil keeps
	// every key's state in its entry, in the process. stop ends its Listen.
	store store.Store
	stop  func()
	// circuit is WithCircuit's (R25); nil is none. id names this
	// process's failures in a shared Store's rows (store.Op.From):
	// processOf.
	circuit *Circuit
	id      uint64
	log     atomic.Pointer[zap.Logger] // the first Transport's, bound with the clock
	// storeFailing: the Store is failing, as last logged (noteStore);
	// storeFailedAt is when an Apply last failed, in ns on the clock.
	storeFailing  atomic.Bool
	storeFailedAt atomic.Int64

	// watched is the set of keys, copied on write: a call reads it with one
	// atomic load and no lock (R16), and it changes only when a key is
	// limited for the first time or goes.
	watched atomic.Pointer[watchSet]
	mu      sync.Mutex // serializes writers of watched
	sweep   bool       // a sweep is scheduled; mu is held to read or write it
	// fullSweep is when a new key last found the map full and looked for
	// room; mu is held.
	fullSweep time.Time
}

// A CooldownOption configures a Cooldown in NewCooldown.
type CooldownOption func(*cooldownConfig)

type cooldownConfig struct {
	store   store.Store
	circuit *Circuit
}

// WithStore makes the Cooldown keep its state in s, shared with every
// process whose Cooldown has a Store on the same backend (R24:
// retryredis.NewStore keeps it on Redis; store.NewLocal shares it among
// the Cooldowns of one process, as a test of a fleet does). The default,
// and nil, keeps it in the process. When s fails (an error, a reply out of
// range, or no answer within its bound), the call goes on with what the
// process knows (the fleet's schedule as last heard, so that it errs on
// the slow side): a Store never fails a call. The Cooldown says so on the
// logger of the first Transport made with it: one Warn entry when s starts
// failing, with the error's text, and one Info when it works again. A
// Cooldown given a Store listens to it (Store.Listen) until Close, or
// until the Cooldown is garbage collected.
func WithStore(s store.Store) CooldownOption {
	return func(c *cooldownConfig) { c.store = s }
}

// cooling is one watched key: its state as last heard from the Store, on
// the Cooldown's clock (the process's own when the Store fails), and the
// news of its answers not yet worth a round trip to a shared Store.
type watchedKey struct {
	key     string
	mu      sync.Mutex
	st      store.State       // on the Cooldown's clock
	gone    bool              // swept: an answer heard later goes to the key's new entry
	armedAt time.Time         // a key armed is kept pace.IdleAfter at least
	wake    chan struct{}     // closed when the sends waiting may go sooner (woken)
	pending []pendingOp       // sent with the next take (R24: a paced send costs one round trip)
	own     [numLanes]ownHold // the holds this process armed on its own answers (restore)
	// scaledAt is when each lane's schedule was last scaled to a new rate,
	// for the sends that slept through it (scaledDue).
	scaledAt [numLanes]time.Time
	// row is the circuit of this process's own tries, with a shared Store
	// (R25: it refuses this process's calls when its own network fails,
	// and goes on when the Store fails); logged: the key's circuit is down
	// as last logged, since when.
	row    store.Record
	logged bool
	since  time.Time
	// synced is when the Store last said the key's state (a reply or a
	// push), on the Cooldown's clock: a call refused on what the process
	// knows costs no round trip while that is fresh (seeBefore).
	synced time.Time
	// probes is how many of this process's probes of the key are out
	// (R25): until they answer, its other calls are refused, whatever the
	// probe's lease.
	probes int
}

// ownHold is a hold a process armed on an answer it got itself: until is
// on the Store's clock once the Store applied it (onStore), else on the
// Cooldown's.
type ownHold struct {
	until   time.Time
	refuse  bool
	onStore bool
}

const (
	maxCoolingKeys = 4096 // bounds the memory of a Cooldown
	// maxKeyLen bounds a key's bytes: a longer one is kept as its SHA-256
	// ("sha256:" and 64 hex digits), so that 4096 keys of 64 KiB (issue
	// 21: 288 MiB) cost what 4096 short ones do.
	maxKeyLen = 256
	hashedLen = len("sha256:") + 2*sha256.Size
	// sweepEvery is how often, in real time, the keys are looked over for
	// one that has gone quiet, while any is watched.
	sweepEvery = time.Second
	// maxPending bounds the news kept for the next take.
	maxPending = 32
)

// NewCooldown returns a Cooldown with nothing cooling. key maps a request
// to the provider limit it counts against; nil means the request URL's
// scheme://host, lowercased, and KeyByModel adds the model the request
// asks for (for OpenAI's and Anthropic's limits per model). A key function
// that returns "" leaves that request out: it neither holds nor arms. A
// key function that panics has the call's response and bodies closed
// before the panic goes on up, as an Observer's (R15). Nil options are
// ignored.
//
// A key function gets the caller's request, as RoundTrip got it (never a
// retry's clone), with its context. It may read the request (its URL, its
// headers), its context's values, and a copy of its body that it gets
// from GetBody (and closes); it must not read or close req.Body, which is
// what the transport sends, nor modify the request, and it must be safe
// for concurrent use: it runs on the goroutine of each call. It runs at
// most once per call, however many tries the call makes (the call keeps
// its key), the first time the call needs it: before or after a try while
// the Cooldown watches any key (RoundTrip's look for a hold before the
// first try, the hold before a retry, the look after an answer), or after
// a try whose answer arms a key (a 429 or a server's ask, an exhausted
// limit's reset; with WithCircuit, a failure). So a call whose first try
// succeeds runs it once while any key is watched, and not at all otherwise
// (TestCooldownKeyRunsOncePerCall). KeyByModel itself is not called: the
// Cooldown reads the same key without it, and reads no body for a host
// none of its watched keys is of.
func NewCooldown(key func(*http.Request) string, opts ...CooldownOption) *Cooldown {
	var cfg cooldownConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	c := &Cooldown{key: key, byModel: isKeyByModel(key), store: cfg.store, circuit: cfg.circuit, id: processOf(cfg.store)}
	c.clock.Store(anchor.New(time.Now))
	if c.store == nil {
		return c
	}
	// The Store holds the listener, and so would hold c for its whole
	// life: a Cooldown per test or per tenant would never go. The listener
	// reaches c weakly, and c's collection stops it.
	wp := weak.Make(c)
	c.stop = c.store.Listen(func(key string, st store.State) {
		if cd := wp.Value(); cd != nil {
			cd.heardFromStore(key, st)
		}
	})
	runtime.AddCleanup(c, func(stop func()) { stop() }, c.stop)
	return c
}

// processID names this process in a fleet's circuit rows.
var processID = rand.Uint64()

// processOf is what names a Cooldown's failures in the fleet's row of a
// circuit (R25), whose quorum is two processes: this process, given s.
// Cooldowns of one process given one Store count once (two Cooldowns of
// one process whose network fails are one process failing). A Store made
// apart (a pointer of its own: retryredis.NewStore per replica in a
// benchmark of a fleet in one process) is a process apart, and every
// Cooldown given a store.Local is one: a Local is one process's, and the
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

// Close stops the Cooldown's listening to its Store (WithStore): other
// processes' news no longer reaches it. A Cooldown that is not closed
// stops when it is garbage collected. The Cooldown still works after
// Close, on what its process hears itself. Close always returns nil.
func (c *Cooldown) Close() error {
	if c != nil && c.stop != nil {
		c.stop()
	}
	return nil
}

// WithCooldown makes every call hold and pace while its key is cooling, and
// lets its answers arm c (R17). c may be shared by many Transports. The
// default, and nil, is no Cooldown: each call learns of a rate limit on its
// own.
func WithCooldown(c *Cooldown) Option {
	return func(cfg *config) { cfg.cooldown = c }
}

// Until returns the end of key's hold (the latest of its lanes'): the zero
// Time when key is not held (never limited, its hold is over, or it is only
// paced).
func (c *Cooldown) Until(key string) time.Time {
	if c == nil {
		return time.Time{}
	}
	e := c.entry(boundKey(key))
	if e == nil {
		return time.Time{}
	}
	now := c.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	var u time.Time
	for l := range e.st.Lanes {
		if until := e.st.Lanes[l].Until; until.After(now) {
			u = later(u, until)
		}
	}
	return c.clock.Load().Off(u)
}

// Reset forgets every key: what the Cooldown heard, held and paced. A table
// test that shares one Cooldown across its rows calls it before each row,
// so that a row's 429 does not hold the next. With WithStore,
// the shared Store's keys are left as they are (they expire).
func (c *Cooldown) Reset() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ws := c.watched.Load(); ws != nil {
		for _, e := range ws.m {
			e.mu.Lock()
			e.gone = true
			e.mu.Unlock()
		}
	}
	c.watched.Store(nil)
}

// bind gives c the clock and the logger of the first Transport made with
// it: a circuit's openings and closings, and a Store failing, are written
// to that logger (R25).
func (c *Cooldown) bind(clk clock.Clock, log *zap.Logger) {
	if c.bound.CompareAndSwap(false, true) {
		c.clock.Store(anchor.New(clk.Now))
		c.log.Store(log)
	}
}

// logger is the logger bound to c.
func (c *Cooldown) logger() *zap.Logger {
	if l := c.log.Load(); l != nil {
		return l
	}
	return zap.NewNop()
}

// now is the Cooldown's clock, anchored: every time it keeps is on it.
func (c *Cooldown) now() time.Time { return c.clock.Load().Now() }

// entry returns key's entry, nil when it is not watched.
func (c *Cooldown) entry(key string) *watchedKey {
	if ws := c.watched.Load(); ws != nil {
		return ws.m[key]
	}
	return nil
}

// watch returns key's entry, made if it has none; nil when 4096 keys are
// watched and none is idle. A new key copies the map (it is read without a
// lock): arming is rare, once per key per episode of 429s.
func (c *Cooldown) watch(key string, now time.Time) *watchedKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[string]*watchedKey
	if ws := c.watched.Load(); ws != nil {
		old = ws.m
	}
	if e := old[key]; e != nil {
		return e
	}
	if len(old) >= maxCoolingKeys {
		if now.Sub(c.fullSweep) < sweepEvery {
			return nil // full, and looked over less than a second ago
		}
		c.fullSweep = now
		if old = c.live(old, now); len(old) >= maxCoolingKeys {
			return nil
		}
	}
	m := maps.Clone(old)
	if m == nil {
		m = make(map[string]*watchedKey)
	}
	e := &watchedKey{key: key, armedAt: now}
	m[key] = e
	c.watched.Store(c.newWatchSet(m))
	c.schedule()
	return e
}

// live copies the entries of m that are not idle at now, and marks the
// others gone. c.mu is held.
func (c *Cooldown) live(m map[string]*watchedKey, now time.Time) map[string]*watchedKey {
	out := make(map[string]*watchedKey, len(m))
	for k, e := range m {
		e.mu.Lock()
		idle := len(e.pending) == 0 && e.probes == 0 && isIdle(&e.st.Record, now) && isIdle(&e.row, now) &&
			now.Sub(e.armedAt) >= pace.IdleAfter
		e.gone = idle
		e.mu.Unlock()
		if !idle {
			out[k] = e
		}
	}
	return out
}

// schedule makes sure a sweep will run; c.mu is held. The sweep runs on a
// real timer, not the injected clock: it is housekeeping, not a wait, and a
// test clock that only moves with waits (retryhttptest.Clock) must not have
// its waits cut by it. Whether a key is idle is read on the injected clock.
func (c *Cooldown) schedule() {
	if c.sweep {
		return
	}
	c.sweep = true
	time.AfterFunc(sweepEvery, c.sweepIdle)
}

// sweepIdle drops the keys that have nothing left to say, so that a key
// nobody calls again costs the others nothing: once none is watched, a call
// pays one atomic load (R16). It runs every sweepEvery while any key is.
func (c *Cooldown) sweepIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep = false
	old := c.watched.Load()
	if old == nil {
		return
	}
	m := c.live(old.m, c.now())
	if len(m) == len(old.m) {
		c.schedule()
		return
	}
	if len(m) == 0 {
		c.watched.Store(nil)
		return
	}
	c.watched.Store(c.newWatchSet(m))
	c.schedule()
}

// size is how many keys are watched.
func (c *Cooldown) size() int {
	if ws := c.watched.Load(); ws != nil {
		return len(ws.m)
	}
	return 0
}
