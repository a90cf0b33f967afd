package retryhttp

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The circuit of a fleet (R25): K Cooldowns of one process over one
// store.Local, as K replicas over one Redis (retryredis's tests run the
// same on a real one).

type replica struct {
	script *retryhttptest.Script
	cd     *Cooldown
	tr     *Transport
}

func newFleet(t *testing.T, clk *retryhttptest.Clock, s store.Store, replies ...[]retryhttptest.Reply) []replica {
	t.Helper()
	out := make([]replica, len(replies))
	for i, rs := range replies {
		script := retryhttptest.NewScript(rs...).WithClock(clk)
		cd := NewCooldown(nil, WithStore(s), WithCircuit(Circuit{Failures: 3, Open: time.Second}))
		t.Cleanup(func() { _ = cd.Close() })
		out[i] = replica{script, cd, New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))}
	}
	return out
}

func (r replica) do() error {
	resp, err := r.tr.RoundTrip(getReq(context.Background()))
	if resp != nil {
		resp.Body.Close()
	}
	return err
}

// TestCircuitFleetOpensTogether: two replicas' failures open the fleet's
// circuit, and the third, which sent nothing, refuses its calls too, having
// heard of it; after Open, one probe goes for the whole fleet.
func TestCircuitFleetOpensTogether(t *testing.T) {
	clk := newClock()
	f := newFleet(t, clk, store.NewLocal(clk.Now), []retryhttptest.Reply{down503}, []retryhttptest.Reply{down503},
		[]retryhttptest.Reply{down503})
	_ = f[0].do()
	_ = f[1].do()
	_ = f[0].do()
	for i, r := range f {
		assert.True(t, r.cd.Down(origin), "replica %d", i)
		assert.ErrorIs(t, r.do(), ErrUnavailable, "replica %d", i)
	}
	assert.Zero(t, f[2].script.Len(), "the third sent nothing")
	clk.Add(time.Second)
	for range 3 {
		for _, r := range f {
			_ = r.do()
		}
	}
	assert.Equal(t, 4, f[0].script.Len()+f[1].script.Len()+f[2].script.Len(), "three failures, then one probe for the fleet")
}

// TestCircuitFleetBadReplica: one replica whose own network fails never
// refuses the others' calls; its own row refuses its own.
func TestCircuitFleetBadReplica(t *testing.T) {
	clk := newClock()
	f := newFleet(t, clk, store.NewLocal(clk.Now), []retryhttptest.Reply{reset}, []retryhttptest.Reply{ok200},
		[]retryhttptest.Reply{ok200})
	for range 10 {
		_ = f[0].do()
	}
	assert.Equal(t, 3, f[0].script.Len(), "the bad replica's own row opened after three")
	assert.ErrorIs(t, f[0].do(), ErrUnavailable)
	for i := 1; i < 3; i++ {
		for range 5 {
			require.NoError(t, f[i].do(), "replica %d", i)
		}
		assert.False(t, f[i].cd.Down(origin), "replica %d", i)
	}
	clk.Add(time.Second)
	assert.ErrorIs(t, f[0].do(), syscall.ECONNRESET, "its own probe goes, and fails")
	assert.Equal(t, 4, f[0].script.Len())
}

// TestCircuitStoreFailing: with the Store failing, the circuit goes on in
// the process, on its own tries.
func TestCircuitStoreFailing(t *testing.T) {
	clk := newClock()
	f := newFleet(t, clk, &failingStore{}, []retryhttptest.Reply{down503})
	for range 6 {
		_ = f[0].do()
	}
	assert.Equal(t, 3, f[0].script.Len())
	err := f[0].do()
	assert.True(t, errors.Is(err, ErrUnavailable), "%v", err)
}

// TestCircuitFleetOwnRowEnds: a replica's own row ends when it hears the
// fleet's circuit open (one probe for the fleet): its failures before that
// do not count again once the fleet's circuit closes, so two more of its
// own failures do not open its own row (three would).
func TestCircuitFleetOwnRowEnds(t *testing.T) {
	clk := newClock()
	f := newFleet(t, clk, store.NewLocal(clk.Now),
		[]retryhttptest.Reply{down503, down503, down503, ok200},
		[]retryhttptest.Reply{down503, down503, ok200})
	a, b := f[0], f[1]
	_ = b.do()
	_ = b.do()
	_ = a.do() // the fleet's third failure, of two replicas: it opens; a's own row had one
	require.True(t, a.cd.Down(origin))
	clk.Add(time.Second)
	require.NoError(t, b.do(), "b's probe, for the fleet")
	require.False(t, a.cd.Down(origin), "a heard the fleet's circuit close")
	_ = a.do()
	_ = a.do()
	assert.False(t, a.cd.Down(origin), "two failures of a's own since: its own row is not open")
	assert.NoError(t, a.do(), "a's next call goes")
	assert.Equal(t, 4, a.script.Len())
}

// processStore is a Store of a process of its own: every Cooldown given one
// value is one process (processOf), whatever backend it shares.
type processStore struct{ store.Store }

// TestCircuitFleetHealthyBlip: one replica's own network fails while the
// others are served; one 503 blip of a healthy replica then does not open
// the fleet's circuit: the healthy replicas' signs of life ended each row
// the bad one began (its first failure is news to every replica, which
// watches the key until its row is empty).
func TestCircuitFleetHealthyBlip(t *testing.T) {
	clk := newClock()
	blip := []retryhttptest.Reply{ok200, ok200, ok200, down503, ok200}
	f := newFleet(t, clk, store.NewLocal(clk.Now), []retryhttptest.Reply{reset}, blip, []retryhttptest.Reply{ok200})
	a, b, c := f[0], f[1], f[2]
	for range 3 {
		_ = a.do()
		require.NoError(t, b.do())
		require.NoError(t, c.do())
	}
	require.ErrorIs(t, a.do(), ErrUnavailable, "the bad replica's own row opened")
	_ = b.do() // b's blip: a 503, handed back
	require.Equal(t, 4, b.script.Len())
	for i := range 20 {
		require.NoError(t, b.do(), "b's call %d", i)
		require.NoError(t, c.do(), "c's call %d", i)
	}
	assert.False(t, b.cd.Down(origin))
	assert.False(t, c.cd.Down(origin))
}

// TestCircuitFleetCountsProcesses: the fleet's row counts processes, not
// Cooldowns. Two Cooldowns of one process whose network fails are one
// process: their failures never refuse another's calls. And a replica
// that crash-loops (a new process each start, each failing) is broken up
// by the healthy replica's signs of life between its starts.
func TestCircuitFleetCountsProcesses(t *testing.T) {
	circuit := WithCircuit(Circuit{Failures: 3, Open: time.Second})
	member := func(clk *retryhttptest.Clock, s store.Store, r retryhttptest.Reply) replica {
		script := retryhttptest.NewScript(r).WithClock(clk)
		cd := NewCooldown(nil, WithStore(s), circuit)
		t.Cleanup(func() { _ = cd.Close() })
		return replica{script, cd, New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))}
	}
	t.Run("two Cooldowns of one process", func(t *testing.T) {
		clk := newClock()
		local := store.NewLocal(clk.Now)
		p := &processStore{local}
		p1, p2 := member(clk, p, reset), member(clk, p, reset)
		q := member(clk, &processStore{local}, ok200)
		for range 3 {
			_ = p1.do()
			_ = p2.do()
		}
		for range 5 {
			require.NoError(t, q.do(), "one process's failures refuse nobody else")
		}
		assert.False(t, q.cd.Down(origin))
	})
	t.Run("a crash loop", func(t *testing.T) {
		clk := newClock()
		local := store.NewLocal(clk.Now)
		q := member(clk, &processStore{local}, ok200)
		for life := range 4 {
			bad := member(clk, &processStore{local}, reset) // a new process
			_ = bad.do()
			_ = bad.do()
			_ = bad.cd.Close()
			require.NoError(t, q.do(), "life %d: the healthy replica's call goes, and ends the row", life)
		}
		assert.False(t, q.cd.Down(origin))
	})
}

// TestCircuitFleetRowSpansTime: failures in the fleet's row are in a row:
// three failures 6 s apart, of two replicas, with a third replica's 40
// successes between each, never open the circuit, the keys looked over
// (swept) between them as they are every second.
func TestCircuitFleetRowSpansTime(t *testing.T) {
	clk := newClock()
	f := newFleet(t, clk, store.NewLocal(clk.Now), []retryhttptest.Reply{down503}, []retryhttptest.Reply{down503},
		[]retryhttptest.Reply{ok200})
	a, b, c := f[0], f[1], f[2]
	sweep := func() {
		for _, r := range f {
			r.cd.sweepIdle()
		}
	}
	for _, r := range []replica{a, b, a} {
		_ = r.do()
		for i := range 40 {
			require.NoError(t, c.do(), "success %d", i)
		}
		clk.Add(6 * time.Second)
		sweep()
	}
	assert.False(t, c.cd.Down(origin))
	assert.False(t, a.cd.Down(origin))
	assert.NoError(t, c.do())
}

// loseAliveStore is a Store that fails the first Apply that carries a sign
// of life, as a Redis that times out once.
type loseAliveStore struct {
	store.Store
	lost atomic.Int32
}

func (s *loseAliveStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	for _, op := range ops {
		if op.Kind == store.OpAlive && s.lost.CompareAndSwap(0, 1) {
			return store.State{}, errors.New("timeout")
		}
	}
	return s.Store.Apply(ctx, key, ops)
}

// TestCircuitFleetProbeAnswerLost: the probe's sign of life that its
// Store did not apply goes with the next op of the key: the prober's next
// call goes and closes the fleet's circuit, and the other replica's call
// goes after it, not a lease later.
func TestCircuitFleetProbeAnswerLost(t *testing.T) {
	clk := newClock()
	s := &loseAliveStore{Store: store.NewLocal(clk.Now)}
	f := newFleet(t, clk, nil, []retryhttptest.Reply{down503, down503, ok200}, []retryhttptest.Reply{down503, ok200})
	for i := range f {
		f[i] = replicaOn(t, clk, s, f[i].script)
	}
	a, b := f[0], f[1]
	_ = a.do()
	_ = b.do()
	_ = a.do()
	require.True(t, b.cd.Down(origin), "open")
	clk.Add(time.Second)
	require.NoError(t, a.do(), "a's probe: a sign of life, which the Store does not apply")
	require.Equal(t, int32(1), s.lost.Load())
	require.NoError(t, a.do(), "a's next call goes, and brings the sign of life")
	require.NoError(t, b.do(), "b's goes too: the fleet's circuit closed")
	assert.Equal(t, 2, b.script.Len())
}

// replicaOn is a replica on store s over script, with the fleet's circuit.
func replicaOn(t *testing.T, clk *retryhttptest.Clock, s store.Store, script *retryhttptest.Script) replica {
	t.Helper()
	cd := NewCooldown(nil, WithStore(s), WithCircuit(Circuit{Failures: 3, Open: time.Second}))
	cd.setProcess(rand.Uint64()) // a process each, whatever Store value they share
	t.Cleanup(func() { _ = cd.Close() })
	return replica{script, cd, New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))}
}

// TestCircuitFleetStoreStalledPastOpen: with the Store failing past Open,
// each replica sends one probe of its own, not a whole call's tries: the
// open circuit it heard of is still its state.
func TestCircuitFleetStoreStalledPastOpen(t *testing.T) {
	clk := newClock()
	clk.Add(777) // a real clock's nanoseconds
	fs := &flakyStore{Local: skewedLocal(clk, 1234567)}
	var rs []replica
	for range 3 {
		script := retryhttptest.NewScript(down503).WithClock(clk)
		cd := NewCooldown(nil, WithStore(fs), WithCircuit(Circuit{Failures: 3, Open: time.Second}))
		cd.setProcess(rand.Uint64())
		t.Cleanup(func() { _ = cd.Close() })
		rs = append(rs, replica{script, cd, New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(2), WithBackoff(Backoff{}))})
	}
	_ = rs[0].do() // three tries
	_ = rs[1].do() // and a second process's: open
	require.True(t, rs[2].cd.Down(origin))
	fs.down.Store(true)
	clk.Add(time.Second)
	for i, r := range rs {
		before := r.script.Len()
		_ = r.do()
		assert.Equal(t, 1, r.script.Len()-before, "replica %d: one probe", i)
		assert.ErrorIs(t, r.do(), ErrUnavailable, "replica %d: its probe failed: open again", i)
	}
}
