package retryredis

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 29, items 7(c), 7(d) and 9(b), on a real Redis.

// TestHardeningApplyConcurrentWithClose: Applies before, during and after
// Close, on a client that does not bound its I/O by the context (each op
// then runs on a goroutine of its own that Close waits for): an Apply
// after Close is allowed, and its goroutine is never added to what a
// Close under way waits for (-race: the WaitGroup's Add raced its Wait).
func TestHardeningApplyConcurrentWithClose(t *testing.T) {
	srv := sharedRedis(t)
	prefix := testPrefix(t)
	for round := range 20 {
		c := redis.NewClient(&redis.Options{Addr: srv.addr, DialTimeout: time.Second}) // no ContextTimeoutEnabled
		s := NewStore(c, WithPrefix(prefix))
		require.False(t, s.direct, "ops run on goroutines")
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				<-start
				for i := range 10 {
					_, _ = s.Apply(context.Background(), fmt.Sprintf("k%d-%d-%d", round, g, i%3), paced)
				}
			})
		}
		close(start)
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond) // Close at points along the Applies
		require.NoError(t, s.Close())
		wg.Wait()
		_, err := s.Apply(context.Background(), "after", paced)
		assert.NoError(t, err, "an Apply after Close still applies")
		require.NoError(t, s.Close(), "idempotent")
		require.NoError(t, c.Close())
	}
}

// TestHardeningListenPollCountsForTheBreaker: with Redis stalled and only
// a Listen running (no Apply at all), the poll's timeouts are Redis
// failing: the breaker opens and says so once (the poll's own timeout was
// read as a caller's context ending, and the breaker never heard of it).
func TestHardeningListenPollCountsForTheBreaker(t *testing.T) {
	srv := ownRedis(t)
	log, logs := logsOf(t)
	s := newStore(t, srv.client(t), WithLogger(log))
	stop := s.Listen(func(string, store.State) {})
	defer stop()
	time.Sleep(50 * time.Millisecond) // the first poll, on a Redis that answers
	require.False(t, s.br.isOpen())

	srv.stop()
	defer srv.resume() // before the Store's Close, which the test's cleanup runs
	deadline := time.Now().Add(5 * time.Second)
	for count(logs, msgFailing) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.True(t, s.br.isOpen(), "the polls' timeouts opened the breaker")
	assert.Equal(t, 1, count(logs, msgFailing), "and it said so")
	time.Sleep(2 * pollEvery) // probes that fail again
	assert.Equal(t, 1, count(logs, msgFailing), "once")
}

// TestHardeningPrefixHoldingKey: a prefix holding "key:" would meet
// another prefix's keys (WithPrefix("p:key:")'s index, p:key:armed, is
// prefix p:'s state of the key "armed"): NewStore refuses it at once, as
// it does a nil client. Other prefixes are fine, and never meet.
func TestHardeningPrefixHoldingKey(t *testing.T) {
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
