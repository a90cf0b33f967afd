package retryhttp

import (
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// A Cooldown shares what a provider says about the client across every call
// of every Transport given it (WithCooldown): a 429 with Retry-After: 20 is
// about the client, not one request (RFC 9110: "the user agent ought to
// wait"), so the other calls to that provider hold too instead of each
// collecting its own 429 (R17).
//
// It keeps, per key, until when the provider asked clients not to come back,
// and how fast to send once it has limited them. The key is by default the
// request URL's scheme://host, lowercased; NewCooldown takes any other (per
// model, per API key, ...).
//
// The hold. The server's ask (Retry-After, retry-after-ms, or a body's
// retryDelay) on a failed try holds every call to the key, forward only,
// for all of it when it is longer than the resolution of its form:
// Retry-After: 20 holds every call 20 s, and retry-after-ms: 20 holds every
// call 20 ms. An ask within one resolution (a whole-second Retry-After: 1
// may mean a millisecond) holds only the call that got it, which never
// retries before its ask ends; the others go at the paced rate. An exhausted
// rate limit's reset (ParseRateLimitReset), on any answer the Cooldown
// reads, holds every call until the limit may be back: a reset written to
// the second, until a second before it; in that last second the calls go
// at the paced rate. A reset runs from when the try was sent, when the
// Cooldown paced it: a provider counts a request as it admits it, so the
// counts on a slow answer are as old as the answer is slow. A hold armed
// while sends wait for their slots moves them on, in their order and
// spacing, so that they do not all go the instant it ends.
//
// The pace. A key that the provider limits (a 429, a Throttled try, or a
// failed try with an ask) is paced from then on: its calls send one at a
// time, first come first served (a retry goes before the calls waiting:
// theirs wait a slot more), at the provider's rate. The rate is the
// provider's word when it gives its counts at a useful resolution
// (x-ratelimit-limit/remaining/reset-requests, the anthropic-ratelimit-
// requests- and IETF RateLimit- equivalents: limit − remaining requests in
// the reset window); otherwise it is learned: it grows with each success
// (by 2% until the first 429, then by 0.05%) and a 429 to a send paced at
// the current rate cuts it by 15% and pauses the key four slots. A key not limited for 5 s, with nobody waiting,
// flows freely again.
//
// Every wait a Cooldown imposes, hold or slot, is known when it starts and is
// a wait like any other: it must fit the deadline and the Budget, it is
// charged to the Budget, and it ends when the caller's context does. A wait
// that does not fit sends nothing: the call fails at once with
// ErrRateLimited. No call ever waits for another call's answer.
//
// What it costs. A call to a key that is not paced or held pays a map lookup
// (one atomic load when no key is); its success is handed back unread, so a
// first try costs what it costs without a Cooldown (R16). Only the answers to
// a key the Cooldown watches, and every failed try, are read for it.
//
// The zero Cooldown is not usable; make one with NewCooldown. A Cooldown is
// safe for concurrent use by multiple goroutines. Transports sharing a
// Cooldown should share one clock: its times are read on the clock of the
// first Transport made with it. Memory stays bounded: a key goes when it has
// nothing left to say, and at most 4096 keys are watched at once (a signal
// for another key is then ignored).
type Cooldown struct {
	key   func(*http.Request) string
	clock atomic.Pointer[clock.Clock] // bound by the first Transport (New)

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

// watchSet is the watched keys. lens has bit n%64 set for each key n
// bytes long: a call whose origin key has a length no watched key has is
// not watched, known without building its key or hashing it, so that one
// provider limiting the client costs the calls to the others next to
// nothing (R16: 30 ns a call without it).
type watchSet struct {
	m    map[string]*cooling
	lens uint64
}

func newWatchSet(m map[string]*cooling) *watchSet {
	ws := &watchSet{m: m}
	for k := range m {
		ws.lens |= 1 << (len(k) % 64)
	}
	return ws
}

// cooling is one watched key.
type cooling struct {
	mu   sync.Mutex
	lane lane
}

// maxCoolingKeys bounds the memory of a Cooldown.
const maxCoolingKeys = 4096

// sweepEvery is how often, in real time, the keys are looked over for one
// that has gone quiet, while any is watched.
const sweepEvery = time.Second

// NewCooldown returns a Cooldown with nothing cooling. key maps a request (the
// caller's, with its context) to the provider limit it counts against; nil
// means the request URL's scheme://host, lowercased. A key function that
// returns "" leaves that request out: it neither holds nor arms.
func NewCooldown(key func(*http.Request) string) *Cooldown {
	return &Cooldown{key: key}
}

// WithCooldown makes every call hold and pace while its key is cooling, and
// lets its answers arm c (R17). c may be shared by many Transports. The
// default, and nil, is no Cooldown: each call learns of a rate limit on its
// own.
func WithCooldown(c *Cooldown) Option {
	return func(cfg *config) { cfg.cooldown = c }
}

// Until returns the end of key's hold: the zero Time when key is not held
// (never limited, its hold is over, or it is only paced).
func (c *Cooldown) Until(key string) time.Time {
	if c == nil {
		return time.Time{}
	}
	ws := c.watched.Load()
	if ws == nil {
		return time.Time{}
	}
	e := ws.m[key]
	if e == nil {
		return time.Time{}
	}
	now := c.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lane.until.After(now) {
		return e.lane.until
	}
	return time.Time{}
}

// bind gives c the clock of the first Transport made with it.
func (c *Cooldown) bind(clk clock.Clock) {
	c.clock.CompareAndSwap(nil, &clk)
}

func (c *Cooldown) now() time.Time {
	if clk := c.clock.Load(); clk != nil {
		return (*clk).Now()
	}
	return time.Now()
}

// find returns the watched entry of req's key, nil when its key is not
// watched or is "". With the default key it allocates nothing: the key is
// built on the stack, and a map index by string(bytes) does not copy; and
// it is built only when a watched key has its length (lowercasing keeps
// it).
func (c *Cooldown) find(req *http.Request) *cooling {
	ws := c.watched.Load()
	if ws == nil || len(ws.m) == 0 {
		return nil
	}
	if c.key != nil {
		return ws.m[c.key(req)]
	}
	u := req.URL
	if n := len(u.Scheme) + len("://") + len(u.Host); u.Host == "" || ws.lens&(1<<(n%64)) == 0 {
		return nil
	}
	var buf [96]byte
	return ws.m[string(appendOriginKey(buf[:0], req))]
}

// keyOf returns the key of req, or "" when req is left out.
func (c *Cooldown) keyOf(req *http.Request) string {
	if c.key != nil {
		return c.key(req)
	}
	return string(appendOriginKey(nil, req))
}

// appendOriginKey appends req's scheme://host, lowercased, to b; nil when
// the URL has no host.
func appendOriginKey(b []byte, req *http.Request) []byte {
	u := req.URL
	if u.Host == "" {
		return nil
	}
	b = appendLower(b, u.Scheme)
	b = append(b, "://"...)
	return appendLower(b, u.Host)
}

func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// reserve gives a send of e's key its slot at now, if the wait for it fits:
// it must be shorter than left, and charge (the Budget's, when the call has
// one) must accept it. ok false takes nothing.
func (e *cooling) reserve(now time.Time, retry bool, left time.Duration, charge func(time.Duration) bool) (w time.Duration, fromHold bool, tk ticket, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w = e.lane.wait(now, retry)
	fromHold = e.lane.until.After(now) && (retry || !e.lane.next.After(e.lane.until))
	if w > 0 && (w >= left || !charge(w)) {
		return w, fromHold, tk, false
	}
	e.lane, tk = e.lane.take(now, w, retry)
	return w, fromHold, tk, true
}

// release gives back the slot of tk, whose send did not go.
func (e *cooling) release(tk ticket) {
	e.mu.Lock()
	e.lane = e.lane.untake(tk)
	e.mu.Unlock()
}

// more is what a send holding tk must still wait at now: the rest of a hold
// armed since it took its slot, what such a hold moved the schedule on, and
// a slot for each retry let in before it; fromHold when a hold is in it
// (the provider's word, logged as such: R17); and its ticket since.
func (e *cooling) more(now time.Time, tk ticket) (w time.Duration, fromHold bool, _ ticket) {
	e.mu.Lock()
	defer e.mu.Unlock()
	moved := e.lane.shifted - tk.shifted
	pushed, tk := e.lane.pushed(tk)
	hold := max(e.lane.until.Sub(now), 0)
	return max(hold, pushed), hold > 0 || moved > 0, tk
}

// holdLeft is what is left at now of e's hold; 0 when none.
func (e *cooling) holdLeft(now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return max(e.lane.until.Sub(now), 0)
}

// hear records what an answer for req says. e is req's entry, nil when its
// key was not watched; an answer that limits arms the key.
func (c *Cooldown) hear(req *http.Request, e *cooling, now time.Time, h heard) {
	if e == nil {
		if !h.arms() {
			return // free flow, nothing to arm: no lock (R16)
		}
		key := c.keyOf(req)
		if key == "" {
			return
		}
		if e = c.arm(key, now); e == nil {
			return // bounded memory: this key goes unshared
		}
	}
	e.mu.Lock()
	e.lane = e.lane.hear(now, h)
	e.mu.Unlock()
}

// arms reports whether an answer arms a key nobody watches: a limit, an
// ask, or an exhausted limit's reset.
func (h heard) arms() bool {
	return h.limited || h.hasAsk && h.ask > 0 || h.hasReset && h.reset > 0
}

// arm returns key's entry, made if it has none; nil when 4096 keys are
// watched and none is idle. A new key copies the map (it is read without a
// lock): arming is rare, once per key per episode of 429s.
func (c *Cooldown) arm(key string, now time.Time) *cooling {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[string]*cooling
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
		m = make(map[string]*cooling)
	}
	e := &cooling{lane: lane{limitedAt: now}}
	m[key] = e
	c.watched.Store(newWatchSet(m))
	c.schedule()
	return e
}

// live copies the entries of m that are not idle at now. c.mu is held.
func (c *Cooldown) live(m map[string]*cooling, now time.Time) map[string]*cooling {
	out := make(map[string]*cooling, len(m))
	for k, e := range m {
		e.mu.Lock()
		idle := e.lane.idle(now)
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
	c.watched.Store(newWatchSet(m))
	c.schedule()
}

// size is how many keys are watched.
func (c *Cooldown) size() int {
	if ws := c.watched.Load(); ws != nil {
		return len(ws.m)
	}
	return 0
}

// heardOf is what one try tells a Cooldown (R17, R18): the server's ask on a
// failed try (with the resolution of its form), and, on any answer, an
// exhausted limit's reset and the provider's request counts.
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
	h.reset, h.hasReset = ParseRateLimitReset(resp.Header, now)
	h.resetRes = time.Second
	if h.hasReset && resp.Header.Get("X-Ratelimit-Reset-Requests")+resp.Header.Get("X-Ratelimit-Reset-Tokens") != "" {
		h.resetRes = time.Millisecond // OpenAI writes its resets to the millisecond
	}
	h.counts = requestCounts(resp.Header, now)
	return h
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
