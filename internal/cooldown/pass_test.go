package cooldown

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// The seam, as the retry loop meets it: a Pass per try, on an engine with
// no Store, its clock a test's.

// testEngine is an engine on a clock the test moves, with a circuit of 3.
func testEngine(t *testing.T, store store.Store) (*Engine, *testClock) {
	t.Helper()
	clk := &testClock{now: epoch}
	e := New(Config{Store: store, Circuit: &Circuit{Failures: 3, Open: time.Second}})
	e.Bind(clk.Now, zap.NewNop())
	t.Cleanup(e.Close)
	return e, clk
}

// testClock is a clock a test moves; the engine's sweep reads it from a
// goroutine of its own.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestPassHeld: an ask on a failed try holds the next send for all of it:
// Enter says Held with what is left when it does not fit, and Go with the
// wait when it does; Next says what is left after part of it.
func TestPassHeld(t *testing.T) {
	e, clk := testEngine(t, nil)
	ctx := context.Background()
	p := e.Pass(nil)
	p.Hear(ctx, &Answer{Limited: true, Ask: 20 * time.Second, HasAsk: true, AskRes: time.Millisecond},
		true, func() Costs { return Costs{1} }, func() string { return "k" })
	require.True(t, p.Watched(), "the 429 armed the key")

	q := e.Pass(e.Find("k"))
	v, w := q.Enter(ctx, Costs{1}, 10*time.Second, Order{})
	assert.Equal(t, Held, v, "20 s does not fit 10")
	assert.Equal(t, 20*time.Second, w)

	v, w = q.Enter(ctx, Costs{1}, time.Minute, Order{})
	require.Equal(t, Go, v)
	assert.Equal(t, 20*time.Second, w, "a wait that fits: the rest of the hold")
	clk.Add(15 * time.Second)
	w, fromHold, down := q.Next()
	assert.Equal(t, 5*time.Second, w)
	assert.True(t, fromHold)
	assert.False(t, down)
	clk.Add(5 * time.Second)
	w, _, _ = q.Next()
	assert.Zero(t, w, "its slot: it goes")
}

// TestPassCircuit: three failures open the key's circuit; Enter then says
// Down; after Open, the next Pass is the probe, its End lets the next
// probe, and its sign of life closes the circuit.
func TestPassCircuit(t *testing.T) {
	e, clk := testEngine(t, nil)
	ctx := context.Background()
	fail := &Answer{Circuit: Failure}
	for range 3 {
		p := e.Pass(e.Find("k"))
		p.Hear(ctx, fail, false, nil, func() string { return "k" })
	}
	require.True(t, e.Down("k"))
	p := e.Pass(e.Find("k"))
	v, _ := p.Enter(ctx, Costs{1}, time.Minute, Order{})
	assert.Equal(t, Down, v)
	assert.True(t, p.Refuses())

	clk.Add(time.Second)
	probe := e.Pass(e.Find("k"))
	v, _ = probe.Enter(ctx, Costs{1}, time.Minute, Order{})
	require.Equal(t, Go, v)
	require.True(t, probe.Probing())
	other := e.Pass(e.Find("k"))
	v, _ = other.Enter(ctx, Costs{1}, time.Minute, Order{})
	assert.Equal(t, Down, v, "while the probe is out")
	probe.End(ctx)
	assert.False(t, e.Down("k"), "its end lets the next try probe")

	probe = e.Pass(e.Find("k"))
	v, _ = probe.Enter(ctx, Costs{1}, time.Minute, Order{})
	require.Equal(t, Go, v)
	probe.Hear(ctx, &Answer{Circuit: SignOfLife, OK: true}, true, nil, nil)
	assert.False(t, e.Down("k"))
	after := e.Pass(e.Find("k"))
	v, _ = after.Enter(ctx, Costs{1}, time.Minute, Order{})
	assert.Equal(t, Go, v, "closed")
}

// TestPassFree: a watched key with nothing held or paced takes no slot:
// Enter says Go at once, and a Store sees no op.
func TestPassFree(t *testing.T) {
	counted := &countApplies{Store: store.NewLocal(nil)}
	e, _ := testEngine(t, counted)
	ctx := context.Background()
	p := e.Pass(nil)
	p.Hear(ctx, &Answer{Circuit: Failure}, false, nil, func() string { return "k" }) // a row: watched, nothing held
	before := counted.n
	q := e.Pass(e.Find("k"))
	v, w := q.Enter(ctx, Costs{1}, time.Minute, Order{})
	assert.Equal(t, Go, v)
	assert.Zero(t, w)
	assert.Equal(t, before, counted.n, "no op")
}

// countApplies counts the Applies that reach a Store.
type countApplies struct {
	store.Store
	n int
}

func (s *countApplies) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	s.n++
	return s.Store.Apply(ctx, key, ops)
}

// sharedEngine is an engine with a circuit of 3, open for open, over a
// counted store.Local, both on one clock the test moves.
func sharedEngine(t *testing.T, open time.Duration) (*Engine, *testClock, *countApplies) {
	t.Helper()
	clk := &testClock{now: epoch}
	cs := &countApplies{Store: store.NewLocal(clk.Now)}
	e := New(Config{Store: cs, Circuit: &Circuit{Failures: 3, Open: open}})
	e.Bind(clk.Now, zap.NewNop())
	t.Cleanup(e.Close)
	return e, clk, cs
}

// TestPassNextAtSlot: a send whose slot Enter gave at once waits after
// only for a hold armed since (fromHold then); the sends let in since, of
// a higher priority too, go after it.
func TestPassNextAtSlot(t *testing.T) {
	for _, tc := range []struct {
		name     string
		then     Order         // a send let in after it
		ask      time.Duration // a 429's ask heard after: a hold
		w        time.Duration
		fromHold bool
	}{
		{"nothing since: it goes", normal, 0, 0, false},
		{"an Interactive send let in since: it goes", interactive, 0, 0, false},
		{"a hold armed since: the rest of it", normal, 2 * time.Second, 2 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, clk := testEngine(t, nil)
			k := pacedKey(t, e, clk.Now())
			ctx := context.Background()
			p := e.Pass(k)
			v, w := p.Enter(ctx, Costs{1}, time.Minute, normal)
			require.Equal(t, Go, v)
			require.Zero(t, w, "its slot is now")
			q := e.Pass(k)
			v, _ = q.Enter(ctx, Costs{1}, time.Minute, tc.then)
			require.Equal(t, Go, v)
			if tc.ask > 0 {
				q.Hear(ctx, &Answer{Limited: true, Ask: tc.ask, HasAsk: true, AskRes: time.Millisecond},
					true, func() Costs { return Costs{1} }, func() string { return "k" })
			}
			w, fromHold, down := p.Next()
			assert.False(t, down)
			assert.Equal(t, tc.w, w)
			assert.Equal(t, tc.fromHold, fromHold)
		})
	}
}
