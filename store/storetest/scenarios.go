package storetest

import (
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

const ms = time.Millisecond

func these(ops ...store.Op) step { return func([]store.State) []store.Op { return ops } }

func last(h []store.State) store.State {
	if len(h) == 0 {
		return store.State{}
	}
	return h[len(h)-1]
}

func take(within time.Duration, retry bool, costs ...float64) step {
	return these(store.Op{Kind: store.OpTake, Costs: costs, Within: within, Retry: retry})
}

// takeC is a take that obeys the circuit.
func takeC(costs ...float64) step {
	return these(store.Op{Kind: store.OpTake, Costs: costs, Within: time.Minute, Circuit: true})
}

// rates sets lane's rates over the version it has now.
func rates(lane store.LaneID, per, burst time.Duration, r string) step {
	return func(h []store.State) []store.Op {
		return []store.Op{{Kind: store.OpRates, Lane: lane, Version: last(h).Lane(lane).Version,
			Per: float64(per), Burst: float64(burst), Rates: r}}
	}
}

func hold(lane store.LaneID, d time.Duration, refuse bool) step {
	return these(store.Op{Kind: store.OpHold, Lane: lane, For: d, Refuse: refuse})
}

// untakeOf gives back charge on lane as of the State back steps ago.
func untakeOf(lane store.LaneID, back int, charge time.Duration) step {
	return func(h []store.State) []store.Op {
		return []store.Op{{Kind: store.OpUntake, Lane: lane, Mark: h[len(h)-back].Lane(lane).Next, Charge: float64(charge)}}
	}
}

// correctOf corrects lane to full in d, as of the last State's take (or as
// a send not paced when unpaced).
func correctOf(lane store.LaneID, d time.Duration, unpaced bool) step {
	return func(h []store.State) []store.Op {
		op := store.Op{Kind: store.OpCorrect, Lane: lane, For: d}
		if !unpaced {
			op.Mark, op.Moved = last(h).Lane(lane).Next, last(h).Lane(lane).Moved
		}
		return []store.Op{op}
	}
}

func fail(from uint64, solo, probe bool) step {
	return these(store.Op{Kind: store.OpFail, From: from, Failures: 3, Open: 20 * ms, Solo: solo, Probe: probe})
}

func alive() step { return these(store.Op{Kind: store.OpAlive}) }

// pause lets the Store's clock pass d before the next step.
func pause(d time.Duration) step {
	return func([]store.State) []store.Op { time.Sleep(d); return nil }
}

// binaryRates is 53 bytes, as the policy's rates are, with every byte an
// encoding could trip on.
var binaryRates = func() string {
	b := make([]byte, 53)
	for i := range b {
		b[i] = byte(i * 5)
	}
	b[3], b[4], b[5], b[6], b[7] = ' ', ':', '\n', 0, '\r'
	return string(b)
}()

var scenarios = []struct {
	name  string
	steps []step
}{
	{"a read of nothing", []step{these()}},
	{"a take on a lane not paced", []step{take(0, false, 1), take(0, false, 1, 1)}},
	{"pace by the bucket", []step{rates(0, 100*ms, 200*ms, "r"),
		take(time.Second, false, 1), take(time.Second, false, 1), take(time.Second, false, 1)}},
	{"a wait that does not fit Within", []step{rates(0, 100*ms, 0, "r"),
		take(time.Second, false, 1), take(50*ms, false, 1), take(0, false, 1), these()}},
	{"a hold moves the queue on", []step{rates(0, 100*ms, 0, "r"), take(time.Second, false, 1),
		take(time.Second, false, 1), hold(0, time.Second, false), take(3*time.Second, false, 1), hold(0, 500*ms, false)}},
	{"a refusing hold", []step{hold(0, time.Second, true), take(time.Minute, false, 1),
		take(time.Minute, false, 0, 1), hold(0, 2*time.Second, false), take(time.Minute, false, 1)}},
	{"a stale version", []step{rates(0, 100*ms, 0, "a"),
		these(store.Op{Kind: store.OpRates, Lane: 0, Version: 7, Per: 1, Rates: "b"})}},
	{"a cut stretches the queue, a growth shrinks it", []step{rates(0, 100*ms, 0, "a"), take(time.Second, false, 1),
		take(time.Second, false, 1), take(time.Second, false, 1), rates(0, 200*ms, 0, "b"), rates(0, 50*ms, 0, "c")}},
	{"a change under 5% scales nothing", []step{rates(0, 100*ms, 0, "a"), take(time.Second, false, 1),
		take(time.Second, false, 1), rates(0, 103*ms, 0, "b"), rates(0, 106*ms, 0, "c"), take(time.Second, false, 1)}},
	{"a retry never takes the slot due now", []step{rates(0, 100*ms, 0, "a"),
		take(time.Second, false, 1), take(time.Second, true, 1)}},
	{"untake of the last slot, and of one not the last", []step{rates(0, 100*ms, 0, "a"), take(time.Second, false, 1),
		take(time.Second, false, 1), untakeOf(0, 1, 100*ms), untakeOf(0, 3, 100*ms)}},
	{"a retry goes first", []step{rates(0, 100*ms, 0, "a"), take(time.Second, false, 1), take(time.Second, false, 1),
		take(time.Second, false, 1), take(time.Second, true, 1), take(time.Second, true, 1), take(time.Second, false, 1)}},
	{"corrections", []step{rates(0, 100*ms, 0, "a"), take(time.Second, false, 1), correctOf(0, 50*ms, false),
		take(time.Second, false, 1), correctOf(0, 400*ms, false), correctOf(0, 2*time.Second, true), correctOf(0, time.Second, true)}},
	{"a correction of a lane never taken", []step{rates(1, ms, 0, "a"), correctOf(1, time.Second, true)}},
	{"token lanes, and a cost past the bucket", []step{rates(1, 20*time.Microsecond, 100*ms, binaryRates),
		rates(3, time.Microsecond, 0, ""), take(time.Second, false, 1, 4000, 0, 500),
		take(time.Minute, false, 1, 1e12, 0, 1e15), take(time.Minute, false, 0, 1)}},
	{"lanes past the end", []step{rates(6, ms, 0, "six"), hold(9, time.Hour, true), take(time.Second, false, 0, 0, 0, 0, 0, 0, 1, 1, 1)}},
	{"limited", []step{these(store.Op{Kind: store.OpLimited, Lane: store.OutputTokens}), these(store.Op{Kind: store.OpLimited})}},
	{"the circuit opens on two processes' failures", []step{fail(1, false, false), fail(1, false, false),
		fail(1, false, false), takeC(1), fail(2, false, false), takeC(1), alive(), takeC(1)}},
	{"a solo circuit, its probe, and a failed probe", []step{fail(1, true, false), fail(1, true, false),
		fail(1, true, false), takeC(1), pause(25 * ms), takeC(1), takeC(1), fail(1, true, true), takeC(1),
		pause(25 * ms), takeC(1), these(store.Op{Kind: store.OpProbeEnd}), takeC(1), alive(), takeC(1)}},
	{"a take that ignores the circuit", []step{fail(1, true, false), fail(1, true, false), fail(1, true, false), take(0, false, 1)}},
	{"ops of a kind unknown", []step{these(store.Op{Kind: 200}, store.Op{}), take(0, false, 1)}},
}

func (k kit) scenarios(t *testing.T) {
	s := k.h.Open(t)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			check(t, s, k.key(t, "k"), sc.steps)
		})
	}
}
