package retryredis

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fleet's circuit (R25) on a real Redis: K replicas, each a Transport
// and a Cooldown with a Store of its own on one prefix, against one
// provider on 127.0.0.1 that is up or down. The circuit's Open time runs
// on Redis's clock, which no test can move: these tests use an Open of
// 100 ms and wait it out for real (a few times each, bounded).

const fleetOpen = 100 * time.Millisecond

// provider answers 200, or 503 while down; it counts what it gets.
type provider struct {
	down atomic.Bool
	got  atomic.Int64
}

func (p *provider) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.got.Add(1)
	if p.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// circuitFleet is k replicas on srv under one prefix, each over base(i)
// (nil: a transport of its own to the provider).
func circuitFleet(t *testing.T, srv *redisServer, k int, base func(i int) http.RoundTripper) []*http.Client {
	t.Helper()
	prefix := testPrefix(t)
	out := make([]*http.Client, k)
	for i := range out {
		s := newStore(t, srv.client(t), WithPrefix(prefix), WithTimeout(time.Second))
		cd := retryhttp.NewCooldown(nil, retryhttp.WithStore(s), retryhttp.WithCircuit(retryhttp.Circuit{Failures: 5, Open: fleetOpen}))
		t.Cleanup(func() { _ = cd.Close() })
		var rt http.RoundTripper = &http.Transport{}
		if base != nil {
			if b := base(i); b != nil {
				rt = b
			}
		}
		out[i] = &http.Client{Transport: retryhttp.New(rt, retryhttp.WithCooldown(cd), retryhttp.WithMaxRetries(2),
			retryhttp.WithBackoff(retryhttp.Backoff{Base: 5 * time.Millisecond, Factor: 2}))}
	}
	return out
}

// get makes one call; it returns the status (0 on an error) and the error.
func get(c *http.Client, url string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// burst has every replica make n calls at once; it returns how many were
// refused by the circuit.
func burst(fleet []*http.Client, url string, n int) int {
	var refused atomic.Int64
	var wg sync.WaitGroup
	for _, c := range fleet {
		for range n {
			wg.Go(func() {
				if _, err := get(c, url); errors.Is(err, retryhttp.ErrUnavailable) {
					refused.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return int(refused.Load())
}

// TestFleetCircuitOneProbe: 8 replicas; the provider goes down; the fleet's
// circuit opens for all of them; after Open one probe goes for the whole
// fleet, however many calls the replicas make; once the provider is back,
// one probe's success closes it for every replica.
func TestFleetCircuitOneProbe(t *testing.T) {
	p := &provider{}
	hs := httptest.NewServer(p)
	defer hs.Close()
	fleet := circuitFleet(t, sharedRedis(t), 8, nil)
	p.down.Store(true)
	for range 5 {
		if burst(fleet, hs.URL, 1) == 8 {
			break
		}
	}
	require.Equal(t, 8*3, burst(fleet, hs.URL, 3), "every replica refuses: the fleet's circuit is open")
	opened := p.got.Load()
	assert.LessOrEqual(t, opened, int64(8*3*2), "the outage's first tries, bounded")

	for round := range 3 {
		time.Sleep(fleetOpen + 20*time.Millisecond)
		before := p.got.Load()
		refused := burst(fleet, hs.URL, 4)
		assert.Equal(t, int64(1), p.got.Load()-before, "round %d: one probe for the fleet", round)
		assert.Equal(t, 8*4-1, refused, "round %d: the others refused", round)
	}

	p.down.Store(false)
	time.Sleep(fleetOpen + 20*time.Millisecond)
	burst(fleet, hs.URL, 1) // the probe, and the calls refused while it was out
	untilServed(t, fleet, hs.URL, "the probe's sign of life closes the circuit for every replica")
}

// untilServed makes a call of each replica, again and again, until none is
// refused: at most 500 rounds, each an Open apart (a round is a probe's
// chance), whatever the machine's load.
func untilServed(t *testing.T, fleet []*http.Client, url, msg string) {
	t.Helper()
	for range 500 {
		if burst(fleet, url, 1) == 0 {
			return
		}
		time.Sleep(fleetOpen / 5)
	}
	t.Fatal(msg)
}

// refusing is a base whose own network fails: every try is refused.
type refusing struct{}

func (refusing) RoundTrip(*http.Request) (*http.Response, error) { return nil, syscall.ECONNREFUSED }

// TestFleetCircuitBadReplica: one replica whose own network fails while
// the provider serves the others never refuses the others' calls; its own
// row refuses its own.
func TestFleetCircuitBadReplica(t *testing.T) {
	p := &provider{}
	hs := httptest.NewServer(p)
	defer hs.Close()
	fleet := circuitFleet(t, sharedRedis(t), 8, func(i int) http.RoundTripper {
		if i == 0 {
			return refusing{}
		}
		return nil
	})
	var badRefused int
	for range 20 {
		for i, c := range fleet {
			status, err := get(c, hs.URL)
			if i == 0 {
				if errors.Is(err, retryhttp.ErrUnavailable) {
					badRefused++
				}
				continue
			}
			require.NoError(t, err, "replica %d", i)
			require.Equal(t, http.StatusOK, status, "replica %d", i)
		}
	}
	assert.Positive(t, badRefused, "the bad replica's own row refuses its calls")
}

// TestFleetCircuitRedisKilled: Redis killed in the middle of an outage: no
// call hangs, each process's circuit goes on (its calls refused at once,
// its own probe after Open), and the fleet is served again once the
// provider is back.
func TestFleetCircuitRedisKilled(t *testing.T) {
	p := &provider{}
	hs := httptest.NewServer(p)
	defer hs.Close()
	srv := ownRedis(t)
	fleet := circuitFleet(t, srv, 4, nil)
	p.down.Store(true)
	for range 5 {
		if burst(fleet, hs.URL, 1) == 4 {
			break
		}
	}
	require.Equal(t, 4*2, burst(fleet, hs.URL, 2), "open for the fleet")
	srv.kill()
	sent := p.got.Load()
	assert.Equal(t, 4*3, burst(fleet, hs.URL, 3), "refused, Redis gone")
	assert.Equal(t, sent, p.got.Load(), "nothing sent")

	p.down.Store(false)
	untilServed(t, fleet, hs.URL, "each process's probe, on its own, closes its circuit")
	srv.restart()
	for range 10 {
		for i, c := range fleet {
			status, err := get(c, hs.URL)
			require.NoError(t, err, "replica %d", i)
			require.Equal(t, http.StatusOK, status)
		}
	}
}
