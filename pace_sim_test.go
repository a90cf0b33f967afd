package retryhttp

import (
	"container/heap"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLaneAgainstABucket runs the pacing policy against a provider that is
// a token bucket (100/s, burst 10), in virtual time, with callers that each
// make calls back to back, in the dialects providers speak. A caller that
// gets a 429 retries after the larger of its backoff (400 ms, then
// doubling), the ask and the hold, then takes a slot (a retry goes first).
// It is the model of bench/'s goodput run without the network, and it chose
// the policy's constants; bench/ measures the real thing (RESULTS.md).
//
// Issue 16's targets are at most 1.2 requests per success, a success rate
// of at least 0.9 of the provider's (0.85 for a bare 429), and a p99 of at
// most 2 × callers / rate (+ the answers' latency). The model meets them
// where the provider says its rate or its next slot exactly. Where it says
// whole seconds only, the calls its first burst refuses may not come back
// before a second (the seed rule), and then share its rate: the last of the
// 54 goes about 1.5 s after it began, so the p99 cannot be 1.28 s. The
// bounds below are the model's numbers with a little room: they catch a
// policy that got worse.
func TestLaneAgainstABucket(t *testing.T) {
	for _, tc := range []struct {
		dialect     string
		callers     int
		latency     time.Duration
		ask, counts bool
		askRes      time.Duration
		maxP99      time.Duration
	}{
		{"openai: retry-after-ms and counts", 64, 0, true, true, time.Millisecond, 1280 * time.Millisecond},
		// Answers that take 800 ms carry counts as old: a reset read as
		// new held every call for the bucket's refill, again and again
		// (issue 16: goodput 0.73 in bench/ before resets ran from the send).
		{"openai, answers in 800 ms, 128 callers", 128, 800 * time.Millisecond, true, true, time.Millisecond, 3360 * time.Millisecond},
		{"gemini: exact retryDelay in the body", 64, 0, true, false, 0, 1600 * time.Millisecond},
		{"retry-after in whole seconds", 64, 0, true, false, time.Second, 2300 * time.Millisecond},
		{"bare 429", 64, 0, false, false, 0, 1600 * time.Millisecond},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			sim := newSim(100, 10, tc.callers)
			sim.ask, sim.counts, sim.askRes, sim.latency = tc.ask, tc.counts, tc.askRes, tc.latency
			ok, requests, wall := sim.run(1000)
			// The most the provider's rate allows in wall, less the last
			// answer's latency.
			ideal := 100*(wall-tc.latency).Seconds() + 10
			goodput, perOK := float64(ok)/ideal, float64(requests)/float64(ok)
			t.Logf("%s: %d ok, %.3f requests per success, goodput %.3f, wall %s, p99 %s", tc.dialect, ok, perOK, goodput, wall, sim.p99())
			assert.Equal(t, 1000, ok)
			assert.LessOrEqual(t, perOK, 1.15)
			assert.GreaterOrEqual(t, goodput, 0.9)
			assert.LessOrEqual(t, sim.p99(), tc.maxP99)
		})
	}
}

// sim is a virtual-time model of callers, one lane and a token bucket.
type sim struct {
	rate, burst   float64
	callers       int
	ask, counts   bool
	askRes        time.Duration
	latency       time.Duration // before a success is heard; a 429 is heard at once
	tokens        float64
	last, start   time.Time
	l             lane
	events        simEvents
	requests, oks int
	started       int
	lat           []time.Duration
}

func newSim(rate, burst float64, callers int) *sim {
	return &sim{rate: rate, burst: burst, callers: callers, tokens: burst, last: epoch, start: epoch}
}

type simEvent struct {
	at    time.Time
	try   int
	sends bool      // a send at at; else a caller asking for a slot at at
	slot  time.Time // when the send's slot was given; zero when not paced
	tk    ticket
	began time.Time // when the call began
	// answered: the answer h to a send, heard at at.
	answered bool
	h        heard
}

type simEvents []simEvent

func (e simEvents) Len() int           { return len(e) }
func (e simEvents) Less(i, j int) bool { return e[i].at.Before(e[j].at) }
func (e simEvents) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *simEvents) Push(x any)        { *e = append(*e, x.(simEvent)) }
func (e *simEvents) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// run makes n calls and returns the successes, the requests the provider
// saw and the wall time.
func (s *sim) run(n int) (ok, requests int, wall time.Duration) {
	end := s.start
	for range min(s.callers, n) {
		s.started++
		heap.Push(&s.events, simEvent{at: s.start, try: 1, sends: true, began: s.start}) // free flow: nothing is watched yet
	}
	for s.events.Len() > 0 {
		ev := heap.Pop(&s.events).(simEvent)
		now := ev.at
		switch {
		case ev.answered:
			if s.hear(now, ev, n) {
				end = now
			}
		case !ev.sends:
			w := s.l.wait(now, ev.try > 1)
			var tk ticket
			s.l, tk = s.l.take(now, w, ev.try > 1)
			heap.Push(&s.events, simEvent{at: now.Add(w), try: ev.try, sends: true, slot: now, tk: tk, began: ev.began})
		default:
			s.send(now, ev)
		}
	}
	return s.oks, s.requests, end.Sub(s.start)
}

// send is a try at now, once its slot has come (held or pushed since it
// was given, it waits on, as the transport looks again); its answer is
// heard after the latency, a 429 at once.
func (s *sim) send(now time.Time, ev simEvent) {
	if !ev.slot.IsZero() {
		var more time.Duration
		more, ev.tk = s.l.pushed(ev.tk)
		if at := later(s.l.until, now.Add(more)); at.After(now) {
			ev.at = at
			heap.Push(&s.events, ev)
			return
		}
	}
	s.requests++
	ev.h = s.answer(now)
	ev.h.slotted = ev.slot
	if !ev.slot.IsZero() {
		ev.h.sent = now
	}
	ev.answered = true
	if ev.h.ok {
		ev.at = now.Add(s.latency)
	}
	heap.Push(&s.events, ev)
}

// hear is a caller hearing its answer at now: a success begins its next
// call (of n), a 429 its retry. It reports a success.
func (s *sim) hear(now time.Time, ev simEvent, n int) bool {
	h := ev.h
	watched := s.l.interval > 0 || s.l.until.After(now)
	if watched || h.limited {
		s.l = s.l.hear(now, h)
	}
	if h.ok {
		s.oks++
		s.lat = append(s.lat, now.Sub(ev.began))
		if s.started < n {
			s.started++
			heap.Push(&s.events, s.ask1(now, 1, now))
		}
		return true
	}
	wait := time.Duration(float64(400*time.Millisecond) * math.Pow(2, float64(ev.try-1)))
	if h.hasAsk {
		wait = max(wait, h.ask)
	}
	wait = max(wait, s.l.until.Sub(now))
	heap.Push(&s.events, s.ask1(now.Add(wait), ev.try+1, ev.began))
	return false
}

// ask1 is a caller asking for a slot at t, or sending at once in free flow.
func (s *sim) ask1(t time.Time, try int, began time.Time) simEvent {
	if s.l.interval > 0 || s.l.until.After(t) {
		return simEvent{at: t, try: try, began: began}
	}
	return simEvent{at: t, try: try, sends: true, began: began}
}

// p99 is the 99th percentile of the successful calls' latency.
func (s *sim) p99() time.Duration {
	l := append([]time.Duration(nil), s.lat...)
	slices.Sort(l)
	return l[int(math.Ceil(0.99*float64(len(l))))-1]
}

// answer is the bucket's answer to a request at now, in the sim's dialect.
func (s *sim) answer(now time.Time) heard {
	if now.After(s.last) {
		s.tokens = min(s.burst, s.tokens+now.Sub(s.last).Seconds()*s.rate)
		s.last = now
	}
	var h heard
	next := time.Duration(0)
	if s.tokens >= 1 {
		s.tokens--
		h.ok = true
	} else {
		next = time.Duration(math.Ceil((1 - s.tokens) / s.rate * 1e9))
		h.limited = true
		if s.ask {
			h.hasAsk, h.askRes = true, s.askRes
			h.ask = next
			if s.askRes > 0 {
				h.ask = (next + s.askRes - 1) / s.askRes * s.askRes
			}
		}
	}
	if s.counts {
		window := time.Duration(math.Ceil((s.burst-s.tokens)/s.rate*1e3)) * time.Millisecond
		h.counts = counts{limit: int64(s.burst), remaining: int64(math.Floor(s.tokens)), window: window, res: time.Millisecond, ok: true}
		if h.counts.remaining == 0 {
			h.reset, h.resetRes, h.hasReset = window, time.Millisecond, true
		}
	}
	return h
}

func TestSimIsDeterministic(t *testing.T) {
	a1, b1, c1 := newSim(100, 10, 64).run(200)
	a2, b2, c2 := newSim(100, 10, 64).run(200)
	require.Equal(t, []any{a1, b1, c1}, []any{a2, b2, c2})
}
