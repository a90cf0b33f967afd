package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// circuitRules is R25's state machine written apart from circuit.go, as
// the rules read: what one event does to a circuit at now, and whether a
// take (Circuit set) goes, as the probe or not.
func circuitRules(c Circuit, now time.Time, op Op) (next Circuit, publish, unavailable, probe bool) {
	open := c.Open != (time.Time{})
	switch op.Kind {
	case OpTake:
		switch {
		case !op.Circuit || !open:
			return c, false, false, false
		case now.Before(c.Open), c.Probe != (time.Time{}) && now.Before(c.Probe):
			return c, false, true, false
		}
		c.Probe = now.Add(ProbeLease) // (no lane: the slot is now)
		return c, false, false, true
	case OpAlive:
		return Circuit{}, open, false, false
	case OpProbeEnd:
		c.Probe = time.Time{}
		return c, false, false, false
	}
	d := op.Open
	if d <= 0 {
		d = time.Second
	}
	n := op.Failures
	if n <= 0 {
		n = 5
	}
	if op.Probe && open && c.Probe != (time.Time{}) {
		c.Last, c.Open, c.Probe = now, now.Add(d), time.Time{}
		return c, true, false, false
	}
	if !open && now.Sub(c.Last) >= KeepFor {
		c.Failures = 0 // an old row is no row
	}
	first := c.Failures == 0
	if first {
		c.From, c.Many = op.From, false
	} else if c.From != op.From {
		c.Many = true
	}
	c.Failures++
	c.Last = now
	if !open && c.Failures >= n && (c.Many || op.Solo) {
		c.Open, c.Since = now.Add(d), now
		return c, true, false, false
	}
	return c, first, false, false
}

// TestCircuitExhaustive holds Apply's circuit to circuitRules over every
// circuit state and event of a small world: rows of 0 to 6 failures from
// one process or two, closed, open, half-open with and without a probe
// out (lease running or run out), and every event (a failure of either
// process, solo or shared, the probe's or not, at several thresholds; a
// sign of life; a probe's end; a take that obeys the circuit or not).
func TestCircuitExhaustive(t *testing.T) {
	now := epoch
	times := []time.Time{{}, now.Add(-time.Millisecond), now, now.Add(time.Second)}
	var states []Circuit
	lasts := []time.Time{now.Add(-time.Second), now.Add(-KeepFor + time.Microsecond), now.Add(-KeepFor)}
	for f := range 7 {
		for _, many := range []bool{false, true} {
			for _, open := range times {
				for _, probe := range times {
					for _, last := range lasts {
						states = append(states, Circuit{Failures: f, From: 1, Many: many && f > 0, Open: open, Probe: probe, Last: last})
					}
				}
			}
		}
	}
	var events []Op
	for _, from := range []uint64{1, 2} {
		for _, solo := range []bool{false, true} {
			for _, probe := range []bool{false, true} {
				for _, n := range []int{0, 1, 3, 5, 7} {
					events = append(events, Op{Kind: OpFail, From: from, Solo: solo, Probe: probe, Failures: n, Open: 2 * time.Second})
				}
			}
		}
	}
	events = append(events, Op{Kind: OpFail, From: 2}, Op{Kind: OpAlive}, Op{Kind: OpProbeEnd},
		Op{Kind: OpTake, Circuit: true}, Op{Kind: OpTake})
	n := 0
	for _, c := range states {
		for _, op := range events {
			r := Record{Circuit: c}
			res := Apply(&r, now, []Op{op})
			want, publish, unavailable, probe := circuitRules(c, now, op)
			if r.Circuit != want || res.Publish != publish || res.Unavailable != unavailable || res.Probe != probe {
				t.Fatalf("%+v, then %s %+v:\n got %+v publish %v unavailable %v probe %v\nwant %+v publish %v unavailable %v probe %v",
					c, op.Kind, op, r.Circuit, res.Publish, res.Unavailable, res.Probe, want, publish, unavailable, probe)
			}
			n++
		}
	}
	t.Logf("%d cases", n)
}

// TestProbeLeaseFromItsSlot: a probe's lease runs from its slot, not its
// take: a probe held 120 s by its key's hold is still out 31 s after its
// take, and until 30 s past its slot; then the next take probes.
func TestProbeLeaseFromItsSlot(t *testing.T) {
	r := Record{Lanes: []Lane{{Until: epoch.Add(120 * time.Second)}},
		Circuit: Circuit{Failures: 5, From: 1, Many: true, Last: epoch, Open: epoch, Since: epoch}}
	take := []Op{{Kind: OpTake, Costs: []float64{1}, Within: MaxAhead, Circuit: true}}
	res := Apply(&r, epoch, take)
	require.True(t, res.Probe)
	require.Equal(t, 120*time.Second, res.Wait)
	for _, at := range []time.Duration{31 * time.Second, 120 * time.Second, 150*time.Second - time.Microsecond} {
		res = Apply(&r, epoch.Add(at), take)
		assert.True(t, res.Unavailable, "%v after the take: the probe is out", at)
	}
	res = Apply(&r, epoch.Add(150*time.Second), take)
	assert.True(t, res.Probe, "its lease over: the next take probes")
}
