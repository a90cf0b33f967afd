package store

import (
	"math"
	"strings"
	"time"
)

// A Result is what an Apply's ops did, beside the Record they left.
type Result struct {
	// The last Take: Wait is its wait (when Took, the send's; else the one that
	// did not fit, or what is left of a refusing hold). Refused: a
	// refusing hold was in the way. Unavailable: the key's circuit is
	// open, or its probe is out. Probe: the take is the circuit's probe.
	Wait        time.Duration
	Took        bool
	Refused     bool
	Unavailable bool
	Probe       bool
	// Stale: a Rates op named an older Version and was left out.
	Stale bool
	// Publish: the ops held a lane longer, limited one, paced one for the
	// first time (its first rates), moved sends waiting back (a take of a
	// higher Priority let in before them, R27), or opened or closed the
	// circuit: news every other process must hear (Listen).
	Publish bool
}

// Apply applies ops to r at now, in order, as one step: the reference
// semantics every Store has, whatever it keeps r in (R24). It is a pure
// function: the same Record, now and ops give the same Record and
// Result, on any machine. now is read to the microsecond, and every time
// and span it writes is whole microseconds (so that a Store with Lua's
// numbers, as retryredis's, computes the same to the bit).
//
// A Record that is not Valid at now is read as the zero Record: with ops,
// they apply to it; with none (a read), r becomes the zero Record all the
// same, and a Store need not write it back (the next Apply with ops
// overwrites the junk). Otherwise a read changes nothing. With ops, Seq
// becomes the larger of Seq+1 and now in µs, and each op does what its
// kind says:
//
//   - OpTake gives a send its slot: its wait is the latest, over every lane
//     it costs something on, of the lane's hold (Until) and, on a paced lane
//     (Per > 0), the time its bucket covers the send's charge (Lane.Charge):
//     Next + min(charge, Burst) − Burst. A take of a level above the
//     lowest (Op.Level: a retry, a higher Priority) goes before the sends
//     waiting of lower levels: its slot is the first of the schedule's grid
//     after now and after the tail of its level (Tails), and the sends of
//     lower levels waiting go one charge later each (their Pushes grow by
//     it); the tenth take in a row that jumps the sends of a lower
//     Priority takes the slot after the first of them instead (Jumps, and
//     that first's slot is Fixed: R27's floor). A refusing hold in the way
//     refuses the take (Refused); a wait of Within or more is not taken;
//     else Next, and the tails of the take's level and below, move past
//     its slot by its charge on each paced lane (Took). With Circuit set,
//     an open circuit refuses it
//     first (Unavailable), and once its Open time has passed the first take
//     is the probe (Probe), which holds the key half-open until its answer,
//     or ProbeLease past its slot.
//   - OpHold moves the lane's hold on to now+For, forward only; the sends
//     already waiting past the old hold move on by what it grew (Next, the
//     tails and Fixed past it, Shift and Moved grow by it). Refuse marks it
//     refusing.
//   - OpCorrect places the bucket where the provider's count says: full at
//     now+For. With a zero Mark (a send that was not paced) it only moves
//     Next later; else Next moves by full − (Mark + what Moved grew since
//     the op's Moved), either way, and no tail stays past it.
//   - OpUntake gives Charge back (Next, and a tail at Mark, move back by
//     it) when Next is still Mark: no slot was given after the one given
//     back.
//   - OpRates sets the lane's Per, Burst and Rates when its Version is the
//     op's, and increments Version; else it sets Stale. A Per that differs
//     by more than 5% from Scaled rescales the waiting sends' schedule (the
//     time from now to Next, to each tail and to Fixed, by Per/Scaled) and
//     becomes Scaled.
//   - OpLimited sets the lane's Limited to now.
//   - OpFail counts a failure in the circuit's row (the row's first failure
//     names From; another From sets Many; a row whose last failure is
//     KeepFor old starts again). The row opens the circuit, for Open from
//     now, when it reaches Failures and holds Many or the op is Solo. A
//     failed probe opens it again at once. A row that starts, and a
//     circuit that opens, are published.
//   - OpAlive is a sign of life: the row ends, and an open circuit closes.
//   - OpProbeEnd lets the next take probe: the probe's call ended with no
//     answer.
//
// Values out of range: a cost, Per, Burst or Charge that is NaN, infinite
// or negative counts 0; Per is at most MaxPer, Burst and Charge at most
// MaxAhead; For and Moved are clamped to ±MaxAhead and Open to (0,
// MaxAhead]; a Lane past MaxLanes, a Rates longer than MaxRates, or a
// kind Apply does not know leaves the op out.
func Apply(r *Record, now time.Time, ops []Op) Result {
	now = now.Truncate(time.Microsecond)
	if !r.Valid(now) {
		*r = Record{}
	}
	var res Result
	if len(ops) == 0 {
		return res
	}
	r.Seq = max(r.Seq+1, uint64(max(now.UnixMicro(), 0)))
	for i := range ops {
		r.apply(now, &ops[i], &res)
	}
	return res
}

func (r *Record) apply(now time.Time, op *Op, res *Result) {
	switch op.Kind {
	case OpTake:
		r.take(now, op, res)
		return
	case OpFail:
		res.Publish = r.Circuit.fail(now, op) || res.Publish
		return
	case OpAlive:
		res.Publish = r.Circuit.alive() || res.Publish
		return
	case OpProbeEnd:
		r.Circuit.Probe = time.Time{}
		return
	case OpUntake:
		if int(op.Lane) < len(r.Lanes) {
			r.Lanes[op.Lane].untake(markOf(op.Mark), math.Min(finite(op.Charge), float64(MaxAhead)))
		}
		return
	case OpHold, OpCorrect, OpLimited:
	case OpRates:
		if len(op.Rates) > MaxRates {
			return
		}
	default:
		return
	}
	s := r.lane(op.Lane)
	if s == nil {
		return
	}
	switch op.Kind {
	case OpHold:
		res.Publish = s.holdTo(now, now.Add(span(op.For)), op.Refuse) || res.Publish
	case OpCorrect:
		s.correct(now, now.Add(span(op.For)), markOf(op.Mark), span(op.Moved))
	case OpRates:
		if s.Version != op.Version {
			res.Stale = true
			return
		}
		per := math.Min(finite(op.Per), float64(MaxPer))
		res.Publish = res.Publish || s.Per <= 0 && per > 0 // the lane paced at last: every process watches it
		// A copy of the op's Rates: the Record keeps it, and the ops stay
		// the caller's (a take's costs on its stack, R16).
		s.setRates(now, per, math.Min(finite(op.Burst), float64(MaxAhead)), strings.Clone(op.Rates))
	case OpLimited:
		s.Limited = now
		res.Publish = true
	}
}

// take is OpTake (see Apply).
func (r *Record) take(now time.Time, op *Op, res *Result) {
	res.Wait, res.Took, res.Refused, res.Unavailable, res.Probe = 0, false, false, false, false
	probe := false
	if op.Circuit && r.Circuit.IsOpen() {
		if now.Before(r.Circuit.Open) || !r.Circuit.Probe.IsZero() && now.Before(r.Circuit.Probe) {
			res.Unavailable = true
			return
		}
		probe = true
	}
	level := op.Level()
	n := min(len(op.Costs), len(r.Lanes))
	at := now
	for l := range n {
		s, cost := &r.Lanes[l], finite(op.Costs[l])
		if cost <= 0 {
			continue
		}
		if s.Refuse && s.Until.After(now) {
			res.Wait, res.Refused = s.Until.Sub(now), true
			return
		}
		at = later(at, s.Until)
		if s.Per > 0 {
			slot, _ := s.slot(now, s.Charge(cost), level)
			at = later(at, slot)
		}
	}
	res.Wait = at.Sub(now)
	if res.Wait > 0 && res.Wait >= op.Within {
		return
	}
	for l := range n {
		s, cost := &r.Lanes[l], finite(op.Costs[l])
		if cost > 0 && s.Per > 0 && s.book(now, at, s.Charge(cost), level) {
			res.Publish = true // sends waiting moved back, in every process
		}
	}
	res.Took = true
	if probe {
		// The lease runs from the probe's slot, not its take: a probe
		// held 120 s by a Retry-After is still out at 30 s.
		r.Circuit.Probe, res.Probe = fit(now, at.Add(ProbeLease)), true
	}
}

// tail is the end of the schedule of the sends of level l and above: a
// send of level l takes the first slot after it.
func (s *Lane) tail(l int) time.Time {
	if l <= 0 {
		return s.Next
	}
	return s.Tails[min(l, NumLevels-1)-1]
}

// Tail is the end of the schedule of the sends of level l and above (Next
// for the lowest): a send whose level's tail is before Next went before
// sends of lower levels waiting (R27).
func (s Lane) Tail(l int) time.Time { return s.tail(l) }

// Pushed is how far the sends of level l were moved by sends of higher
// levels let in before them: 0 for the highest level, which none is.
func (s Lane) Pushed(l int) time.Duration {
	if l < 0 || l >= NumLevels-1 {
		return 0
	}
	return s.Pushes[l]
}

// ready is when the lane's bucket covers a charge (ns) asked at now, for a
// send of level l: at once while the bucket holds it; a charge larger than
// the whole bucket goes when the bucket is full, never never (R23). A send
// of a level above the lowest goes before the sends waiting of lower
// levels: its slot is the first of the schedule's grid (the sends waiting,
// one charge apart, back from Next) at or after now and after the sends of
// its level and above (tail), and the sends of lower levels go a charge
// later each, so the lane keeps its rate and the provider sees no two
// sends closer than it. A slot due at now exactly is its send's, going
// now: a send that jumps takes the next.
func (s *Lane) ready(now time.Time, charge float64, level int) time.Time {
	r := s.Next.Add(us(math.Min(charge, s.Burst) - s.Burst))
	if level == 0 || !r.After(now) {
		return r
	}
	return earlier(r, later(s.gridHead(now, charge), s.tail(level)))
}

// gridHead is the first slot of the schedule's grid at or after now.
func (s *Lane) gridHead(now time.Time, charge float64) time.Time {
	if ahead := float64(s.Next.Sub(now)); charge > 0 && ahead > 0 {
		return s.Next.Add(us(-(math.Ceil(ahead/charge) - 1) * charge))
	}
	return now
}

// slot is where a send of level l, charged charge, goes: ready's slot, or,
// when it would be the tenth in a row to jump the sends of a lower
// priority waiting, the slot after their first (R27's floor: at least one
// slot in ten goes to them). fixed reports the latter.
func (s *Lane) slot(now time.Time, charge float64, level int) (at time.Time, fixed bool) {
	at = s.ready(now, charge, level)
	if _, ok := s.lowerHead(now, at, level); ok && s.Jumps >= floorJumps {
		return at.Add(us(charge)), true
	}
	return at, false
}

// floorJumps is how many slots in a row the sends of a higher priority
// take ahead of a lower one's waiting before its first goes (R27).
const floorJumps = 9

// lowerHead is the level of the first send waiting behind a slot at at of
// a send of level l whose priority is lower than l's: ok is false when
// none waits, or when the first waiting is of l's own priority (a retry
// before its first tries is no jump over a lower priority).
func (s *Lane) lowerHead(now, at time.Time, l int) (level int, ok bool) {
	if l == 0 || !s.Next.After(at) {
		return 0, false
	}
	for h := l - 1; h >= 0; h-- {
		if s.tail(h).After(later(s.tail(h+1), now)) {
			return h, priorityOf(h) < priorityOf(l)
		}
	}
	return 0, false
}

// book gives a send of level l its slot at at on the lane: the sends of
// lower levels waiting behind it go one charge later (their Pushes grow by
// it), and the tails of its level and below grow past it. A send that
// jumps a lower priority counts toward the floor (Jumps), and the tenth
// (slot's fixed) keeps the first of them its slot; jumped reports such a
// jump.
func (s *Lane) book(now, at time.Time, charge float64, l int) (jumped bool) {
	h, jumped := s.lowerHead(now, at, l)
	if jumped {
		if !s.tail(l).After(now) {
			s.Jumps = 0 // the sends of l's level and above had all gone: the lower ones were going
		}
		if s.Jumps >= floorJumps {
			s.Fixed, s.FixedLevel, s.FixedPushed, s.Jumps = fit(now, at.Add(us(-charge))), h, s.Pushes[h], 0
		} else {
			s.Jumps++
		}
	}
	if s.Next.After(at) {
		for h := range min(l, NumLevels-1) {
			s.Pushes[h] = clampSpan(s.Pushes[h] + us(charge)) // the sends waiting of lower levels go one charge later
		}
	}
	for h := l; h > 0; h-- {
		s.Tails[h-1] = fit(now, later(s.Tails[h-1], at).Add(us(charge)))
	}
	s.Next = fit(now, later(s.Next, at).Add(us(charge)))
	return jumped
}

// holdTo is OpHold: the hold on to u, forward only (R17), the sends
// waiting past the old hold moved on by what it grew, in their order and
// spacing (left in place, they would all go the instant it ends: a burst
// the provider answers with 429s). It reports whether the hold grew.
func (s *Lane) holdTo(now, u time.Time, refuse bool) bool {
	from := later(s.Until, now)
	if !u.After(from) {
		return false
	}
	if s.Next.After(from) {
		d := u.Sub(from)
		s.Next = fit(now, s.Next.Add(d))
		s.Shift = clampSpan(s.Shift + d)
		s.Moved = clampSpan(s.Moved + d)
		s.moveWaiting(now, from, func(time.Time) time.Duration { return d })
	}
	s.Refuse = refuse || s.Refuse && s.Until.After(now)
	s.Until = u
	return true
}

// correct is OpCorrect: the provider's count is the truth, estimates fill
// in between answers (R23). The sends already waiting keep their slots: a
// count is rounded down to a whole unit, and moving them on by every
// rounding moved the queue later and later.
func (s *Lane) correct(now, full, mark time.Time, movedAt time.Duration) {
	if mark.IsZero() {
		if full.After(s.Next) {
			if !s.Next.IsZero() { // a Next never set moves no mark
				s.Moved = clampSpan(s.Moved + sub(full, s.Next))
			}
			s.Next = full
		}
		return
	}
	if s.Next.IsZero() {
		return // no take gave a mark on this lane
	}
	d := sub(full, mark.Add(clampSpan(s.Moved-movedAt)))
	s.Next = fit(now, s.Next.Add(d))
	s.Moved = clampSpan(s.Moved + d)
	for i := range s.Tails {
		s.Tails[i] = earlier(s.Tails[i], s.Next) // no level's schedule ends past the whole
	}
}

// moveWaiting moves the tails of the levels and the fixed head's slot
// that are after from by what by says of each: a hold or a rescale moves
// every send waiting, of every level.
func (s *Lane) moveWaiting(now, from time.Time, by func(t time.Time) time.Duration) {
	for i, t := range s.Tails {
		if t.After(from) {
			s.Tails[i] = fit(now, t.Add(by(t)))
		}
	}
	if s.Fixed.After(from) {
		s.Fixed = fit(now, s.Fixed.Add(by(s.Fixed)))
	}
}

// setRates is OpRates. A rate that changes by more than rescaleBy while
// sends wait scales their schedule by as much, both ways: paced at the old
// rate, a queue would go on emptying the provider's bucket after a cut, or
// leave it idle after a growth.
func (s *Lane) setRates(now time.Time, per, burst float64, rates string) {
	switch {
	case s.Scaled <= 0 || per <= 0:
		s.Scaled = per
	case per > s.Scaled*rescaleBy || per < s.Scaled/rescaleBy:
		if s.Next.After(now) {
			scale := per/s.Scaled - 1
			d := us(float64(s.Next.Sub(now)) * scale)
			s.Next = fit(now, s.Next.Add(d))
			s.Moved = clampSpan(s.Moved + d)
			s.moveWaiting(now, now, func(t time.Time) time.Duration { return us(float64(t.Sub(now)) * scale) })
		}
		s.Scaled = per
	}
	s.Per, s.Burst, s.Rates = per, burst, rates
	s.Version++
}

// rescaleBy is how much a lane's rate changes before its schedule is
// scaled to it: less is noise (a provider's word moves by a percent with
// each count).
const rescaleBy = 1.05

// untake is OpUntake: a hole before other sends' slots is simply a send
// less. The charge is the one the send was given: the rate may have
// changed since.
func (s *Lane) untake(mark time.Time, charge float64) {
	if mark.IsZero() || !s.Next.Equal(mark) {
		return
	}
	for i, t := range s.Tails {
		if t.Equal(mark) {
			s.Tails[i] = t.Add(us(-charge))
		}
	}
	s.Next = s.Next.Add(us(-charge))
}

// us rounds ns nanoseconds (a float) to whole microseconds, as a
// Duration, saturating at MaxAhead either way (every span Apply computes
// is within it; the bound keeps Lua's numbers exact); NaN is 0.
func us(ns float64) time.Duration {
	const top = float64(MaxAhead)
	switch {
	case ns != ns:
		return 0
	case ns >= top:
		return MaxAhead
	case ns <= -top:
		return -MaxAhead
	}
	return time.Duration(math.Floor(ns/1e3+0.5)) * time.Microsecond
}

// fit keeps a schedule's time t within MaxAhead of now, so that the
// Record stays Valid: a send never waits that long (a Transport's longest
// wait is shorter), so a later slot says nothing more.
func fit(now, t time.Time) time.Time {
	return earlier(t, now.Add(MaxAhead))
}

// markOf is an Op's Mark, to the µs; a time before the Unix epoch, or
// past the largest a Record holds, is the zero Time (a mark no take gave).
func markOf(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	if v := t.UnixMicro(); v <= 0 || v >= maxInt {
		return time.Time{}
	}
	return t.Truncate(time.Microsecond)
}

// sub is a - b, saturating at ±maxSpan (whole µs, as a and b are).
func sub(a, b time.Time) time.Duration { return clampSpan(a.Sub(b)) }

// clampSpan bounds a Lane's span to ±maxSpan, so that one never overflows
// (a Record with a span past it is not Valid).
func clampSpan(d time.Duration) time.Duration { return min(max(d, -maxSpan), maxSpan) }

// span is an Op's duration d, clamped to ±MaxAhead and rounded to µs.
func span(d time.Duration) time.Duration { return us(float64(d)) }
