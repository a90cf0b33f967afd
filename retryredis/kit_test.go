package retryredis

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp/store"
	"github.com/retryhttp/retryhttp/store/storetest"
	"github.com/stretchr/testify/require"
)

// The Store held to store's rules by its conformance kit, on a real Redis
// and on miniredis (the fleet demo's default, whose gopher-lua runs the
// same script): every op's effect against store.Apply, to the bit, on the
// kit's scenarios and on seeded random sequences of ops (the differential
// test of apply.lua against Go), the clock and Seq, Listen, concurrent
// Applies, hostile keys and junk at a key.
//
// The random sequences: 10,000 on a real Redis (12 s), 1,000 on miniredis,
// whose gopher-lua compiles the script at every EVAL (1,000 take 7 s,
// 10,000 over a minute: .ci/run runs those as a step of their own, with
// DIFF_SEQUENCES=10000), a tenth of each under the race detector.

// diffSequences is how many random sequences the kit applies: n, or
// DIFF_SEQUENCES when set, a tenth of n under the race detector.
func diffSequences(t *testing.T, n int) int {
	if v := os.Getenv("DIFF_SEQUENCES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "DIFF_SEQUENCES")
		return n
	}
	if raceOn {
		return n / 10
	}
	return n
}

// harness is the kit's Harness for Stores on c under one prefix.
func harness(t *testing.T, c redis.UniversalClient, sequences int) storetest.Harness {
	prefix := testPrefix(t)
	return storetest.Harness{
		Open: func(t *testing.T) store.Store {
			return newStore(t, c, WithPrefix(prefix), WithTimeout(5*time.Second))
		},
		Plant: func(t *testing.T, key string, b []byte) {
			require.NoError(t, c.Set(context.Background(), prefix+"key:"+key, b, time.Minute).Err())
		},
		Sequences: sequences,
		Parallel:  4,
	}
}

func TestKitOnRedis(t *testing.T) {
	c := sharedRedis(t).client(t)
	storetest.Run(t, harness(t, c, diffSequences(t, 10000)))
}

func TestKitOnMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	storetest.Run(t, harness(t, c, diffSequences(t, 1000)))
}
