package pace

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/retryhttp/retryhttp/internal/signal"
)

// Rates is what the policy knows of one lane's rate. Its times per unit
// are in nanoseconds (a token's can be far below one); 0 means "not known".
type Rates struct {
	// Stated is the time a unit takes to refill as the provider states it
	// in its counts, read at a resolution fine enough to trust and paced
	// ExactSlack under it. Slowdown (>= 1) slows it for the 429s the counts
	// do not explain (a provider whose counts claimed 100/s while it
	// admitted 10/s).
	Stated, Slowdown float64
	// CoarseBound is the longest time per unit that coarse counts (a reset
	// in whole seconds) allow: the rate is at least 1/CoarseBound.
	CoarseBound float64
	// Learned is the time per unit learned from 429s.
	Learned  float64
	Limit    float64 // the units the provider's bucket holds, from its counts
	MeanCost float64 // the mean cost of the lane's sends, in units
	// Ramping: the learned rate grows fast (as TCP's slow start does) until
	// its first cut. Regrowing: it grows fast again, the provider not having
	// limited the lane for IdleAfter.
	Ramping, Regrowing bool
	// Generation counts the rate's changes: a 429 to a send slotted at an
	// older generation says nothing of the rate now.
	Generation uint32
}

// The policy's constants. They are a policy a human can read in a diff,
// chosen with the goodput benchmark (bench/, RESULTS.md) and the simulator
// (the root's pace_test.go, TestSimRequests and TestSimTokens).
const (
	// FirstInterval paces a lane limited by a provider that says nothing
	// of its rate: 200 sends a second (of the cost of the send that was
	// refused, on a token lane), from which ramp grows it and the first
	// 429s halve it: a guess too fast costs a few 429s, one too slow a
	// queue of calls slotted at it.
	FirstInterval = 5 * time.Millisecond
	// FirstTokenInterval is the same guess for a token lane, per send of
	// the refused send's cost: 50 such sends a second. 200 (the request
	// lane's) cost a storm of 429s while the first cuts found the rate;
	// a slower one found it back late when the refused send was a small
	// one (TestSimTokens, six runs of three draws: at 50 a second 1.04
	// to 1.20 requests a success and 0.88 to 0.99 of the limit, at 33
	// 1.02 to 1.18 and 0.82 to 0.99, at 25 0.81 at worst).
	FirstTokenInterval = 20 * time.Millisecond
	// MinInterval bounds the rate a lane may grow to: 10,000 sends a
	// second (of its mean cost, on a token lane).
	MinInterval = 100 * time.Microsecond
	// MaxLearned bounds how slow a learned rate may get: a send a second
	// (of its mean cost). Without it, the 429s of a ten-minute outage cut
	// the rate 43 times, to one send per 10.8 s, and it took hours to grow
	// back once the provider took everything again.
	MaxLearned = time.Second
	// MaxWindow bounds what counts can make of a rate: the whole limit
	// refilled within a minute, as providers' per-minute limits (RPM,
	// TPM) are. One answer saying "2 a 999999h" paced a key one send per
	// 116 years; a limit that truly refills slower is held by
	// its resets and 429s instead.
	MaxWindow = time.Minute
	// MaxHold bounds a hold: a provider's ask or reset past it holds the
	// lane that long, and refuses it meanwhile (calls fail at once, sending
	// nothing) rather than sleeping it out: one Retry-After: 1000000000
	// held every call of every Transport for 31.7 years. It is
	// DefaultMaxWait, the longest wait a Transport takes by default.
	MaxHold = 5 * time.Minute
	// RampGrow and SteadyGrow are what one success takes off a learned
	// interval: 2% while ramping, 0.05% after the first cut. A ramp of
	// 20% a success grew 18-fold on the burst a provider's bucket gives
	// after a wait, and took 18 cuts and as many 429s to come down.
	RampGrow   = 0.98
	SteadyGrow = 0.9995
	// CutBy is what a 429 multiplies a learned interval by (the rate goes
	// down by 15%); while ramping, the rate halves (RampCut), as TCP's slow
	// start does: a ramp overshoots by more. Only a 429 to a send slotted
	// at the current rate cuts: the others were paced at the old one.
	CutBy    = 1 / 0.85
	RampCut  = 2
	CutPause = 4 // a cut pauses the lane this many sends (of its mean cost; at most this many seconds)
	// GrowSpan: a success grows the rate when its send was paced at most
	// this much slower than the rate now (grow).
	GrowSpan = 1.1
	// IdleAfter: a lane whose provider has not limited it for this long
	// ramps again, and a key none of whose lanes has anything left to say
	// goes: it flows freely again.
	IdleAfter = 5 * time.Second
	// ExactSlack paces a provider's own rate 2% under it: sends do not
	// leave in perfect step, and a bucket kept near empty by a client at
	// its exact rate answers every early one with a 429.
	ExactSlack = 1.02
	// ExactRes: counts whose window is at least this many resolutions long
	// are trusted as the rate; a coarser window only bounds it.
	ExactRes = 8
	// StatedDecay lets the slowest recent word of the provider down a little
	// with each answer (hearCounts).
	StatedDecay = 0.99
)

// Per is the lane's time per unit, in ns: 0 when it is not paced.
func (r Rates) Per() float64 {
	switch {
	case r.Stated > 0:
		return r.Stated * math.Max(r.Slowdown, 1)
	case r.Learned > 0 && r.CoarseBound > 0:
		return math.Min(r.Learned, r.CoarseBound)
	}
	return r.Learned
}

// Burst is what the lane's bucket holds, in ns of refill: the provider's
// limit when its counts state one, else 0 (one send after the other).
func (r Rates) Burst() float64 {
	if !r.ModelsBucket() {
		return 0
	}
	return r.Limit * r.Per()
}

// ModelsBucket reports whether the lane is modelled as the provider's bucket: it
// states its limit and its rate at a fine resolution, and its counts
// explain its 429s (a word slowed by 429s they do not explain is not
// trusted for where the bucket is either: a provider admitted 10
// a second while its counts said 99 of 100 were left).
func (r Rates) ModelsBucket() bool {
	return r.Limit > 0 && r.Stated > 0 && r.Slowdown <= 1
}

// Unit is the mean cost of the lane's sends, at least 1: the bounds of a
// rate are in sends, and a token lane's sends cost many units.
func (r Rates) Unit() float64 {
	return math.Max(r.MeanCost, 1)
}

// News is what one answer says of one lane.
type News struct {
	Counts signal.Counts // the provider's count of the lane on this answer
	// Hit: the answer is a 429 (or a failed try with an ask) about this
	// lane. Explained: its counts say the lane could not take this send
	// (remaining below its cost).
	Hit, Explained bool
	OK             bool // a success: a learned rate may grow
	// The server's ask on a failed try about this lane (R5, R19), with the
	// resolution of its form; and the reset of the lane exhausted (R18).
	Ask, AskRes     time.Duration
	HasAsk          bool
	Reset, ResetRes time.Duration
	HasReset        bool
	Cost            float64 // the send's units on the lane; 0: it did not count against it
	// Paced: the send was given a slot on the lane, at rate Generation and
	// PacedPer ns a unit.
	Paced      bool
	Generation uint32
	PacedPer   float64
	// Spacing: the lane is paced one send after the other, whatever the
	// provider's limit: the request lane, whose sends all cost one, once
	// the provider has limited it (letting its bucket's burst of 10 go at
	// once cost 429s: 1.10 requests a success against 1.03 spaced, in the
	// goodput run). A request lane whose limit is only stated keeps its
	// bucket (R27).
	Spacing bool
	Queued  bool      // the send waited on the lane behind another at least
	Sent    time.Time // when the send went (the answer's instant when unknown)
}

// Effect is what the policy makes of an answer for one lane: its Rates
// after it, whether they changed, and what the schedule must do.
type Effect struct {
	Rates   Rates // the lane's rates after the answer
	Changed bool  // they differ from before it (its mean cost aside)
	Limited bool  // the provider limited the lane: remembered for IdleAfter
	// Hold: hold the lane until then (zero: no hold), refusing it
	// meanwhile when Refuse.
	Hold   time.Time
	Refuse bool
	Full   time.Time // the provider's bucket is full again then (its count): correct the schedule
}

// Hear applies what an answer at now says of a lane whose Rates are r
// and which the provider last limited quiet ago (R17, R23).
//
//   - The provider's count states the rate: limit − remaining units in the
//     window, trusted when the window is at least ExactRes resolutions long
//     (paced ExactSlack under it), else only a bound (the rate is at least
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
func Hear(r Rates, now time.Time, quiet time.Duration, n News) Effect {
	e := Effect{Rates: r}
	if n.Cost > 0 {
		e.Rates.MeanCost = n.Cost
		if r.MeanCost > 0 {
			e.Rates.MeanCost = 0.9*r.MeanCost + 0.1*n.Cost
		}
	}
	e.hearCounts(n)
	if n.HasAsk && n.Ask > n.AskRes {
		e.holdFor(now, n.Ask)
	}
	switch {
	case n.Hit:
		e.limit(now, n)
	case n.OK && e.Rates.Per() > 0:
		e.grow(quiet, n)
	}
	e.Rates.bound()
	e.Changed = !sameButMean(e.Rates, r)
	from := now // a provider counts a request as it admits it: a count runs from the send
	if !n.Sent.IsZero() && n.Sent.Before(now) {
		from = n.Sent
	}
	level := e.Rates.ModelsBucket()
	switch c := n.Counts; {
	case level && c.OK && c.Limit >= c.Remaining:
		// The count is where the provider's bucket is: full again when
		// what is spent has refilled at the lane's rate (the slack's
		// included, as in the burst); never more than MaxWindow on.
		full := min(DurNs(float64(c.Limit-c.Remaining)*e.Rates.Per()), MaxWindow)
		e.Full = from.Add(max(full, 0))
	case n.HasReset && !level:
		// No bucket to wait in: the reset holds the lane until the limit
		// may be back, a resolution before it.
		e.holdFor(now, from.Add(n.Reset-n.ResetRes).Sub(now))
	}
	return e
}

// hearCounts reads the provider's count of the lane.
func (e *Effect) hearCounts(n News) {
	c := n.Counts
	if !c.OK {
		return
	}
	switch {
	case n.Spacing:
		e.Rates.Limit = 0 // one send after the other: no bucket
	case c.Limit > 0:
		e.Rates.Limit = float64(c.Limit)
	}
	if c.Limit <= c.Remaining || c.Window <= 0 {
		return // a full bucket, or a window of nothing: no rate in it
	}
	iv := float64(c.Window) / float64(c.Limit-c.Remaining)
	iv = math.Min(iv, float64(MaxWindow)/float64(c.Limit))
	switch {
	case c.Res*ExactRes <= c.Window:
		// A count is rounded down to a whole unit, so one answer's rate is
		// at most 1/(limit − remaining) too fast; the slowest of the
		// recent ones is the rate (the others, let down 1% an answer, so
		// that a provider whose rate grows is followed). One at least
		// twice as fast, from two units spent or more, is the provider's
		// rate now: an absurd count is corrected by the next sane one.
		word := iv * ExactSlack
		if e.Rates.Stated == 0 || word*2 < e.Rates.Stated && c.Limit-c.Remaining >= 2 {
			e.Rates.Stated = word
		} else {
			e.Rates.Stated = math.Max(word, e.Rates.Stated*StatedDecay)
		}
	case e.Rates.CoarseBound == 0:
		e.Rates.CoarseBound = iv
	default:
		// Each coarse count bounds the rate from below (its reset is
		// rounded up): the tightest recent bound holds, let up 1% an
		// answer so that a provider that slows is not held to an old one.
		e.Rates.CoarseBound = math.Min(iv, e.Rates.CoarseBound/StatedDecay)
	}
}

// holdFor holds the lane for d from now: at most MaxHold, and refused
// meanwhile when the provider asked for more.
func (e *Effect) holdFor(now time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	refuse := d > MaxHold
	if refuse {
		d = MaxHold
	}
	if u := now.Add(d); u.After(e.Hold) {
		e.Hold, e.Refuse = u, refuse || e.Refuse
	}
}

// pause holds the lane for d from now after a cut: the Cooldown's own
// choice, so it never refuses.
func (e *Effect) pause(now time.Time, d time.Duration) {
	if u := now.Add(d); d > 0 && u.After(e.Hold) {
		e.Hold = u
	}
}

// limit is a 429 about the lane (or a failed try with an ask).
func (e *Effect) limit(now time.Time, n News) {
	r := &e.Rates
	e.Limited = true
	switch {
	case r.Per() == 0:
		// Nothing known: a guess, ramping. A fine ask (retry-after-ms, a
		// body's retryDelay) is the time to the provider's next slot: a
		// better first guess of the rate than none.
		iv := float64(FirstInterval)
		if n.Cost > 1 {
			iv = float64(FirstTokenInterval)
		}
		if n.HasAsk && n.AskRes <= time.Millisecond && n.Ask > 0 {
			iv = math.Min(math.Max(float64(n.Ask), float64(MinInterval)), iv)
		}
		r.Learned, r.Ramping = iv/math.Max(n.Cost, 1), true
		r.Generation++
	case !n.Paced || n.Generation != r.Generation || !n.Queued && !n.Spacing:
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
	case r.Stated > 0 && n.Explained:
		// The provider's own count says its bucket was spent: the
		// schedule's correction from that count is the answer, not a cut.
	default:
		by := CutBy
		if r.Ramping {
			by = RampCut
		}
		if r.Stated > 0 {
			r.Slowdown = math.Max(r.Slowdown, 1) * by
		} else {
			r.Learned = r.Per() * by
		}
		r.Ramping, r.Regrowing = false, false
		r.Generation++
		// The sends slotted at the old rate would go on emptying the
		// provider's bucket: a pause of a few sends lets it refill.
		e.pause(now, DurNs(math.Min(CutPause*r.Per()*r.Unit(), CutPause*float64(MaxLearned))))
	}
}

// grow is a success: a learned rate grows, fast while ramping, and fast
// again once the provider has not limited the lane for IdleAfter, so that
// after an outage the rate is back in a minute, not in hours; a
// slowed word comes back to the provider's. Only a send paced at about the
// current rate says it holds: one slotted at a slower rate before a growth
// says nothing of the new one, and counting it let the rate grow 3-fold in
// the time its first sends took to come back, and a storm of 429s follow.
func (e *Effect) grow(quiet time.Duration, n News) {
	r := &e.Rates
	if !n.Paced || !r.Ramping && n.PacedPer > r.Per()*GrowSpan {
		return // (the first ramp, from a guess, grows on every success: it has a rate to find)
	}
	if quiet >= IdleAfter && !r.Ramping && r.Stated == 0 {
		r.Regrowing = true
	}
	g := SteadyGrow
	if r.Ramping || r.Regrowing {
		g = RampGrow
	}
	if r.Stated > 0 {
		if r.Slowdown > 1 {
			r.Slowdown = math.Max(r.Slowdown*g, 1)
		}
		return
	}
	r.Learned *= g
}

// bound keeps a rate within what any provider's could be: no faster than
// MinInterval a send, no slower than MaxLearned a send when learned, and a
// word no slower than its whole limit in MaxWindow.
func (r *Rates) bound() {
	u := r.Unit()
	if r.Learned > 0 {
		r.Learned = math.Min(math.Max(r.Learned, float64(MinInterval)/u), float64(MaxLearned)/u)
	}
	if r.Stated > 0 {
		r.Stated = math.Max(r.Stated, float64(MinInterval)/u)
	}
	if r.CoarseBound > 0 {
		r.CoarseBound = math.Max(r.CoarseBound, float64(MinInterval)/u)
	}
	if r.Slowdown > 0 {
		r.Slowdown = math.Min(r.Slowdown, float64(MaxLearned)/math.Max(r.Stated*u, 1))
		r.Slowdown = math.Max(r.Slowdown, 1)
	}
}

// sameButMean reports whether a and b differ only in their mean cost, which
// alone is not worth a write to a Store.
func sameButMean(a, b Rates) bool {
	a.MeanCost = b.MeanCost
	return a == b
}

// Encode writes r as the opaque string a Store keeps (store.Lane.Rates).
func (r Rates) Encode() string {
	var b [8*6 + 1 + 4]byte
	for i, f := range [...]float64{r.Stated, r.Slowdown, r.CoarseBound, r.Learned, r.Limit, r.MeanCost} {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
	}
	if r.Ramping {
		b[48] |= 1
	}
	if r.Regrowing {
		b[48] |= 2
	}
	binary.LittleEndian.PutUint32(b[49:], r.Generation)
	return string(b[:])
}

// DecodeRates reads what Encode wrote; anything else (junk at a Store's
// key, R24) is no Rates at all.
func DecodeRates(s string) Rates {
	if len(s) != 8*6+1+4 {
		return Rates{}
	}
	var f [6]float64
	for i := range f {
		f[i] = math.Float64frombits(binary.LittleEndian.Uint64([]byte(s[8*i : 8*i+8])))
		if f[i] != f[i] || f[i] < 0 || math.IsInf(f[i], 0) {
			return Rates{}
		}
	}
	r := Rates{Stated: f[0], Slowdown: f[1], CoarseBound: f[2], Learned: f[3], Limit: f[4], MeanCost: f[5],
		Ramping: s[48]&1 != 0, Regrowing: s[48]&2 != 0, Generation: binary.LittleEndian.Uint32([]byte(s[49:53]))}
	r.bound()
	return r
}
