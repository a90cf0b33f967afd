package retryhttp

import (
	"math"
	"time"
)

// A key's lanes: a provider states several limits on one account, and a
// send must fit every one it counts against (R23). Each lane is a token
// bucket as the Cooldown models it (StoreLane): its schedule, which every
// send changes and a Store keeps atomically (R24), and its rates, which the
// policy learns from the answers (policy.go).
type laneID uint8

const (
	laneRequests laneID = iota // every send costs 1
	laneTokens                 // OpenAI and Azure x-ratelimit-*-tokens, Anthropic anthropic-ratelimit-tokens-*
	laneInput                  // anthropic-ratelimit-input-tokens-*: the prompt's tokens
	laneOutput                 // anthropic-ratelimit-output-tokens-*: charged by the output cap
	numLanes
)

var laneNames = [numLanes]string{"requests", "tokens", "input_tokens", "output_tokens"}

func (l laneID) String() string {
	if l < numLanes {
		return laneNames[l]
	}
	return "lane(" + itoa(int(l)) + ")"
}

// A StoreLane is one lane of a key as a Store keeps it (R24): a GCRA
// bucket (golang.org/x/time/rate's reservations and redis_rate's script
// keep the same arithmetic) with a hold in front, and the rates the policy
// set on it. Its times are on the Store's clock. Its methods are pure: the
// in-process Store runs them, and a Store elsewhere (retryredis's Lua) runs
// the same steps; its conformance tests check that they agree.
type StoreLane struct {
	// Until: no send that counts against the lane goes before it (the
	// provider's ask or reset, a pause after a cut). Refuse: the hold is
	// longer than the longest wait a call takes: until it ends, calls fail
	// at once instead of sleeping it out (issue 21).
	Until  time.Time
	Refuse bool
	// Next is GCRA's theoretical arrival time: the bucket is full again at
	// Next, counting every slot given. A send of charge c (its units × Per)
	// may go once the bucket holds c: at Next + min(c, Burst) − Burst.
	Next time.Time
	// Shift is how far the sends waiting for their slots have been moved
	// on by holds; Pushed, by retries let in before them. A waiting send
	// compares them with what they were at its take. Moved is how far Next
	// has moved but by takes (holds and corrections): a correction reads a
	// send's mark as moved on by it since.
	Shift, Pushed, Moved time.Duration
	RetryNext            time.Time // the earliest slot the next retry may take
	// Per is the time one unit takes to refill, in nanoseconds (a token's
	// can be far below one): 0 when the lane is not paced. Burst is what
	// the bucket holds, in the same time (τ): 0 paces one send after the
	// other. A Rates op sets both. Scaled is the Per the schedule was last
	// scaled to (setRates).
	Per, Burst, Scaled float64
	Limited            time.Time // when the provider last limited the lane (a Limited op)
	Version            uint64    // of the rates: a Rates op applies only when it names it
	Rates              string    // the policy's state of the lane, opaque to a Store
}

// A StoreState is what a Store keeps of one key, and what an Apply
// returns: the key's lanes after the ops, and what its Take did.
type StoreState struct {
	Now time.Time // the Store's clock when it applied the ops
	// Seq grows with every Apply that had ops: a copy older than one
	// already seen is stale. It is at least the Store's clock, in a unit
	// of its own (the in-process Store's is ns, retryredis's µs), so that
	// a key lost (flushed, expired) and made again still grows it past
	// what was given out before. 0: the Store has nothing of the key.
	Seq   uint64
	Lanes [4]StoreLane // requests, tokens, input tokens, output tokens (R23)
	// The Take op of the Apply: its wait (when Took, the send's; else the
	// one that did not fit), whether it took a slot, and whether a
	// refusing hold was in the way (Refused: the call fails at once).
	Wait    time.Duration
	Took    bool
	Refused bool
	Stale   bool // a Rates op named an older Version and was left out
}

// take gives a send of the given costs (units per lane; 0: the send does
// not count against it) its slot at now, if the wait for it is shorter than
// within: the latest of every lane's hold and the time its bucket covers
// the send's charge. A retry goes before the sends already waiting (its
// call has waited its turn once): it takes the first slot at or after now
// on each lane, no earlier than a charge after the retry let in before it,
// and every send waiting goes later by its charge, so that the provider
// sees the lane's rate and no send more. ok false takes nothing; refused: a
// refusing hold is in the way (the call fails at once, whatever its time).
func (ks *StoreState) take(now time.Time, costs [numLanes]float64, within time.Duration, retry bool) (wait time.Duration, refused, ok bool) {
	at := now
	for l := range ks.Lanes {
		s := &ks.Lanes[l]
		if costs[l] <= 0 {
			continue
		}
		if s.Refuse && s.Until.After(now) {
			return s.Until.Sub(now), true, false
		}
		at = later(at, s.Until)
		if s.Per > 0 {
			at = later(at, s.ready(now, costs[l]*s.Per, retry))
		}
	}
	wait = at.Sub(now)
	if wait > 0 && wait >= within {
		return wait, false, false
	}
	for l := range ks.Lanes {
		s := &ks.Lanes[l]
		if costs[l] <= 0 || s.Per <= 0 {
			continue
		}
		charge := costs[l] * s.Per
		if retry {
			if s.Next.After(at) {
				s.Pushed = addDur(s.Pushed, charge) // the sends waiting go one charge later
			}
			s.RetryNext = addNs(at, charge)
		}
		s.Next = addNs(later(s.Next, at), charge)
	}
	return wait, false, true
}

// ready is when the lane's bucket covers a charge (ns) asked at now: at
// once while the bucket holds it; a charge larger than the whole bucket
// goes when the bucket is full, never never (R23). A retry's slot is the
// first of the schedule at or after now (its grid: the sends waiting, one
// charge apart, back from Next), no sooner than a charge after the retry let
// in before it, if that is sooner: the sends waiting go a charge later each
// (take), so the lane keeps its rate and the provider sees no two sends
// closer than it.
func (s *StoreLane) ready(now time.Time, charge float64, retry bool) time.Time {
	r := addNs(s.Next, math.Min(charge, s.Burst)-s.Burst)
	if !retry || !r.After(now) {
		return r
	}
	head := now
	if ahead := float64(s.Next.Sub(now)); charge > 0 && ahead > 0 {
		// A slot due at now exactly is its send's, going now: the retry
		// takes the next (else the two could go at once).
		head = addNs(s.Next, -(math.Ceil(ahead/charge)-1)*charge)
	}
	return earlier(r, later(head, s.RetryNext))
}

// holdTo moves the lane's hold on to u (forward only: a shorter signal
// never shortens it, R17). The sends already given a slot past the old hold
// keep their order and spacing: the schedule moves on by what the hold
// grew. Left in place, every send whose slot the hold covers would go the
// instant it ends, a burst the provider answers with 429s and a hold more
// (issue 16 measured 26 to 43 429s in a quarter second, again and again).
func (s *StoreLane) holdTo(now, u time.Time, refuse bool) bool {
	from := later(s.Until, now)
	if !u.After(from) {
		return false
	}
	if s.Next.After(from) {
		d := u.Sub(from)
		s.Next = s.Next.Add(d)
		s.Shift += d
		s.Moved += d
	}
	s.Refuse = refuse || s.Refuse && s.Until.After(now)
	s.Until = u
	return true
}

// correct sets the schedule by the provider's count (R23: the provider's
// count is the truth, estimates fill in between answers): its bucket is
// full again at full, as of the send whose take left Next at mark, when the
// lane's Moved was movedAt. What the count says against the schedule as it
// stood after that send moves Next now, either way; the sends already
// waiting keep their slots (a count is rounded down to a whole unit:
// moving them on by every rounding moved the queue later and later). A
// send that was not paced (zero mark) only moves Next later.
func (s *StoreLane) correct(full, mark time.Time, movedAt time.Duration) bool {
	if mark.IsZero() {
		if !full.After(s.Next) {
			return false
		}
		if !s.Next.IsZero() { // a Next never set moves no mark
			s.Moved += full.Sub(s.Next)
		}
		s.Next = full
		return true
	}
	d := full.Sub(mark.Add(s.Moved - movedAt))
	if d == 0 {
		return false
	}
	s.Next = s.Next.Add(d)
	s.Moved += d
	return true
}

// setRates sets the lane's rate at now. A rate that changes by more than
// rescaleBy while sends wait for their slots scales their schedule by as
// much: each send its own wait (cooling.more), the schedule's end as a
// whole. Paced at the old rate, a queue would go on emptying the
// provider's bucket after a cut (issue 22: a learned rate's first guess,
// cut three times, had each time a queue of 64 sends refused at the old
// rate), or leave it idle after a growth (a first guess 5 times too slow
// kept 13 s of sends at it while the rate grew back).
func (s *StoreLane) setRates(now time.Time, per, burst float64, rates string) {
	switch {
	case s.Scaled <= 0 || per <= 0:
		s.Scaled = per
	case per > s.Scaled*rescaleBy || per < s.Scaled/rescaleBy:
		if s.Next.After(now) {
			d := durNs(float64(s.Next.Sub(now)) * (per/s.Scaled - 1))
			s.Next = s.Next.Add(d)
			s.Moved += d
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

// untake gives back the charge of a send whose take left tat at mark and
// which did not go (its call ended, or a wait did not fit), when no later
// slot was given since: a hole before other sends' slots is simply a send
// less. The charge is the one it was given at: the rate may have changed
// since (issue 21: giving back the current one broke the queue's order).
func (s *StoreLane) untake(mark time.Time, charge float64) bool {
	if mark.IsZero() || !s.Next.Equal(mark) {
		return false
	}
	s.Next = addNs(s.Next, -charge)
	return true
}

// idle reports whether the lane has nothing left to say at now: no hold,
// its bucket full (nobody waiting for a slot), and no limit for quietAfter.
func (s *StoreLane) idle(now time.Time) bool {
	return !now.Before(s.Until) && !now.Before(s.Next) && now.Sub(s.Limited) >= quietAfter
}

// later and earlier are max and min of two times.
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

// addNs adds ns nanoseconds (a float, saturating) to t.
func addNs(t time.Time, ns float64) time.Time {
	return t.Add(durNs(ns))
}

// addDur adds ns nanoseconds to d, saturating.
func addDur(d time.Duration, ns float64) time.Duration {
	return d + durNs(ns)
}

// durNs converts nanoseconds to a Duration, rounded, saturating at the
// largest Duration either way: a float too large for an int64 converts to
// an undefined value in Go (on amd64, the smallest: issue 21 saw a pace of
// one send per 292 years come out as one per 100 µs).
func durNs(ns float64) time.Duration {
	switch {
	case ns != ns: // NaN
		return 0
	case ns >= maxDurationF:
		return maxDuration
	case ns <= -maxDurationF:
		return -maxDuration
	}
	return time.Duration(math.Round(ns))
}

const maxDurationF = float64(maxDuration)
