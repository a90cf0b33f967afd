package retryredis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Redis failing is not the provider failing (R24): each Apply answers
// within the bound whatever Redis does, the breaker skips Redis after
// DefaultFailures failures and logs it once, and lets Redis back in
// within a second of its return, and logs that once.

var paced = []store.Op{{Kind: store.OpTake, Costs: []float64{1}, Within: time.Second}}

// slack is what an Apply may take past the bound: a timer firing late, a
// goroutine scheduled late (-race doubles it).
// slack is what a loaded machine may add to the bound before an Apply
// returns: a goroutine's turn, a timer's. It is far under what a stalled
// Redis would cost (the 700 ms of the stall, or forever): the tests check
// the bound holds, not how fast the machine is.
const slack = 250 * time.Millisecond

// applyFor applies paced ops to key until d has passed or until returns
// true, and returns the longest Apply, the errors, and the Applies.
func applyFor(t *testing.T, s *Store, d time.Duration, until func(error) bool) (longest time.Duration, errs, n int) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		start := time.Now()
		_, err := s.Apply(context.Background(), "k", paced)
		longest = max(longest, time.Since(start))
		if err != nil {
			errs++
		}
		if until != nil && until(err) {
			return longest, errs, n + 1
		}
		time.Sleep(5 * time.Millisecond)
	}
	return longest, errs, n
}

func logsOf(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	return zap.New(core), logs
}

func count(logs *observer.ObservedLogs, msg string) int {
	return logs.FilterMessage(msg).Len()
}

const (
	msgFailing = "retryredis: Redis is failing; each process paces on its own until it is back"
	msgBack    = "retryredis: Redis is back; the processes pace together again"
)

func TestStalledRedis(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  func(*redis.Options)
	}{
		{"a client bounded by the context", func(*redis.Options) {}},
		{"a client that is not (ops in goroutines)", func(o *redis.Options) {
			o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout = false, 300*time.Millisecond, 300*time.Millisecond
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := ownRedis(t)
			o := &redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true, DialTimeout: time.Second}
			tc.opt(o)
			c := redis.NewClient(o)
			defer c.Close()
			log, logs := logsOf(t)
			s := NewStore(c, WithLogger(log))
			defer s.Close()
			_, errs, _ := applyFor(t, s, 50*time.Millisecond, nil)
			require.Zero(t, errs)

			srv.stop()
			stalled := time.Now()
			longest, errs, n := applyFor(t, s, 700*time.Millisecond, nil)
			t.Logf("stalled: %d Applies, %d failed, the longest %v (bound %v)", n, errs, longest, DefaultTimeout)
			assert.Equal(t, n, errs, "every Apply fails while Redis is stopped")
			assert.Less(t, longest, DefaultTimeout+slack, "no Apply waits past the bound")
			assert.Equal(t, 1, count(logs, msgFailing), "logged once")
			assert.True(t, s.br.isOpen())
			// The breaker skips Redis: most Applies fail at once.
			quick := 0
			for range 20 {
				start := time.Now()
				if _, err := s.Apply(context.Background(), "k", paced); err != nil && time.Since(start) < time.Millisecond {
					quick++
				}
			}
			assert.GreaterOrEqual(t, quick, 19, "skipped while open")

			srv.resume()
			back := time.Now()
			requireBack(t, s)
			t.Logf("Redis stalled %v; back on it %v after it resumed", back.Sub(stalled).Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
			assert.Equal(t, 1, count(logs, msgBack), "logged once")
			assert.Equal(t, 1, count(logs, msgFailing), "still once")
		})
	}
}

// requireBack applies until an Apply succeeds: at most 10,000 tries a
// millisecond apart, far past the breaker's cool-off (the time it takes is
// logged, and measured in bench/: TestFleetConvergesAfterAFault).
func requireBack(t *testing.T, s *Store) {
	t.Helper()
	for range 10000 {
		if _, err := s.Apply(context.Background(), "k", paced); err == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("never back on Redis")
}

func TestKilledAndRestartedRedis(t *testing.T) {
	srv := ownRedis(t)
	log, logs := logsOf(t)
	s := newStore(t, srv.client(t), WithLogger(log))
	_, errs, _ := applyFor(t, s, 30*time.Millisecond, nil)
	require.Zero(t, errs)
	before, err := s.Apply(context.Background(), "k", paced)
	require.NoError(t, err)

	srv.kill()
	longest, errs, n := applyFor(t, s, 300*time.Millisecond, nil)
	t.Logf("killed: %d Applies, %d failed, the longest %v", n, errs, longest)
	assert.Equal(t, n, errs)
	assert.Less(t, longest, DefaultTimeout+slack)
	assert.Equal(t, 1, count(logs, msgFailing))

	srv.restart() // empty, and without the scripts: NOSCRIPT, then EVAL
	back := time.Now()
	requireBack(t, s)
	t.Logf("back on Redis %v after it restarted", time.Since(back).Round(time.Millisecond))
	assert.Equal(t, 1, count(logs, msgBack))
	after, err := s.Apply(context.Background(), "k", paced)
	require.NoError(t, err)
	assert.Greater(t, after.Seq, before.Seq, "Seq grows past the lost key")
}

func TestCallerContextIsNotRedisFailing(t *testing.T) {
	srv := sharedRedis(t)
	s := newStore(t, srv.client(t), WithPrefix(testPrefix(t)), WithBreaker(1, time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 {
		_, err := s.Apply(ctx, "k", paced)
		require.Error(t, err)
	}
	assert.False(t, s.br.isOpen(), "a caller's context that ended is not Redis's failure")
	_, err := s.Apply(context.Background(), "k", paced)
	assert.NoError(t, err)
}
