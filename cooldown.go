package retryhttp

import (
	"net/http"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/store"
	"go.uber.org/zap"
)

// A Cooldown shares what a provider says about the client across every
// call of every Transport given it (WithCooldown, R17): a 429 with
// Retry-After: 20 holds every call to that provider 20 s, and once the
// provider has limited the client, every call is paced at its rate, by its
// request and token limits (R23). Every wait it imposes must fit the
// deadline and the Budget, is charged to it, and ends with the caller's
// context; one that does not fit fails at once with ErrRateLimited.
// WithCircuit adds a breaker per key (R25); WithStore shares it all with a
// fleet (R24). A call to a key it does not watch costs a map lookup (R16).
// The zero Cooldown is not usable; make one with NewCooldown. A Cooldown is
// safe for concurrent use by multiple goroutines. How it holds and paces,
// with numbers: docs/cooldown.md; the rules: RULES.md R17, R23 to R25.
type Cooldown struct {
	key     func(*http.Request) string
	byModel bool // key is KeyByModel itself: the engine reads the model, not calling it (keys.go)
	eng     *cooldown.Engine
}

// A CooldownOption configures a Cooldown in NewCooldown.
type CooldownOption func(*cooldownConfig)

type cooldownConfig struct {
	store   store.Store
	circuit *cooldown.Circuit
}

// WithStore makes the Cooldown keep its state in s, shared with every
// process whose Cooldown has a Store on the same backend (R24:
// retryredis.NewStore keeps it on Redis; store.NewLocal shares it among
// the Cooldowns of one process, as a test of a fleet does). The default,
// and nil, keeps it in the process. When s fails, the call goes on with
// what the process knows: a Store never fails a call. It is logged once
// (Warn) when it starts failing, once (Info) when it works again. A
// Cooldown given a Store listens to it until Close, or until it is garbage
// collected.
func WithStore(s store.Store) CooldownOption {
	return func(c *cooldownConfig) { c.store = s }
}

// NewCooldown returns a Cooldown with nothing cooling. key maps a request
// to the provider limit it counts against; nil means the request URL's
// scheme://host, lowercased, and KeyByModel adds the model the request
// asks for. A key function that returns "" leaves that request out. It
// gets the caller's request (never a retry's clone) with its context, may
// read a copy of its body from GetBody, must not read or close req.Body nor
// modify the request, must be safe for concurrent use, and runs at most
// once per call, only when some key is watched or the call's answer arms
// one. One that panics has the call's response and bodies closed before
// the panic goes on up. A key longer than 256 bytes is kept by its SHA-256.
// Nil options are ignored.
func NewCooldown(key func(*http.Request) string, opts ...CooldownOption) *Cooldown {
	var cfg cooldownConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	c := &Cooldown{key: key, byModel: isKeyByModel(key)}
	kind := cooldown.CallerKeys
	switch {
	case key == nil:
		kind = cooldown.DefaultKeys
	case c.byModel:
		kind = cooldown.ModelKeys
	}
	c.eng = cooldown.New(cooldown.Config{Store: cfg.store, Circuit: cfg.circuit, Keys: kind})
	return c
}

// Close stops the Cooldown's listening to its Store (WithStore): other
// processes' news no longer reaches it. A Cooldown that is not closed
// stops when it is garbage collected. The Cooldown still works after
// Close, on what its process hears itself. Close always returns nil.
func (c *Cooldown) Close() error {
	if c != nil {
		c.eng.Close()
	}
	return nil
}

// WithCooldown makes every call hold and pace while its key is cooling, and
// lets its answers arm c (R17). c may be shared by many Transports, which
// should share one clock: its times are read on the first one's. The
// default, and nil, is no Cooldown.
func WithCooldown(c *Cooldown) Option {
	return func(cfg *config) { cfg.cooldown = c }
}

// Until returns the end of key's hold (the latest of its lanes'), on the
// clock of the first Transport made with the Cooldown: the zero Time when
// key is not held (never limited, its hold is over, or it is only paced).
func (c *Cooldown) Until(key string) time.Time {
	if c == nil {
		return time.Time{}
	}
	return c.eng.Until(cooldown.BoundKey(key))
}

// Reset forgets every key: what the Cooldown heard, held and paced. A
// table test that shares one Cooldown across its rows calls it before
// each row. With WithStore, the Store's keys are left as they are (they
// expire).
func (c *Cooldown) Reset() {
	if c != nil {
		c.eng.Reset()
	}
}

// bind gives c the clock and the logger of the first Transport made with
// it: a circuit's openings and closings, and a Store failing, are written
// to that logger (R25).
func (c *Cooldown) bind(clk clock.Clock, log *zap.Logger) { c.eng.Bind(clk.Now, log) }
