package store

import (
	"math"
	"strconv"
	"time"
)

// A LaneID names a lane: one limit a provider states on a key (R23). A
// send waits for every lane it counts against.
type LaneID uint8

// The lanes a Cooldown keeps. A Record holds as many as it needs, and
// a Store keeps whatever number it is given (at most MaxLanes): a lane
// missing from a Record is a zero Lane.
const (
	Requests     LaneID = iota // every send costs 1
	Tokens                     // OpenAI's and Azure's x-ratelimit-*-tokens, Anthropic's anthropic-ratelimit-tokens-*
	InputTokens                // anthropic-ratelimit-input-tokens-*: a prompt's tokens
	OutputTokens               // anthropic-ratelimit-output-tokens-*: charged by the output cap
)

var laneNames = [...]string{"requests", "tokens", "input_tokens", "output_tokens"}

// String returns "requests", "tokens", "input_tokens", "output_tokens",
// or "lane(n)" for another.
func (l LaneID) String() string {
	if int(l) < len(laneNames) {
		return laneNames[l]
	}
	return "lane(" + strconv.Itoa(int(l)) + ")"
}

// The bounds of a Record. A Record, or an Op, with a value past them is
// read as the rules say (see Apply and Record.Valid), never trusted: a
// Store is shared with every process that can reach it, and one bad
// write must not shut a key for centuries (R24).
const (
	// MaxLanes is the most lanes a Record holds.
	MaxLanes = 8
	// MaxAhead is how far past the Store's now any time in a Record may
	// be: a hold, a schedule, a circuit's open state. A Record with a time
	// further ahead is junk. It also bounds an Op's durations.
	MaxAhead = time.Hour
	// MaxPer is the longest time one unit of a lane may take to refill:
	// a limit of one a minute.
	MaxPer = time.Minute
	// MaxDebt is the most a send is charged on a lane whose bucket is not
	// known (Burst 0): a minute's refill. On a lane with a bucket, a send
	// is charged at most the whole bucket (Lane.Charge).
	MaxDebt = time.Minute
	// MaxRates is the longest Rates a lane keeps.
	MaxRates = 256
	// KeepFor is how long a Store keeps a key past the latest time in its
	// Record (Record.Expires): a key quiet that long has nothing to say.
	KeepFor = time.Minute
	// MaxKeyLen is the longest key a Store is given: a Cooldown keeps a
	// longer one by its SHA-256 ("sha256:" and 64 hex digits).
	MaxKeyLen = 256
	// ProbeLease is how long a circuit's probe holds the key half-open
	// when its answer never comes (its process died): the next try after
	// it probes again (R25).
	ProbeLease = 30 * time.Second
)

// maxInt is the largest whole number a Record holds (a Seq, a Version,
// a time or a span in µs): 2^53, exact in a float64 and so in Lua's
// numbers, whose arithmetic retryredis's script shares with Apply.
const maxInt = 1 << 53

// maxSpan bounds a Lane's Shift, Pushes and Moved (they grow over a
// key's life): 2^50 µs, 35 years.
const maxSpan = (1 << 50) * time.Microsecond

// A Record is what a Store keeps of one key: its lanes and its circuit,
// and the Seq of the last Apply. Its times are on the Store's clock, in
// whole microseconds. The zero Record is a key with nothing to say.
type Record struct {
	// Seq grows with every Apply that has ops, and is at least the
	// Store's clock in µs (UnixMicro) then, so that a key lost (flushed,
	// expired) and made again still grows past what was given out
	// before. 0: nothing was ever applied.
	Seq     uint64
	Lanes   []Lane // by LaneID; a lane past the end is a zero Lane
	Circuit Circuit
}

// A Lane is one limit of a key (R17, R23): a hold in front of a bucket
// kept as GCRA keeps one (golang.org/x/time/rate's reservations and
// go-redis/redis_rate's script do the same arithmetic), and the rates
// the Cooldown's policy set on it. The zero Lane holds nothing and paces
// nothing.
type Lane struct {
	// Until is the lane's hold: no send that counts against the lane
	// goes before it (a provider's ask or reset, a pause after a cut).
	Until time.Time
	// Refuse: sends that meet the hold fail at once instead of waiting
	// (the provider asked for more than any call waits).
	Refuse bool
	// Next is GCRA's theoretical arrival time: the bucket is full again
	// at Next, counting every send given a slot. A send of charge c may
	// go once the bucket holds c: at Next + min(c, Burst) - Burst.
	Next time.Time
	// Tails orders the sends waiting by level (R27; Op.Level): Tails[l-1]
	// is the end of the schedule of the sends of level l and above, and a
	// send of level l takes the first slot after it (Next is level 0's).
	Tails [NumLevels - 1]time.Time
	// Shift is how far holds have moved on the sends waiting for a slot,
	// and Pushes[l] how far the sends of higher levels let in before them
	// have moved the sends of level l: a send that waits compares them
	// with what they were when it took its slot.
	Shift  time.Duration
	Pushes [NumLevels - 1]time.Duration
	// Moved is how far Next has moved by anything but a take (holds,
	// corrections, rescaling): a correction reads a send's Mark as moved
	// on by what Moved grew since.
	Moved time.Duration
	// Jumps counts the slots given in a row to sends of a higher priority
	// ahead of sends of a lower one waiting. The tenth lets the first of
	// them go first (R27: a lower priority is never starved): its slot is
	// Fixed, it is of level FixedLevel, and the pushes of that level stop
	// for it at FixedPushed.
	Jumps       int
	Fixed       time.Time
	FixedLevel  int
	FixedPushed time.Duration
	// Per is the time one unit takes to refill, in nanoseconds (a token's
	// can be far below one): 0 when the lane is not paced. Burst is what
	// the bucket holds, as a time (GCRA's tau): 0 paces one send after
	// the other. Scaled is the Per the waiting sends' schedule was last
	// scaled to (a rate that changes by more than 5% rescales it).
	Per, Burst, Scaled float64
	// Limited is when the provider last limited the lane.
	Limited time.Time
	// Version counts the Rates ops applied: a Rates op applies only over
	// the Version its rates were computed from.
	Version uint64
	// Rates is the policy's own state of the lane, opaque to a Store.
	Rates string
}

// A Circuit is a key's breaker (R25): a count of failed tries in a row, a
// clock, and one probe. The zero Circuit is closed, with no failure.
type Circuit struct {
	// Failures is the failed tries in a row, with no sign of life between.
	Failures int
	// From is the process (Op.From) whose failure began the row, and Many
	// reports whether another process failed in it too: a shared Store
	// opens the circuit only on the failures of two processes at least,
	// so that one process whose own network fails never refuses the
	// others' calls.
	From uint64
	Many bool
	// Last is when the last failure was heard.
	Last time.Time
	// Open is when the circuit stops refusing and lets one probe go; the
	// zero Time: closed. Since is when it opened (kept while it reopens).
	Open, Since time.Time
	// Probe is when the probe out (granted by a Take) stops holding the
	// key half-open if its answer never comes; the zero Time: none out.
	Probe time.Time
}

// IsOpen reports whether the circuit is open or half-open (waiting for
// its probe's answer).
func (c Circuit) IsOpen() bool { return !c.Open.IsZero() }

// Lane returns the lane id of r, a zero Lane when r has none.
func (r Record) Lane(id LaneID) Lane {
	if int(id) < len(r.Lanes) {
		return r.Lanes[id]
	}
	return Lane{}
}

// lane returns the lane id of r, made (with those before it) when r has
// none; nil past MaxLanes.
func (r *Record) lane(id LaneID) *Lane {
	if int(id) >= MaxLanes {
		return nil
	}
	for int(id) >= len(r.Lanes) {
		r.Lanes = append(r.Lanes, Lane{})
	}
	return &r.Lanes[id]
}

// Clone returns a copy of r that shares nothing with it.
func (r Record) Clone() Record {
	if r.Lanes != nil {
		r.Lanes = append([]Lane(nil), r.Lanes...)
	}
	return r
}

// Charge is what a send of cost units is charged on the lane, as a time
// in nanoseconds: cost × Per, and at most the whole bucket (Burst, or
// MaxDebt when the lane states none): a cost larger than the bucket goes
// when the bucket is full and leaves it empty, never owing more (R23).
// A cost that is not a number of 0 or more counts 0.
func (l Lane) Charge(cost float64) float64 {
	debt := l.Burst
	if debt <= 0 {
		debt = float64(MaxDebt)
	}
	return math.Min(finite(cost)*l.Per, debt)
}

// Expires returns when r has nothing left to say, as of now: KeepFor past
// the latest time in it. A Store may forget the key then (retryredis
// sets it as the key's TTL).
func (r Record) Expires(now time.Time) time.Time {
	latest := now
	for i := range r.Lanes {
		s := &r.Lanes[i]
		latest = later(later(latest, s.Until), later(s.Next, s.Fixed))
		for _, t := range s.Tails {
			latest = later(latest, t)
		}
	}
	c := &r.Circuit
	latest = later(later(latest, c.Open), c.Probe)
	return latest.Add(KeepFor)
}

// Valid reports whether every value of r is in range at now: every time
// between the Unix epoch and MaxAhead past now, whole µs; rates finite,
// Per and Scaled at most MaxPer, Burst at most MaxAhead; Rates at most
// MaxRates bytes; at most MaxLanes lanes; Seq and Version under 2^53.
// Apply reads a Record that is not valid as the zero Record.
func (r Record) Valid(now time.Time) bool {
	top := now.Add(MaxAhead)
	if r.Seq >= maxInt || len(r.Lanes) > MaxLanes {
		return false
	}
	for i := range r.Lanes {
		s := &r.Lanes[i]
		if !inRange(s.Until, top) || !inRange(s.Next, top) || !inRange(s.Fixed, top) || !inRange(s.Limited, top) ||
			!spanOK(s.Shift) || !spanOK(s.Moved) || !spanOK(s.FixedPushed) || !levelsOK(s, top) ||
			!rateOK(s.Per, float64(MaxPer)) || !rateOK(s.Scaled, float64(MaxPer)) || !rateOK(s.Burst, float64(MaxAhead)) ||
			s.Version >= maxInt || len(s.Rates) > MaxRates {
			return false
		}
	}
	c := &r.Circuit
	return c.Failures >= 0 && c.Failures < maxInt && inRange(c.Last, top) && inRange(c.Open, top) &&
		inRange(c.Since, top) && inRange(c.Probe, top)
}

func inRange(t, top time.Time) bool {
	if t.IsZero() {
		return true
	}
	return t.UnixMicro() > 0 && !t.After(top) && t.Equal(t.Truncate(time.Microsecond))
}

func spanOK(d time.Duration) bool {
	return d >= -maxSpan && d <= maxSpan && d%time.Microsecond == 0
}

func rateOK(f, top float64) bool { return f >= 0 && f <= top }

// levelsOK reports whether a lane's levels are in range: its tails times,
// its pushes spans, its jumps a count, its fixed head's level one below
// the highest.
func levelsOK(s *Lane, top time.Time) bool {
	for i := range s.Tails {
		if !inRange(s.Tails[i], top) || !spanOK(s.Pushes[i]) {
			return false
		}
	}
	return s.Jumps >= 0 && s.Jumps < maxInt && s.FixedLevel >= 0 && s.FixedLevel < NumLevels-1
}

// finite is f when it is a number of 0 or more, else 0.
func finite(f float64) float64 {
	if f != f || f < 0 || math.IsInf(f, 0) {
		return 0
	}
	return f
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
