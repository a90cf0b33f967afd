package store

import (
	"testing"
	"time"
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
		c.Probe = now.Add(ProbeLease)
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
	c.Last = now
	if op.Probe && open && c.Probe != (time.Time{}) {
		c.Open, c.Probe = now.Add(d), time.Time{}
		return c, true, false, false
	}
	if c.Failures == 0 {
		c.From, c.Many = op.From, false
	} else if c.From != op.From {
		c.Many = true
	}
	c.Failures++
	if !open && c.Failures >= n && (c.Many || op.Solo) {
		c.Open, c.Since = now.Add(d), now
		return c, true, false, false
	}
	return c, false, false, false
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
	for f := range 7 {
		for _, many := range []bool{false, true} {
			for _, open := range times {
				for _, probe := range times {
					states = append(states, Circuit{Failures: f, From: 1, Many: many && f > 0, Open: open, Probe: probe,
						Last: now.Add(-time.Second)})
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
