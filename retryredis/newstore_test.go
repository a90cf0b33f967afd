package retryredis

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewStoreRefuses: what cannot work panics at once with a message that
// says why, instead of failing in silence: a Ring (its shards do not share
// pub/sub), a prefix that would meet another's keys, a testing/synctest
// bubble (the test would hang until -timeout).
func TestNewStoreRefuses(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	one := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer one.Close()
	for _, tc := range []struct {
		name, says string
		make       func()
	}{
		{"nil", "nil client", func() { NewStore(nil) }},
		{"a Ring", "Ring is not supported", func() { NewStore(ring) }},
		{"a prefix holding key:", `prefix may not hold "key:"`, func() { NewStore(one, WithPrefix("p:key:")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Contains(t, panicOf(tc.make), tc.says)
		})
	}
	t.Run("a synctest bubble", func(t *testing.T) {
		var said string
		synctest.Test(t, func(t *testing.T) { said = panicOf(func() { NewStore(one) }) })
		assert.Contains(t, said, "synctest bubble")
		assert.Contains(t, said, "store.NewLocal")
	})
	t.Run("outside a bubble, a prefix without key:", func(t *testing.T) {
		assert.NotPanics(t, func() { _ = NewStore(one, WithPrefix("p:keys")).Close() })
	})
}

// panicOf returns what f panics with, as text; "" when it does not.
func panicOf(f func()) (said string) {
	defer func() {
		if v := recover(); v != nil {
			said, _ = v.(string)
		}
	}()
	f()
	return ""
}

// TestPing: a health check within the bound; a Redis down at boot is no
// error to NewStore, only to Ping.
func TestPing(t *testing.T) {
	srv := ownRedis(t)
	s := newStore(t, srv.client(t), WithTimeout(200*time.Millisecond))
	require.NoError(t, s.Ping(context.Background()))
	srv.kill()
	start := time.Now()
	assert.Error(t, s.Ping(context.Background()))
	assert.Less(t, time.Since(start), 2*200*time.Millisecond+slack, "within twice the bound (Ping dials once to say why)")

	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	down := newStore(t, c)
	assert.Error(t, down.Ping(context.Background()), "Redis down at boot: Ping says so")
}

// TestPrefixHoldingKey: a prefix holding "key:" would meet
// another prefix's keys (WithPrefix("p:key:")'s index, p:key:armed, is
// prefix p:'s state of the key "armed"): NewStore refuses it at once, as
// it does a nil client. Other prefixes are fine, and never meet.
func TestPrefixHoldingKey(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, p := range []string{"p:key:", "key:", "a key:b", "retryhttp:key:x:"} {
		assert.PanicsWithValue(t, fmt.Sprintf("retryredis: WithPrefix(%q): a prefix may not hold \"key:\": its keys would meet another prefix's", p),
			func() { NewStore(c, WithPrefix(p)) }, "%q", p)
	}
	prefixes := []string{"", "p:", "p:keys", "p:ke", "p:armed", "retryhttp:", "key"}
	names := map[string]string{}
	for _, p := range prefixes {
		s := NewStore(c, WithPrefix(p))
		require.NoError(t, s.Close())
		for _, k := range []string{"armed", "k", "key:armed", "x"} {
			for _, name := range []string{s.keyPrefix + k, s.index, s.channel} {
				if other, ok := names[name]; ok && other != p {
					t.Errorf("prefixes %q and %q both use %q", other, p, name)
				}
				names[name] = p
			}
		}
	}
}
