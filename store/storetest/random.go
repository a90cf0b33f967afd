package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// random applies Harness.Sequences seeded random sequences of ops, each
// to a key of its own, and holds every step to the reference. A failure
// names the sequence's seed, so that it can be run again alone (Seed, and
// Sequences 1).
func (k kit) random(t *testing.T) {
	s := k.h.Open(t)
	var next atomic.Int64
	var failed atomic.Bool
	errs := make(chan error, k.h.Parallel)
	var wg sync.WaitGroup
	for range k.h.Parallel {
		wg.Go(func() {
			for !failed.Load() {
				i := next.Add(1) - 1
				if i >= int64(k.h.Sequences) {
					return
				}
				seed := k.h.Seed + uint64(i)
				if err := agree(s, k.key(t, fmt.Sprint("r", i)), sequence(seed)); err != nil {
					failed.Store(true)
					errs <- fmt.Errorf("sequence %d (run it alone with Harness{Seed: %d, Sequences: 1}): %w", i, seed, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !failed.Load() {
		t.Logf("%d random sequences of ops agree with store.Apply", k.h.Sequences)
	}
}

// sequence is the random sequence of seed: 1 to 12 steps.
func sequence(seed uint64) []step {
	g := gen{r: rand.New(rand.NewPCG(seed, 0x5eed))}
	steps := make([]step, 1+g.r.IntN(12))
	for j := range steps {
		steps[j] = g.step
	}
	return steps
}

// gen draws ops, mostly sane, with values out of range among them.
type gen struct{ r *rand.Rand }

// step draws the ops of one Apply, some made from the last State (its
// marks, its versions), as a Cooldown makes them.
func (g gen) step(h []store.State) []store.Op {
	if g.r.IntN(6) == 0 {
		return g.edge()
	}
	ops := make([]store.Op, 1+g.r.IntN(3))
	for i := range ops {
		ops[i] = g.op(last(h))
	}
	if g.r.IntN(20) == 0 {
		return nil // a read
	}
	return ops
}

func (g gen) op(st store.State) store.Op {
	lane := g.lane()
	cur := st.Lane(lane)
	switch g.r.IntN(11) {
	case 0, 1, 2:
		costs := make([]float64, g.r.IntN(6))
		for i := range costs {
			costs[i] = g.cost()
		}
		return store.Op{Kind: store.OpTake, Costs: costs, Within: g.dur(), Priority: int8(g.r.IntN(5) - 2), Retry: g.r.IntN(3) == 0, Circuit: g.r.IntN(2) == 0}
	case 3:
		return store.Op{Kind: store.OpHold, Lane: lane, For: g.dur(), Refuse: g.r.IntN(4) == 0}
	case 4:
		op := store.Op{Kind: store.OpCorrect, Lane: lane, For: g.dur(), Moved: g.dur()}
		if g.r.IntN(3) > 0 {
			op.Mark, op.Moved = g.mark(cur), cur.Moved
		}
		return op
	case 5:
		return store.Op{Kind: store.OpUntake, Lane: lane, Mark: g.mark(cur), Charge: g.float()}
	case 6:
		v := cur.Version
		if g.r.IntN(5) == 0 {
			v = g.r.Uint64()
		}
		return store.Op{Kind: store.OpRates, Lane: lane, Version: v, Per: g.float(), Burst: g.float(), Rates: g.rates()}
	case 7:
		return store.Op{Kind: store.OpLimited, Lane: lane}
	case 8:
		return store.Op{Kind: store.OpFail, From: uint64(g.r.IntN(3)) + 1<<60, Failures: g.r.IntN(5) - 1,
			Open: g.dur(), Solo: g.r.IntN(2) == 0, Probe: g.r.IntN(2) == 0}
	case 9:
		if g.r.IntN(2) == 0 {
			return store.Op{Kind: store.OpProbeEnd}
		}
		return store.Op{Kind: store.OpAlive}
	}
	return store.Op{Kind: store.OpKind(g.r.IntN(256))}
}

// edge draws a hold and a take in one Apply, so at one now, whose wait is
// the hold's exactly, and a Within of that wait, a µs more or a µs less:
// the edge between a wait that fits and one that does not.
func (g gen) edge() []store.Op {
	lane := store.LaneID(g.r.IntN(4))
	d := time.Duration(1+g.r.IntN(50000)) * time.Microsecond
	costs := make([]float64, lane+1)
	costs[lane] = 1
	within := d + time.Duration(g.r.IntN(3)-1)*time.Microsecond
	return []store.Op{{Kind: store.OpHold, Lane: lane, For: d}, {Kind: store.OpTake, Costs: costs, Within: within}}
}

func (g gen) lane() store.LaneID {
	if g.r.IntN(10) == 0 {
		return store.LaneID(g.r.IntN(256))
	}
	return store.LaneID(g.r.IntN(4))
}

// dur draws a duration: mostly micro- to milliseconds, some zero,
// negative, seconds, hours, or the extremes.
func (g gen) dur() time.Duration {
	switch g.r.IntN(12) {
	case 0:
		return 0
	case 1:
		return -time.Duration(g.r.Int64N(int64(time.Second)))
	case 2:
		return time.Duration(g.r.Int64N(int64(10 * time.Second)))
	case 3:
		return time.Duration(g.r.Int64N(int64(3 * time.Hour)))
	case 4:
		return math.MaxInt64
	case 5:
		return math.MinInt64
	}
	return time.Duration(g.r.Int64N(int64(50 * time.Millisecond)))
}

// float draws a rate, charge or cost in ns: mostly sane, some out of
// range.
func (g gen) float() float64 {
	switch g.r.IntN(14) {
	case 0:
		return 0
	case 1:
		return math.NaN()
	case 2:
		return math.Inf(1)
	case 3:
		return -g.r.Float64() * 1e6
	case 4:
		return 1e300
	case 5:
		return g.r.Float64() * float64(2*time.Hour)
	case 6:
		return g.r.Float64() * 100 // a token's per, below a ns
	}
	return g.r.Float64() * float64(20*time.Millisecond)
}

func (g gen) cost() float64 {
	switch g.r.IntN(8) {
	case 0:
		return g.float()
	case 1:
		return g.r.Float64() * 1e20
	case 2:
		return 0
	}
	return float64(1 + g.r.IntN(4000))
}

// mark draws a Mark: the lane's Next as the State gave it, mostly.
func (g gen) mark(cur store.Lane) time.Time {
	switch g.r.IntN(6) {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(0, g.r.Int64()) // anything
	case 2:
		return cur.Next.Add(time.Duration(g.r.IntN(3)-1) * time.Microsecond)
	}
	return cur.Next
}

func (g gen) rates() string {
	switch g.r.IntN(10) {
	case 0:
		return strings.Repeat("x", store.MaxRates+1+g.r.IntN(100))
	case 1:
		return ""
	case 2:
		return binaryRates
	}
	b := make([]byte, g.r.IntN(60))
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	return string(b)
}
