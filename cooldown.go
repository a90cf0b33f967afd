package retryhttp

import (
	"net/http"
	"strconv"
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
// It remembers, per key, until when the provider asked clients not to come
// back. The key is by default the request URL's scheme://host, lowercased;
// NewCooldown takes any other (per model, per API key, ...). It is armed,
// forward only (a shorter signal never shortens it), by the server's ask
// (Retry-After, retry-after-ms, or a body's retryDelay) on a Transient or
// Throttled response, and by an exhausted rate limit (ParseRateLimitReset) on
// any response, a success included.
//
// Before every try, the first included, a call whose key is cooling waits
// for the rest of the cooldown. That hold is a wait like any other: it must
// fit the deadline and the Budget, it is charged to the Budget, and it ends
// when the caller's context does; a hold that does not fit sends nothing and
// the call fails with ErrRateLimited.
//
// When a cooldown ends, the calls held by it do not all send at once:
// one call goes first (the probe) and the others wait for its answer. If the
// answer arms the cooldown again, they hold again. If it carries the
// provider's count of requests remaining (x-ratelimit-remaining-requests,
// anthropic-ratelimit-requests-remaining, RateLimit-Remaining), that many
// calls go, less those already on their way; when the count covers every
// call to the key in progress (those waiting between tries included), or the
// answer is a success with no count, the key is free again. With no answer
// after a second, one more call goes: a provider refuses a rate-limited
// request at once, so a slow answer means the probe was let through. The
// goodput benchmark in bench/ chose this over releasing everyone at once and
// over spreading the released calls at random (bench/RESULTS.md).
//
// The zero Cooldown is not usable; make one with NewCooldown. A Cooldown is
// safe for concurrent use by multiple goroutines. Transports sharing a
// Cooldown should share one clock: its times are read on the clock of the
// first Transport made with it. Memory stays bounded: an entry goes when its
// key is free again or its cooldown is long past, and at most 4096 keys cool
// at once (a signal for another key is then ignored).
type Cooldown struct {
	key   func(*http.Request) string
	clock atomic.Pointer[clock.Clock] // bound by the first Transport (New)

	// active counts entries, so that a call to a provider nobody has heard
	// from pays one atomic load and no lock (R16).
	active    atomic.Int64
	mu        sync.Mutex
	m         map[string]*cooling
	swept     int       // len(m) after the last sweep
	lastSweep time.Time // of the last sweep
}

// cooling is the state of one key.
type cooling struct {
	until time.Time // no call sends before this
	// After until, sends are admitted by permits: the probe's first, then
	// as many as the provider says remain.
	gated    bool
	permits  int
	inflight int // admitted sends with no answer yet
	waiters  int // calls waiting for an answer
	// members counts the calls in progress that have met this entry (held,
	// admitted, or answered into it), those sleeping between tries
	// included: the key goes free only when the provider has room for all.
	members  int
	lastSend time.Time     // of the last admitted send (for the probe grace)
	wake     chan struct{} // closed, and replaced, when waiters should look again
}

const (
	// probeGrace is how long an admitted send may go unanswered before one
	// more call is let through.
	probeGrace = time.Second
	// maxCoolingKeys bounds the memory of a Cooldown.
	maxCoolingKeys = 4096
)

// NewCooldown returns a Cooldown with nothing cooling. key maps a request (the
// caller's, with its context) to the provider limit it counts against; nil
// means the request URL's scheme://host, lowercased. A key function that
// returns "" leaves that request out: it neither holds nor arms.
func NewCooldown(key func(*http.Request) string) *Cooldown {
	return &Cooldown{key: key, m: make(map[string]*cooling)}
}

// WithCooldown makes every call hold while its key is cooling, and lets its
// responses arm c (R17). c may be shared by many Transports. The default, and
// nil, is no Cooldown: each call learns of a rate limit on its own.
func WithCooldown(c *Cooldown) Option {
	return func(cfg *config) { cfg.cooldown = c }
}

// Until returns the end of key's cooldown: the zero Time when key is not
// cooling (never armed, or its cooldown is over).
func (c *Cooldown) Until(key string) time.Time {
	if c == nil || c.active.Load() == 0 {
		return time.Time{}
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil && e.until.After(now) {
		return e.until
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

// keyOf returns the key of req, or "" when req is left out.
func (c *Cooldown) keyOf(req *http.Request) string {
	if c.key != nil {
		return c.key(req)
	}
	u := req.URL
	if u.Host == "" {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// admission is what a call must do before a try.
type admission struct {
	hold time.Duration   // > 0: wait this long on the clock, then ask again
	wake <-chan struct{} // non-nil: wait for another call's answer (at most grace), then ask again
	// grace is how long the wait for an answer may last before one more
	// call is let through.
	grace time.Duration
	entry *cooling // the entry that admitted the send, for settle; nil in free flow
}

// member is a call's membership of the entry it last met.
type member struct{ e *cooling }

// join makes the call of m a member of e. c.mu is held.
func (m *member) join(e *cooling) {
	if m == nil || m.e == e {
		return
	}
	if m.e != nil {
		m.e.members--
	}
	e.members++
	m.e = e
}

// leave ends the membership of a call that is over.
func (c *Cooldown) leave(m *member) {
	if m.e == nil {
		return
	}
	c.mu.Lock()
	m.e.members--
	m.e = nil
	c.mu.Unlock()
}

// admit tells the call of m, with key, what to do before a try at now.
func (c *Cooldown) admit(key string, now time.Time, m *member) admission {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	if e == nil {
		return admission{} // free flow
	}
	m.join(e)
	if now.Before(e.until) {
		return admission{hold: e.until.Sub(now)}
	}
	if !e.gated {
		// The cooldown just ended: one probe goes first.
		e.gated, e.permits = true, 1
	}
	if e.permits == 0 {
		if since := now.Sub(e.lastSend); since < probeGrace {
			// No permit: wait for an answer that brings some, or for the
			// grace since the last send (an answer that brought none, a
			// 429 with no ask or an error, lets one more go only then).
			e.waiters++
			return admission{wake: e.wake, grace: probeGrace - since}
		}
	}
	// A permit, or the grace has passed: go.
	e.permits = max(e.permits-1, 0)
	e.inflight++
	e.lastSend = now
	return admission{entry: e}
}

// unwait undoes the waiters count of an admission that waited.
func (c *Cooldown) unwait(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil && e.waiters > 0 {
		e.waiters--
	}
}

// signal is what one answer says about its key.
type signal struct {
	until     time.Time // the provider asks for no call before this; zero when it does not
	remaining int64     // requests the provider says remain
	counted   bool      // remaining is known
	ok        bool      // the answer is a response that is not a rate limit (not 429)
}

// settle records the answer to a send that admit let through (entry is the
// admission's; nil in free flow) and what it says about key.
func (c *Cooldown) settle(key string, entry *cooling, now time.Time, s signal, m *member) {
	if entry == nil && s.until.IsZero() {
		return // free flow and nothing to arm: no lock on the happy path
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	if entry != nil && entry == e {
		e.inflight--
	}
	if s.until.After(now) {
		if e == nil {
			if !c.room(now) {
				return // bounded memory: this key goes unshared
			}
			e = &cooling{wake: make(chan struct{})}
			c.m[key] = e
			c.active.Add(1)
		}
		m.join(e)
		if s.until.After(e.until) { // forward only
			// Those waiting for an answer hold again; when the cooldown
			// ends, one probe goes first.
			e.until = s.until
			e.gated, e.permits = false, 0
			e.wakeAll()
		}
		return
	}
	if e == nil || !e.gated || entry != e {
		return // an answer from before the cooldown ended says nothing about the gate
	}
	switch {
	case s.counted:
		e.permits = max(int(min(s.remaining, maxCoolingKeys*16))-e.inflight, 0)
		if e.permits >= e.members {
			c.free(key, e) // room for every call of the key in progress
			return
		}
		if e.permits > 0 {
			e.wakeAll()
		}
	case s.ok:
		c.free(key, e) // a success, and no count to pace by
	}
	// A 429 with no ask, or a transport error: nothing more goes until the
	// grace says so.
}

// free drops key's entry: calls to it go freely again.
func (c *Cooldown) free(key string, e *cooling) {
	delete(c.m, key)
	c.active.Add(-1)
	e.wakeAll()
}

func (e *cooling) wakeAll() {
	close(e.wake)
	e.wake = make(chan struct{})
}

// room makes room for a new entry if it can: it sweeps when the map has
// doubled since the last sweep (so that entries of keys nobody calls again
// do not pile up), and when it is full, at most once a second (so that a
// full map of live entries costs no sweep per signal). c.mu is held.
func (c *Cooldown) room(now time.Time) bool {
	full := len(c.m) >= maxCoolingKeys
	if len(c.m) > 2*c.swept+16 || full && now.Sub(c.lastSweep) >= time.Second {
		c.sweep(now)
	}
	return len(c.m) < maxCoolingKeys
}

// sweep drops the entries no call needs any more. c.mu is held.
func (c *Cooldown) sweep(now time.Time) {
	for key, e := range c.m {
		if e.waiters == 0 && !now.Before(e.until) && now.Sub(e.lastSend) >= probeGrace {
			c.free(key, e) // over, nobody waits, and any send out is past its grace
		}
	}
	c.swept, c.lastSweep = len(c.m), now
}

// rateLimitRemaining returns how many requests the provider says remain,
// the smallest of the request counts it sends, for pacing the calls released
// after a cooldown. Token counts are left out: they do not count requests.
func rateLimitRemaining(h http.Header) (n int64, ok bool) {
	for _, name := range [...]string{"X-Ratelimit-Remaining-Requests", "Anthropic-Ratelimit-Requests-Remaining", "Ratelimit-Remaining"} {
		v := h[name]
		if len(v) == 0 {
			continue
		}
		r, err := strconv.ParseInt(trimSpaceTab(v[0]), 10, 64)
		if err != nil || r < 0 { // Azure sends -1: unknown
			continue
		}
		if !ok || r < n {
			n, ok = r, true
		}
	}
	return n, ok
}
