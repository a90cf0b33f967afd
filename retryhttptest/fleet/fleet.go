// Package fleet builds K replicas of a backend in one test, as they run in
// production on one Redis: each a Transport with a Cooldown of its own,
// every Cooldown keeping its state in one shared store.Local, so that a
// table-driven test checks what a fleet does (pacing together, hearing each
// other's 429s, one circuit probe for all) with no Redis and no real
// sleep: inside a testing/synctest bubble, with no WithClock at all.
//
//	synctest.Test(t, func(t *testing.T) {
//		p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 10, Size: 1}})
//		f := fleet.New(fleet.Config{Replicas: 6, Base: func(int) http.RoundTripper { return p }})
//		defer f.Close()
//		// f.Replicas[i].Client.Do(...) from a goroutine per replica
//	})
//
// A Store that reaches another process (retryredis) cannot run in a
// bubble: its I/O never blocks durably, so the bubble's clock stands still
// (retryredis.NewStore says so, and panics). The shared store.Local is what
// such a Store does, to the bit (store/storetest holds both to it).
package fleet

import (
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/store"
)

// A Config says what each replica is.
type Config struct {
	// Replicas is how many; 0 or less: 1.
	Replicas int
	// Base is replica i's base RoundTripper: the provider (a
	// retryhttptest.Provider, a Script, a fault of one replica's own
	// network). nil: http.DefaultTransport, as retryhttp.New's.
	Base func(i int) http.RoundTripper
	// Key is every Cooldown's key function (nil: scheme://host).
	Key func(*http.Request) string
	// Cooldown and Transport are the options of every replica's Cooldown
	// (beside WithStore) and Transport (beside WithCooldown).
	Cooldown  []retryhttp.CooldownOption
	Transport []retryhttp.Option
	// Now is the shared Store's clock; nil: time.Now, the bubble's inside
	// one. Give a retryhttptest.Clock's Now with WithClock of that Clock
	// in Transport, outside a bubble.
	Now func() time.Time
}

// A Fleet is K replicas sharing one Store.
type Fleet struct {
	Store    *store.Local
	Replicas []Replica
}

// A Replica is one process of the fleet.
type Replica struct {
	Cooldown  *retryhttp.Cooldown
	Transport *retryhttp.Transport
	Client    *http.Client
}

// New builds the replicas of cfg over one new store.Local.
func New(cfg Config) *Fleet {
	f := &Fleet{Store: store.NewLocal(cfg.Now)}
	for i := range max(cfg.Replicas, 1) {
		var base http.RoundTripper
		if cfg.Base != nil {
			base = cfg.Base(i)
		}
		cd := retryhttp.NewCooldown(cfg.Key, append([]retryhttp.CooldownOption{retryhttp.WithStore(f.Store)}, cfg.Cooldown...)...)
		tr := retryhttp.New(base, append([]retryhttp.Option{retryhttp.WithCooldown(cd)}, cfg.Transport...)...)
		f.Replicas = append(f.Replicas, Replica{Cooldown: cd, Transport: tr, Client: &http.Client{Transport: tr}})
	}
	return f
}

// Close closes every replica's Cooldown.
func (f *Fleet) Close() {
	for _, r := range f.Replicas {
		_ = r.Cooldown.Close()
	}
}
