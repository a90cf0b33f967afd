package retryhttp

import (
	"context"
	"errors"
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
	clk := retryhttptest.NewClock()
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
	clk := retryhttptest.NewClock()
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
	clk := retryhttptest.NewClock()
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
	clk := retryhttptest.NewClock()
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
