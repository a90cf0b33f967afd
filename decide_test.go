package retryhttp

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDecideRows reads as the rules do: one row per reason to stop, and the
// waits and their sources.
func TestDecideRows(t *testing.T) {
	const s = time.Second
	base := situation{class: Transient, try: 1, maxRetries: 2, replayable: true, quotaOK: true, backoff: 400 * time.Millisecond, left: maxDuration}
	with := func(edit func(*situation)) situation { x := base; edit(&x); return x }
	for _, tc := range []struct {
		name string
		in   situation
		want decision
	}{
		{"a success", with(func(x *situation) { x.class = Permanent }), decision{outcome: Done}},
		{"a Permanent failure with a Budget is handed back", with(func(x *situation) { x.class = Permanent; x.budget = true }), decision{outcome: Done}},
		{"transient: the backoff", base, decision{outcome: Retrying, wait: 400 * time.Millisecond, from: FromBackoff}},
		{"the server asks for more", with(func(x *situation) { x.ask, x.hasAsk = 2*s, true }), decision{outcome: Retrying, wait: 2 * s, from: FromRetryAfter}},
		{"the server asks for less: the backoff stays", with(func(x *situation) { x.ask, x.hasAsk = 10*time.Millisecond, true }), decision{outcome: Retrying, wait: 400 * time.Millisecond, from: FromBackoff}},
		{"the cooldown is the largest", with(func(x *situation) { x.ask, x.hasAsk, x.cooldown = 2*s, true, 5*s }), decision{outcome: Retrying, wait: 5 * s, from: FromCooldown}},
		{"last try", with(func(x *situation) { x.try = 3 }), decision{outcome: Exhausted}},
		{"last try, throttled, with a Budget: busy", with(func(x *situation) { x.try, x.class, x.budget = 3, Throttled, true }), decision{outcome: Exhausted, rateLimited: true}},
		{"last try, transient, with a Budget: handed back", with(func(x *situation) { x.try, x.budget = 3, true }), decision{outcome: Exhausted}},
		{"no retries at all", with(func(x *situation) { x.maxRetries = 0 }), decision{outcome: Exhausted}},
		{"no limit", with(func(x *situation) { x.try, x.maxRetries = math.MaxInt-1, math.MaxInt }), decision{outcome: Retrying, wait: 400 * time.Millisecond, from: FromBackoff}},
		{"the body cannot be sent again", with(func(x *situation) { x.replayable = false }), decision{outcome: NotReplayable}},
		{"no GetBody, a Budget, a long ask, 503: handed back", with(func(x *situation) {
			x.replayable, x.budget, x.ask, x.hasAsk, x.left = false, true, 10*s, true, 10*s
		}), decision{outcome: NotReplayable}},
		{"no GetBody, a Budget, a 429: busy", with(func(x *situation) { x.replayable, x.budget, x.class = false, true, Throttled }), decision{outcome: NotReplayable, rateLimited: true}},
		{"the Quota refuses", with(func(x *situation) { x.quotaOK = false }), decision{outcome: NoQuota}},
		{"the wait fits", with(func(x *situation) { x.left = 400*time.Millisecond + 1 }), decision{outcome: Retrying, wait: 400 * time.Millisecond, from: FromBackoff}},
		{"the wait does not fit: not shorter than left", with(func(x *situation) { x.left = 400 * time.Millisecond }), decision{outcome: OutOfTime, from: FromBackoff}},
		{"out of time on the backoff with a Budget: handed back", with(func(x *situation) { x.left, x.budget = 100*time.Millisecond, true }), decision{outcome: OutOfTime, from: FromBackoff}},
		{"out of time on the server's ask with a Budget: busy", with(func(x *situation) {
			x.left, x.budget, x.ask, x.hasAsk = 10*s, true, 10*s, true
		}), decision{outcome: OutOfTime, from: FromRetryAfter, rateLimited: true}},
		{"out of time on the cooldown with a Budget: busy", with(func(x *situation) { x.left, x.budget, x.cooldown = 10*s, true, 20*s }), decision{outcome: OutOfTime, from: FromCooldown, rateLimited: true}},
		{"out of time on the server's ask without a Budget: handed back", with(func(x *situation) { x.left, x.ask, x.hasAsk = 10*s, 10*s, true }), decision{outcome: OutOfTime, from: FromRetryAfter}},
		{"out of time, the ask alone fits: handed back", with(func(x *situation) {
			x.left, x.budget, x.ask, x.hasAsk, x.backoff = 3*s, true, 2*s, true, 5*s
		}), decision{outcome: OutOfTime, from: FromBackoff}},
		{"nothing left", with(func(x *situation) { x.left = 0; x.backoff = 0 }), decision{outcome: OutOfTime, from: FromBackoff}},
		{"the circuit is open: as when the retries run out", with(func(x *situation) { x.down = true }), decision{outcome: Unavailable}},
		{"the circuit is open, a 429, a Budget: down, not busy", with(func(x *situation) { x.down, x.class, x.budget = true, Throttled, true }), decision{outcome: Unavailable}},
		{"the circuit is open, the last try: exhausted", with(func(x *situation) { x.down, x.try = true, 3 }), decision{outcome: Exhausted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, decide(tc.in))
		})
	}
}

// TestDecideExhaustive runs decide over every combination of its inputs at
// the boundaries that matter (each class; the first, the last and a
// past-the-last try, with no retries, two, or no limit; replayable or not;
// the Quota for or against; no ask, a zero, short and long one; no, a short
// and a long cooldown; every ordering of the wait against what is left; with
// and without a Budget) and checks each answer against the rules, stated
// apart from the code.
func TestDecideExhaustive(t *testing.T) {
	const s = time.Second
	type ask struct {
		d   time.Duration
		has bool
	}
	n := 0
	for _, class := range []Class{Permanent, Transient, Throttled} {
		for _, maxRetries := range []int{0, 2, math.MaxInt} {
			for _, try := range []int{1, 2, 3, math.MaxInt} {
				for _, replayable := range []bool{true, false} {
					for _, quotaOK := range []bool{true, false} {
						for _, backoff := range []time.Duration{0, 400 * time.Millisecond, 30 * s} {
							for _, a := range []ask{{}, {0, true}, {100 * time.Millisecond, true}, {10 * s, true}, {maxDuration, true}} {
								for _, cooldown := range []time.Duration{0, 1 * s, 20 * s} {
									for _, left := range []time.Duration{0, 400 * time.Millisecond, 10 * s, 20 * s, maxDuration} {
										for _, bm := range []struct {
											budget  bool
											maxWait time.Duration // 0: DefaultMaxWait
										}{{false, 0}, {true, 0}, {false, 15 * s}, {true, 10 * s}} {
											for _, down := range []bool{false, true} {
												budget, maxWait := bm.budget, bm.maxWait
												in := situation{class, try, maxRetries, replayable, quotaOK, backoff, a.d, a.has, cooldown, left, budget, maxWait, down}
												got := decide(in)
												if want := rules(in); got != want {
													t.Fatalf("decide(%+v)\n = %+v\nwant %+v", in, got, want)
												}
												n++
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d situations", n)
}

// rules is R3, R4, R7, R8, R9, R10, R12 and R17 written out as the rules
// read, without decide's shortcuts: the reference the exhaustive test holds
// decide to.
func rules(in situation) decision {
	if in.class == Permanent {
		return decision{outcome: Done} // R9: a Permanent try is returned as it is
	}
	var out decision
	resendsMade := in.try - 1
	switch {
	case resendsMade >= in.maxRetries: // R3
		out.outcome = Exhausted
	case !in.replayable: // R10
		out.outcome = NotReplayable
	case !in.quotaOK: // R12
		out.outcome = NoQuota
	case in.down: // R25: the circuit refuses the retry; the call ends as when its retries run out
		return decision{outcome: Unavailable}
	default:
		// R4, R17: the largest; the server's ask wins only when larger than
		// the backoff, the cooldown only when larger than both.
		candidates := []struct {
			d    time.Duration
			from WaitSource
			ok   bool
		}{{in.backoff, FromBackoff, true}, {in.ask, FromRetryAfter, in.hasAsk}, {in.cooldown, FromCooldown, true}}
		for _, c := range candidates {
			if c.ok && (c.d > out.wait || c.from == FromBackoff) {
				out.wait, out.from = c.d, c.from
			}
		}
		longest := in.maxWait // WithMaxWait: no single wait this long or longer
		if longest <= 0 {
			longest = DefaultMaxWait
		}
		if out.wait < min(in.left, longest) { // R7: a wait not shorter than what is left does not fit
			out.outcome = Retrying
			return out
		}
		out.outcome, out.wait = OutOfTime, 0
	}
	// R8: a Budget fails fast on a rate-limit signal.
	if in.budget {
		throttled := in.class == Throttled
		longest := in.maxWait
		if longest <= 0 {
			longest = DefaultMaxWait
		}
		limit := min(in.left, longest)
		askAlone := out.outcome == OutOfTime &&
			(in.hasAsk && in.ask >= limit || in.cooldown > 0 && in.cooldown >= limit)
		out.rateLimited = throttled || askAlone
	}
	return out
}

func TestDecideStrings(t *testing.T) {
	// Outcomes and sources print by name in failures and logs.
	assert.Equal(t, "out_of_time", fmt.Sprint(OutOfTime))
	assert.Equal(t, "cooldown", fmt.Sprint(FromCooldown))
}
