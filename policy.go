package retryhttp

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/retryhttp/retryhttp/internal/signal"
)

// The pacing policy (R17, R23): what one answer does to the rate of one
// lane. It is a pure function (hearLane) of the lane's rates, what the
// answer says of the lane and when; the in-process Store and every other
// run the same one, in Go, and a Store only keeps its result (R24).
// policy_test.go exhausts it.

// rates is what the policy knows of one lane's rate.
type rates struct {
	// word is the time a unit takes to refill as the provider states it,
	// in ns, read from counts at a resolution fine enough to trust and
	// paced exactSlack under it; slow (>= 1) slows it for the 429s the
	// counts do not explain (issue 21: a provider whose counts claim
	// 100/s while it admits 10/s). 0: no word.
	word, slow float64
	// hi bounds the time per unit from coarse counts (a reset in whole
	// seconds): the rate is at least that. 0: no bound.
	hi float64
	// learned is the time per unit learned from 429s, in ns; 0: none.
	learned float64
	limit   float64 // the units the bucket holds, from counts; 0: unknown
	mean    float64 // the mean cost of the lane's sends, units
	ramp    bool    // the learned rate grows fast (TCP's slow start) until its first cut
	fast    bool    // it grows fast again: the provider has not limited it for quietAfter
	gen     uint32  // the rate's generation: a 429 to a send slotted at an older one says nothing of it
}

// The policy's constants. They are a policy a human can read in a diff,
// chosen with the goodput benchmark (bench/, RESULTS.md) and the simulator
// (pace_sim_test.go).
const (
	// firstInterval paces a lane limited by a provider that says nothing
	// of its rate: 200 sends a second (of the cost of the send that was
	// refused, on a token lane), from which ramp grows it and the first
	// 429s halve it: a guess too fast costs a few 429s, one too slow a
	// queue of calls slotted at it.
	firstInterval = 5 * time.Millisecond
	// firstTokenInterval is the same guess for a token lane, per send of
	// the refused send's cost: 50 such sends a second. 200 (the request
	// lane's) cost a storm of 429s while the first cuts found the rate;
	// a slower one found it back late when the refused send was a small
	// one (pace_sim_test.go, six runs of three draws: at 50 a second 1.04
	// to 1.20 requests a success and 0.88 to 0.99 of the limit, at 33
	// 1.02 to 1.18 and 0.82 to 0.99, at 25 0.81 at worst).
	firstTokenInterval = 20 * time.Millisecond
	// minInterval bounds the rate a lane may grow to: 10,000 sends a
	// second (of its mean cost, on a token lane).
	minInterval = 100 * time.Microsecond
	// maxLearned bounds how slow a learned rate may get: a send a second
	// (of its mean cost). Without it, the 429s of a ten-minute outage cut
	// the rate 43 times, to one send per 10.8 s, and it took hours to grow
	// back once the provider took everything again (issue 21).
	maxLearned = time.Second
	// maxWindow bounds what counts can make of a rate: the whole limit
	// refilled within a minute, as providers' per-minute limits (RPM,
	// TPM) are. One answer saying "2 a 999999h" paced a key one send per
	// 116 years (issue 21); a limit that truly refills slower is held by
	// its resets and 429s instead.
	maxWindow = time.Minute
	// maxHold bounds a hold: a provider's ask or reset past it holds the
	// lane that long, and refuses it meanwhile (calls fail at once, sending
	// nothing) rather than sleeping it out: one Retry-After: 1000000000
	// held every call of every Transport for 31.7 years (issue 21). It is
	// DefaultMaxWait, the longest wait a Transport takes by default.
	maxHold = DefaultMaxWait
	// rampGrow and steadyGrow are what one success takes off a learned
	// interval: 2% while ramping, 0.05% after the first cut. A ramp of
	// 20% a success grew 18-fold on the burst a provider's bucket gives
	// after a wait, and took 18 cuts and as many 429s to come down.
	rampGrow   = 0.98
	steadyGrow = 0.9995
	// cutBy is what a 429 multiplies a learned interval by (the rate goes
	// down by 15%); while ramping, the rate halves (rampCut), as TCP's slow
	// start does: a ramp overshoots by more. Only a 429 to a send slotted
	// at the current rate cuts: the others were paced at the old one.
	cutBy    = 1 / 0.85
	rampCut  = 2
	cutPause = 4 // a cut pauses the lane this many sends (of its mean cost; at most this many seconds)
	// growSpan: a success grows the rate when its send was paced at most
	// this much slower than the rate now (grow).
	growSpan = 1.1
	// quietAfter: a lane whose provider has not limited it for this long
	// ramps again, and a key none of whose lanes has anything left to say
	// goes: it flows freely again.
	quietAfter = 5 * time.Second
	// exactSlack paces a provider's own rate 2% under it: sends do not
	// leave in perfect step, and a bucket kept near empty by a client at
	// its exact rate answers every early one with a 429.
	exactSlack = 1.02
	// exactRes: counts whose window is at least this many resolutions long
	// are trusted as the rate; a coarser window only bounds it.
	exactRes = 8
	// wordDecay lets the slowest recent word of the provider down a little
	// with each answer (hearCounts).
	wordDecay = 0.99
)

// per is the lane's time per unit, in ns: 0 when it is not paced.
func (r rates) per() float64 {
	switch {
	case r.word > 0:
		return r.word * math.Max(r.slow, 1)
	case r.learned > 0 && r.hi > 0:
		return math.Min(r.learned, r.hi)
	}
	return r.learned
}

// burst is what the lane's bucket holds, in ns of refill: the provider's
// limit when its counts state one, else 0 (one send after the other).
func (r rates) burst() float64 {
	if !r.level() {
		return 0
	}
	return r.limit * r.per()
}

// level reports whether the lane is modelled as the provider's bucket: it
// states its limit and its rate at a fine resolution, and its counts
// explain its 429s (a word slowed by 429s they do not explain is not
// trusted for where the bucket is either: issue 21's provider admitted 10
// a second while its counts said 99 of 100 were left).
func (r rates) level() bool {
	return r.limit > 0 && r.word > 0 && r.slow <= 1
}

// unit is the mean cost of the lane's sends, at least 1: the bounds of a
// rate are in sends, and a token lane's sends cost many units.
func (r rates) unit() float64 {
	return math.Max(r.mean, 1)
}

// laneNews is what one answer says of one lane.
type laneNews struct {
	counts signal.Counts // the provider's count of the lane on this answer
	// hit: the answer is a 429 (or a failed try with an ask) that is about
	// this lane (hitLanes); explained: its counts say the lane could not
	// take this send (remaining below its cost).
	hit, explained bool
	ok             bool // a success: a learned rate may grow
	// The server's ask on a failed try about this lane (R5, R19), with the
	// resolution of its form; and the reset of the lane exhausted (R18).
	ask, askRes     time.Duration
	hasAsk          bool
	reset, resetRes time.Duration
	hasReset        bool
	cost            float64 // the send's units on the lane; 0: it did not count
	paced           bool    // the send was given a slot on the lane, at rate generation gen
	gen             uint32  //
	pacedPer        float64 // the time per unit it was paced at, ns
	// spacing: the lane is paced one send after the other, whatever the
	// provider's limit: the request lane, whose sends all cost one (the
	// goodput run: letting its bucket's burst of 10 go at once cost 429s,
	// 1.10 requests a success against 1.03 spaced).
	spacing bool
	// queued: the send waited on the lane behind another at least.
	queued bool
	sent   time.Time // when the send went (the answer's instant when unknown)
}

// laneEffect is what the policy makes of an answer for one lane: its rates
// after it, whether they changed, and what the schedule must do.
type laneEffect struct {
	rates   rates
	changed bool
	limited bool      // the provider limited the lane: remembered for quietAfter
	hold    time.Time // hold the lane until then (zero: no hold); refuse it meanwhile
	refuse  bool
	full    time.Time // the provider's bucket is full again then (its count): correct the schedule
}

// hearLane applies what an answer at now says of a lane whose rates are r
// and which the provider last limited quiet ago (R17, R23).
//
//   - The provider's count states the rate: limit − remaining units in the
//     window, trusted when the window is at least exactRes resolutions long
//     (paced exactSlack under it), else only a bound (the rate is at least
//     that). Its limit is the bucket, and where it is full again (the count
//     is the truth) corrects the schedule.
//   - An ask longer than the resolution of its form holds the lane for all
//     of it (Retry-After: 20 holds every call 20 s); one within it holds
//     only the call that got it (decide). An exhausted reset holds the
//     lane until the limit may be back (a second before a whole-second
//     reset) when the counts state no bucket to wait in; with one, the
//     count sets where the bucket is, and a send waits until it covers its
//     cost.
//   - A limit paces the lane: from a guess when nothing is known; a 429 to
//     a send slotted at the current rate cuts a learned rate, and slows
//     the provider's word when its counts do not explain it.
//   - A success grows a learned rate (and brings a slowed word back).
func hearLane(r rates, now time.Time, quiet time.Duration, n laneNews) laneEffect {
	e := laneEffect{rates: r}
	if n.cost > 0 {
		e.rates.mean = n.cost
		if r.mean > 0 {
			e.rates.mean = 0.9*r.mean + 0.1*n.cost
		}
	}
	e.hearCounts(n)
	if n.hasAsk && n.ask > n.askRes {
		e.holdFor(now, n.ask)
	}
	switch {
	case n.hit:
		e.limit(now, n)
	case n.ok && e.rates.per() > 0:
		e.grow(quiet, n)
	}
	e.rates.bound()
	e.changed = !sameButMean(e.rates, r)
	from := now // a provider counts a request as it admits it: a count runs from the send
	if !n.sent.IsZero() && n.sent.Before(now) {
		from = n.sent
	}
	level := e.rates.level()
	switch c := n.counts; {
	case level && c.OK && c.Limit >= c.Remaining:
		// The count is where the provider's bucket is: full again when
		// what is spent has refilled at the lane's rate (the slack's
		// included, as in the burst); never more than maxWindow on.
		full := min(durNs(float64(c.Limit-c.Remaining)*e.rates.per()), maxWindow)
		e.full = from.Add(max(full, 0))
	case n.hasReset && !level:
		// No bucket to wait in: the reset holds the lane until the limit
		// may be back, a resolution before it.
		e.holdFor(now, from.Add(n.reset-n.resetRes).Sub(now))
	}
	return e
}

// hearCounts reads the provider's count of the lane.
func (e *laneEffect) hearCounts(n laneNews) {
	c := n.counts
	if !c.OK {
		return
	}
	if c.Limit > 0 && !n.spacing {
		e.rates.limit = float64(c.Limit)
	}
	if c.Limit <= c.Remaining || c.Window <= 0 {
		return // a full bucket, or a window of nothing: no rate in it
	}
	iv := float64(c.Window) / float64(c.Limit-c.Remaining)
	iv = math.Min(iv, float64(maxWindow)/float64(c.Limit))
	switch {
	case c.Res*exactRes <= c.Window:
		// A count is rounded down to a whole unit, so one answer's rate is
		// at most 1/(limit − remaining) too fast; the slowest of the
		// recent ones is the rate (the others, let down 1% an answer, so
		// that a provider whose rate grows is followed). One at least
		// twice as fast, from two units spent or more, is the provider's
		// rate now: an absurd count is corrected by the next sane one.
		word := iv * exactSlack
		if e.rates.word == 0 || word*2 < e.rates.word && c.Limit-c.Remaining >= 2 {
			e.rates.word = word
		} else {
			e.rates.word = math.Max(word, e.rates.word*wordDecay)
		}
	case e.rates.hi == 0:
		e.rates.hi = iv
	default:
		// Each coarse count bounds the rate from below (its reset is
		// rounded up): the tightest recent bound holds, let up 1% an
		// answer so that a provider that slows is not held to an old one.
		e.rates.hi = math.Min(iv, e.rates.hi/wordDecay)
	}
}

// holdFor holds the lane for d from now: at most maxHold, and refused
// meanwhile when the provider asked for more.
func (e *laneEffect) holdFor(now time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	refuse := d > maxHold
	if refuse {
		d = maxHold
	}
	if u := now.Add(d); u.After(e.hold) {
		e.hold, e.refuse = u, refuse || e.refuse
	}
}

// pause holds the lane for d from now after a cut: the Cooldown's own
// choice, so it never refuses.
func (e *laneEffect) pause(now time.Time, d time.Duration) {
	if u := now.Add(d); d > 0 && u.After(e.hold) {
		e.hold = u
	}
}

// limit is a 429 about the lane (or a failed try with an ask).
func (e *laneEffect) limit(now time.Time, n laneNews) {
	r := &e.rates
	e.limited = true
	switch {
	case r.per() == 0:
		// Nothing known: a guess, ramping. A fine ask (retry-after-ms, a
		// body's retryDelay) is the time to the provider's next slot: a
		// better first guess of the rate than none.
		iv := float64(firstInterval)
		if n.cost > 1 {
			iv = float64(firstTokenInterval)
		}
		if n.hasAsk && n.askRes <= time.Millisecond && n.ask > 0 {
			iv = math.Min(math.Max(float64(n.ask), float64(minInterval)), iv)
		}
		r.learned, r.ramp = iv/math.Max(n.cost, 1), true
		r.gen++
	case !n.paced || n.gen != r.gen || !n.queued && !n.spacing:
		// Slotted at an older rate, or not paced at all, or, on a token
		// lane, sent at once (the bucket it met was what the sends before
		// the pacing left: the first send after a guess met the start's
		// empty bucket and halved the guess): it says nothing of the
		// current rate. The request lane (spacing) is cut by a 429 to a
		// send that went at once too: its first paced send after the guess
		// is the one whose cut comes before the start's 64 sends take their
		// slots at the guess (waiting for a queued one left them slotted at
		// it, their 429s of an older generation cut nothing, and each cost
		// a whole-second Retry-After: the whole-second dialects' goodput
		// fell from 0.98 to 0.89).
	case r.word > 0 && n.explained:
		// The provider's own count says its bucket was spent: the
		// schedule's correction from that count is the answer, not a cut.
	default:
		by := cutBy
		if r.ramp {
			by = rampCut
		}
		if r.word > 0 {
			r.slow = math.Max(r.slow, 1) * by
		} else {
			r.learned = r.per() * by
		}
		r.ramp, r.fast = false, false
		r.gen++
		// The sends slotted at the old rate would go on emptying the
		// provider's bucket: a pause of a few sends lets it refill.
		e.pause(now, durNs(math.Min(cutPause*r.per()*r.unit(), cutPause*float64(maxLearned))))
	}
}

// grow is a success: a learned rate grows, fast while ramping, and fast
// again once the provider has not limited the lane for quietAfter, so that
// after an outage the rate is back in a minute, not in hours (issue 21); a
// slowed word comes back to the provider's. Only a send paced at about the
// current rate says it holds: one slotted at a slower rate before a growth
// says nothing of the new one, and counting it let the rate grow 3-fold in
// the time its first sends took to come back, and a storm of 429s follow.
func (e *laneEffect) grow(quiet time.Duration, n laneNews) {
	r := &e.rates
	if !n.paced || !r.ramp && n.pacedPer > r.per()*growSpan {
		return // (the first ramp, from a guess, grows on every success: it has a rate to find)
	}
	if quiet >= quietAfter && !r.ramp && r.word == 0 {
		r.fast = true
	}
	g := steadyGrow
	if r.ramp || r.fast {
		g = rampGrow
	}
	if r.word > 0 {
		if r.slow > 1 {
			r.slow = math.Max(r.slow*g, 1)
		}
		return
	}
	r.learned *= g
}

// bound keeps a rate within what any provider's could be: no faster than
// minInterval a send, no slower than maxLearned a send when learned, and a
// word no slower than its whole limit in maxWindow.
func (r *rates) bound() {
	u := r.unit()
	if r.learned > 0 {
		r.learned = math.Min(math.Max(r.learned, float64(minInterval)/u), float64(maxLearned)/u)
	}
	if r.word > 0 {
		r.word = math.Max(r.word, float64(minInterval)/u)
	}
	if r.hi > 0 {
		r.hi = math.Max(r.hi, float64(minInterval)/u)
	}
	if r.slow > 0 {
		r.slow = math.Min(r.slow, float64(maxLearned)/math.Max(r.word*u, 1))
		r.slow = math.Max(r.slow, 1)
	}
}

// sameButMean reports whether a and b differ only in their mean cost, which
// alone is not worth a write to a Store.
func sameButMean(a, b rates) bool {
	a.mean = b.mean
	return a == b
}

// encode writes r as the opaque string a Store keeps (sched.rates).
func (r rates) encode() string {
	var b [8*6 + 1 + 4]byte
	for i, f := range [...]float64{r.word, r.slow, r.hi, r.learned, r.limit, r.mean} {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
	}
	if r.ramp {
		b[48] |= 1
	}
	if r.fast {
		b[48] |= 2
	}
	binary.LittleEndian.PutUint32(b[49:], r.gen)
	return string(b[:])
}

// decodeRates reads what encode wrote; anything else (junk at a Store's
// key, R24) is no rates at all.
func decodeRates(s string) rates {
	if len(s) != 8*6+1+4 {
		return rates{}
	}
	var f [6]float64
	for i := range f {
		f[i] = math.Float64frombits(binary.LittleEndian.Uint64([]byte(s[8*i : 8*i+8])))
		if f[i] != f[i] || f[i] < 0 || math.IsInf(f[i], 0) {
			return rates{}
		}
	}
	r := rates{word: f[0], slow: f[1], hi: f[2], learned: f[3], limit: f[4], mean: f[5],
		ramp: s[48]&1 != 0, fast: s[48]&2 != 0, gen: binary.LittleEndian.Uint32([]byte(s[49:53]))}
	r.bound()
	return r
}
