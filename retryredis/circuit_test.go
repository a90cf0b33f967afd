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
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
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

// The fleet's circuit and holds on a real Redis, as the library's own
// tests run them on a store.Local (circuit_test.go and cooldown_store_test.go
// in the root): each replica a process with a Store of its own on one
// prefix, over a scripted provider, on the real clock (Redis's TIME, which
// no test can move).

// listening is a replica's Store that counts the pushes its Cooldown has
// heard, so that a test waits for one instead of for a time.
type listening struct {
	*Store
	heard atomic.Int64
}

func (l *listening) Listen(f func(string, store.State)) func() {
	return l.Store.Listen(func(k string, st store.State) {
		f(k, st)
		l.heard.Add(1)
	})
}

// member is one Cooldown of a replica, over its script.
type member struct {
	s      *listening
	cd     *retryhttp.Cooldown
	script *retryhttptest.Script
	tr     *retryhttp.Transport
}

// process is a replica: a Store of its own on srv under prefix.
func process(t *testing.T, srv *redisServer, prefix string) *listening {
	return &listening{Store: newStore(t, srv.client(t), WithPrefix(prefix))}
}

// join adds a Cooldown to the process s, over replies, with circuit c and
// opts.
func join(t *testing.T, s *listening, c retryhttp.Circuit, replies []retryhttptest.Reply, opts ...retryhttp.Option) member {
	cd := retryhttp.NewCooldown(nil, retryhttp.WithStore(s), retryhttp.WithCircuit(c))
	t.Cleanup(func() { _ = cd.Close() })
	script := retryhttptest.NewScript(replies...)
	opts = append([]retryhttp.Option{retryhttp.WithCooldown(cd), retryhttp.WithMaxRetries(0)}, opts...)
	return member{s, cd, script, retryhttp.New(script, opts...)}
}

const fleetURL = "https://api.example.com"

func (m member) do(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fleetURL+"/v1/chat", nil)
	resp, err := m.tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// waitHeard waits until m has heard n pushes: bounded by a count of tries,
// each a millisecond, 10 s in all, far past the second R24 allows.
func waitHeard(t *testing.T, m member, n int64) {
	t.Helper()
	for range 10000 {
		if m.s.heard.Load() >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("heard %d pushes, want %d", m.s.heard.Load(), n)
}

var (
	ok200   = retryhttptest.Status(200)
	down503 = retryhttptest.Status(503)
	reset   = retryhttptest.Fail(syscall.ECONNRESET)
	three   = retryhttp.Circuit{Failures: 3, Open: time.Minute}
)

// TestFleetCircuitHealthyBlip: one replica's own network fails while the
// others are served; a 503 blip of a healthy one then opens nothing: the
// others' signs of life ended each row the bad one began.
func TestFleetCircuitHealthyBlip(t *testing.T) {
	srv, prefix := sharedRedis(t), testPrefix(t)
	a := join(t, process(t, srv, prefix), three, []retryhttptest.Reply{reset})
	b := join(t, process(t, srv, prefix), three, []retryhttptest.Reply{ok200, ok200, ok200, down503, ok200})
	c := join(t, process(t, srv, prefix), three, []retryhttptest.Reply{ok200})
	ctx := context.Background()
	for round := range 3 {
		_ = a.do(ctx)
		waitHeard(t, b, int64(round+1)) // the row's start, news to every replica
		waitHeard(t, c, int64(round+1))
		require.NoError(t, b.do(ctx))
		require.NoError(t, c.do(ctx))
	}
	require.ErrorIs(t, a.do(ctx), retryhttp.ErrUnavailable, "the bad replica's own row opened")
	_ = b.do(ctx) // the blip
	for i := range 20 {
		require.NoError(t, b.do(ctx), "b's call %d", i)
		require.NoError(t, c.do(ctx), "c's call %d", i)
	}
	assert.Equal(t, 24, b.script.Len())
}

// TestFleetCircuitCountsProcesses: two Cooldowns of one process (one Store)
// whose network fails are one process: another's calls are never refused.
func TestFleetCircuitCountsProcesses(t *testing.T) {
	srv, prefix := sharedRedis(t), testPrefix(t)
	p := process(t, srv, prefix)
	p1, p2 := join(t, p, three, []retryhttptest.Reply{reset}), join(t, p, three, []retryhttptest.Reply{reset})
	q := join(t, process(t, srv, prefix), three, []retryhttptest.Reply{ok200})
	ctx := context.Background()
	for range 3 {
		_ = p1.do(ctx)
		_ = p2.do(ctx)
	}
	for i := range 10 {
		require.NoError(t, q.do(ctx), "call %d: one process's failures refuse nobody else", i)
	}
	assert.False(t, q.cd.Down(fleetURL))
}

// TestFleetCircuitProbeAnswerLost: the probe's sign of life that Redis did
// not apply (one Apply failing) goes with the prober's next op, which
// closes the fleet's circuit; the other replica's calls go after it.
func TestFleetCircuitProbeAnswerLost(t *testing.T) {
	srv, prefix := sharedRedis(t), testPrefix(t)
	c := retryhttp.Circuit{Failures: 2, Open: 100 * time.Millisecond}
	la := &loseAlive{listening: process(t, srv, prefix)}
	cd := retryhttp.NewCooldown(nil, retryhttp.WithStore(la), retryhttp.WithCircuit(c))
	t.Cleanup(func() { _ = cd.Close() })
	aScript := retryhttptest.NewScript(down503, ok200)
	a := member{la.listening, cd, aScript, retryhttp.New(aScript, retryhttp.WithCooldown(cd), retryhttp.WithMaxRetries(0))}
	b := join(t, process(t, srv, prefix), c, []retryhttptest.Reply{down503, ok200})
	ctx := context.Background()
	_ = a.do(ctx)
	_ = b.do(ctx)
	waitHeard(t, a, 1) // the circuit's opening (a's own row start it does not hear back)
	require.True(t, a.cd.Down(fleetURL))
	time.Sleep(c.Open + 20*time.Millisecond)
	require.NoError(t, a.do(ctx), "a's probe: its sign of life, which Redis did not apply")
	require.EqualValues(t, 1, la.lost.Load())
	require.NoError(t, a.do(ctx), "a's next call goes, with the sign of life")
	waitHeard(t, b, 2) // a row start, then the circuit's closing (b's own opening it does not hear back)
	require.NoError(t, b.do(ctx), "b's goes too")
}

// loseAlive fails the first Apply that carries a sign of life.
type loseAlive struct {
	*listening
	lost atomic.Int32
}

func (s *loseAlive) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	for _, op := range ops {
		if op.Kind == store.OpAlive && s.lost.CompareAndSwap(0, 1) {
			return store.State{}, errors.New("lost")
		}
	}
	return s.listening.Apply(ctx, key, ops)
}

// TestFleetFalteringRedis: with Redis stopped (SIGSTOP), what a replica
// last heard stays its state: a 20 s hold another armed is waited, fresh
// (no op) and a second old (its op to Redis fails).
func TestFleetFalteringRedis(t *testing.T) {
	srv, prefix := ownRedis(t), testPrefix(t)
	a := join(t, process(t, srv, prefix), three, []retryhttptest.Reply{retryhttptest.Status(429, "Retry-After", "20")})
	b := join(t, process(t, srv, prefix), three, []retryhttptest.Reply{ok200})
	ctx := context.Background()
	require.NoError(t, a.do(ctx))
	waitHeard(t, b, 1)
	srv.stop()
	defer srv.resume()
	budget := func() context.Context {
		return retryhttp.WithBudget(ctx, retryhttp.NewBudget(time.Second))
	}
	require.ErrorIs(t, b.do(budget()), retryhttp.ErrRateLimited, "the hold b heard, Redis stopped")
	time.Sleep(1100 * time.Millisecond) // what b heard is a second old: its take goes to Redis, and fails
	require.ErrorIs(t, b.do(budget()), retryhttp.ErrRateLimited, "still held, on what b last heard")
	assert.Zero(t, b.script.Len(), "b sent nothing")
}

// TestFleetCircuitFalteringRedis: with Redis stopped, the fleet's open
// circuit still refuses (and is never logged closed), and once its Open
// has passed each replica sends one probe of its own, not a call's three
// tries.
func TestFleetCircuitFalteringRedis(t *testing.T) {
	srv, prefix := ownRedis(t), testPrefix(t)
	c := retryhttp.Circuit{Failures: 2, Open: 1500 * time.Millisecond}
	log, logs := observer.New(zap.InfoLevel)
	three := []retryhttp.Option{retryhttp.WithMaxRetries(2), retryhttp.WithBackoff(retryhttp.Backoff{})}
	a := join(t, process(t, srv, prefix), c, []retryhttptest.Reply{down503}, three...)
	b := join(t, process(t, srv, prefix), c, []retryhttptest.Reply{down503}, append(three, retryhttp.WithLogger(zap.New(log)))...)
	ctx := context.Background()
	_ = a.do(ctx) // three failures of a, and its own row opens
	waitHeard(t, b, 1)
	_ = b.do(ctx) // b's first: two processes, open
	waitHeard(t, a, 1)
	require.True(t, b.cd.Down(fleetURL))
	require.True(t, a.cd.Down(fleetURL))
	sent := a.script.Len() + b.script.Len()
	srv.stop()
	defer srv.resume()
	time.Sleep(1100 * time.Millisecond) // what each heard is a second old: their takes go to Redis, and fail
	for _, m := range []member{a, b} {
		require.ErrorIs(t, m.do(ctx), retryhttp.ErrUnavailable, "refused, Redis stopped")
	}
	assert.Zero(t, logs.FilterMessage("llm provider back — circuit closed").Len())
	time.Sleep(500 * time.Millisecond) // Open has passed
	for _, m := range []member{a, b} {
		_ = m.do(ctx)
	}
	assert.Equal(t, sent+2, a.script.Len()+b.script.Len(), "one probe each, not three tries each")
}
