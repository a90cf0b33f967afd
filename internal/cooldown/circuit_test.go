package cooldown

import (
	"context"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a send meets before it goes (seeBefore): the lanes it counts
// against, a hold to its end, what the process knows while it is fresh,
// and the process's own row's probe.

// TestEnterCountsItsLanes: a hold of a lane a send costs nothing on
// neither holds it nor is in its retry's wait; one of a lane it costs
// something on does.
func TestEnterCountsItsLanes(t *testing.T) {
	ctx := context.Background()
	e, now := testEngine(t, nil)
	k := e.Watch("k", now.Now())
	e.Apply(ctx, k, []store.Op{{Kind: store.OpHold, Lane: laneTokens, For: 20 * time.Second}})
	for _, tc := range []struct {
		name    string
		costs   Costs
		verdict Verdict
		w       time.Duration
	}{
		{"no tokens", Costs{1}, Go, 0},
		{"tokens", Costs{1, 100}, Held, 20 * time.Second},
	} {
		p := e.Pass(k)
		assert.Equal(t, tc.w, p.HoldLeft(tc.costs), tc.name)
		v, w := p.Enter(ctx, tc.costs, 10*time.Second, Order{})
		assert.Equal(t, tc.verdict, v, tc.name)
		assert.Equal(t, tc.w, w, tc.name)
	}
}

// TestEnterRefusingHoldEnds: a hold that refuses (the provider asked for
// more than MaxHold) refuses a send to its last nanosecond, and not at its
// end.
func TestEnterRefusingHoldEnds(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		after   time.Duration
		verdict Verdict
		w       time.Duration
	}{{20*time.Second - time.Nanosecond, Held, time.Nanosecond}, {20 * time.Second, Go, 0}} {
		e, now := testEngine(t, nil)
		k := e.Watch("k", now.Now())
		e.Apply(ctx, k, []store.Op{{Kind: store.OpHold, For: 20 * time.Second, Refuse: true}})
		now.Add(tc.after)
		p := e.Pass(k)
		v, w := p.Enter(ctx, Costs{1}, time.Minute, Order{})
		assert.Equal(t, tc.verdict, v, "%v after", tc.after)
		assert.Equal(t, tc.w, w, "%v after", tc.after)
	}
}

// TestEnterOnWhatIsFresh: with a Store, a hold the process heard of less
// than freshFor ago refuses a send it does not fit (its wait not shorter
// than within) with no round trip; heard freshFor ago, the Store's take
// decides.
func TestEnterOnWhatIsFresh(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		after  time.Duration
		within time.Duration
		takes  int
	}{
		{"fresh, a wait of within exactly", 0, 20 * time.Second, 0},
		{"fresh to its last nanosecond", freshFor - time.Nanosecond, 10 * time.Second, 0},
		{"freshFor old", freshFor, 10 * time.Second, 1},
	} {
		e, now, cs := sharedEngine(t, time.Second)
		k := e.Watch("k", now.Now())
		e.Apply(ctx, k, []store.Op{{Kind: store.OpHold, For: 20 * time.Second}})
		now.Add(tc.after)
		before := cs.n
		p := e.Pass(k)
		v, w := p.Enter(ctx, Costs{1}, tc.within, Order{})
		assert.Equal(t, Held, v, tc.name)
		assert.Equal(t, 20*time.Second-tc.after, w, tc.name)
		assert.Equal(t, tc.takes, cs.n-before, tc.name)
	}
}

// TestOwnRowProbe: with a Store, three failures of the process's own open
// its own row; past Open the next send is its probe. The probe's end lets
// the next send probe at once; its failure opens the row again for Open;
// its sign of life closes it. (Open is shorter than freshFor: the key is
// fresh, and the row decides with no round trip.)
func TestOwnRowProbe(t *testing.T) {
	ctx := context.Background()
	key := func() string { return "k" }
	const open = 500 * time.Millisecond
	for _, tc := range []struct {
		name    string
		news    func(p *Pass)
		after   time.Duration
		verdict Verdict
	}{
		{"its end", func(p *Pass) { p.End(ctx) }, 0, Go},
		{"its failure", func(p *Pass) { p.Hear(ctx, &Answer{Circuit: Failure}, false, nil, key) }, open - time.Nanosecond, Down},
		{"its failure, Open later", func(p *Pass) { p.Hear(ctx, &Answer{Circuit: Failure}, false, nil, key) }, open, Go},
		{"its sign of life", func(p *Pass) { p.Hear(ctx, &Answer{Circuit: SignOfLife, OK: true}, false, nil, key) }, 0, Go},
	} {
		e, now, _ := sharedEngine(t, open)
		for range 3 {
			p := e.Pass(e.Find("k"))
			p.Hear(ctx, &Answer{Circuit: Failure}, false, nil, key)
		}
		require.True(t, e.Down("k"), "its own row opened")
		now.Add(open)
		probe := e.Pass(e.Find("k"))
		v, _ := probe.Enter(ctx, Costs{1}, time.Minute, Order{})
		require.Equal(t, Go, v)
		require.True(t, probe.Probing(), "the row's probe")
		tc.news(&probe)
		now.Add(tc.after)
		next := e.Pass(e.Find("k"))
		v, _ = next.Enter(ctx, Costs{1}, time.Minute, Order{})
		assert.Equal(t, tc.verdict, v, "%s, %v after", tc.name, tc.after)
	}
}

// TestOwnRowProbeStale: the process's own row decides whatever the Store
// last said: past an Open longer than freshFor (the key's state stale),
// the first send is the row's probe, and the next is refused while it is
// out; one probe, not a plain send and then a probe.
func TestOwnRowProbeStale(t *testing.T) {
	ctx := context.Background()
	key := func() string { return "k" }
	const open = 2 * time.Second
	e, now, _ := sharedEngine(t, open)
	for range 3 {
		p := e.Pass(e.Find("k"))
		p.Hear(ctx, &Answer{Circuit: Failure}, false, nil, key)
	}
	require.True(t, e.Down("k"), "its own row opened")
	now.Add(open)
	probe := e.Pass(e.Find("k"))
	v, _ := probe.Enter(ctx, Costs{1}, time.Minute, Order{})
	require.Equal(t, Go, v)
	assert.True(t, probe.Probing(), "the first send is the row's probe")
	next := e.Pass(e.Find("k"))
	v, _ = next.Enter(ctx, Costs{1}, time.Minute, Order{})
	assert.Equal(t, Down, v, "refused while the probe is out")
}
