package retryredis

import (
	"context"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fleet goes on through Redis failing, and converges again within a
// second of Redis being back (R24): killed and restarted empty, stalled
// (SIGSTOP) and resumed, flushed, and junk written over its keys, each in
// the middle of a run.

type fault struct {
	name        string
	fault, back func(t *testing.T, srv *redisServer, key string)
}

var faultCases = []fault{
	{"killed, restarted empty", func(_ *testing.T, srv *redisServer, _ string) { srv.kill() },
		func(_ *testing.T, srv *redisServer, _ string) { srv.restart() }},
	{"stalled, resumed", func(_ *testing.T, srv *redisServer, _ string) { srv.stop() },
		func(_ *testing.T, srv *redisServer, _ string) { srv.resume() }},
	{"flushed", nil, func(t *testing.T, srv *redisServer, _ string) { srv.flush(t) }},
	{"junk at its keys", nil, func(t *testing.T, srv *redisServer, key string) {
		c := srv.client(t)
		ctx := context.Background()
		require.NoError(t, c.Set(ctx, "retryhttp:key:"+key, "junk", 0).Err())
		require.NoError(t, c.Set(ctx, "retryhttp:armed", "junk", 0).Err())
	}},
}

func TestFleetConvergesAfterAFault(t *testing.T) {
	if testing.Short() {
		t.Skip("a real-time run")
	}
	const faultAt, backAt, span = 800 * time.Millisecond, 1300 * time.Millisecond, 3 * time.Second
	for _, tc := range faultCases {
		t.Run(tc.name, func(t *testing.T) {
			srv := ownRedis(t)
			var conv time.Duration
			var settled retryhttptest.ProviderStats
			cfg := fleetConfig{replicas: 4, workers: 4, span: span, srv: srv, prefix: "retryhttp:"}
			cfg.at = map[time.Duration]func(string, *fleetResult){
				faultAt: func(key string, _ *fleetResult) {
					if tc.fault != nil {
						tc.fault(t, srv, key)
					}
				},
				backAt: func(key string, r *fleetResult) {
					tc.back(t, srv, key)
					conv = converged(t, srv, key, r.stores)
				},
				backAt + time.Second: func(_ string, r *fleetResult) { settled = r.provider.Stats() },
			}
			r := runFleet(t, cfg)
			end := r.provider.Stats()
			after := float64(end.Requests-settled.Requests) / float64(max(end.Admitted-settled.Admitted, 1))
			t.Logf("%s: %v; converged %v after Redis was back; from a second after it, requests/success %.2f",
				tc.name, r, conv.Round(time.Millisecond), after)
			assert.Zero(t, r.errs, "no call fails because of Redis")
			assert.Less(t, conv, time.Second, "converged within a second")
			assert.LessOrEqual(t, after, 1.4, "paced together again")
		})
	}
}

// converged waits until every Store is back on Redis and the key's shared
// state has the request lane's rate again, and returns how long that took.
func converged(t *testing.T, srv *redisServer, key string, stores []*Store) time.Duration {
	t.Helper()
	reader := NewStore(srv.client(t), WithTimeout(100*time.Millisecond))
	defer reader.Close()
	start := time.Now()
	for time.Since(start) < 900*time.Millisecond {
		st, err := reader.Apply(context.Background(), key, nil)
		back := err == nil && st.Lane(0).Per > 0
		for _, s := range stores {
			back = back && !s.br.isOpen()
		}
		if back {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}
