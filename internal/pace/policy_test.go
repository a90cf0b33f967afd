package pace

import (
	"github.com/retryhttp/retryhttp/internal/signal"
	"math"
	"testing"
	"time"
)

// TestHearLaneExhaustive holds hearLane, the pacing policy, to the rules
// of RULES.md R17 and R23, stated here apart from the code, over every
// combination of a grid of lanes and answers: the provider's fine counts
// are its word (the slowest recent one) and its coarse counts a bound; no
// count makes a rate slower than its whole limit in a minute; a limit paces
// from a guess when nothing is known; a 429 to a send slotted at the
// current rate, behind another, cuts it (slows the word when the counts do not explain it),
// pauses the lane, and ends a ramp; a success
// grows a rate only for a send paced at about it, fast while ramping or
// quiet; no learned rate leaves [MinInterval, MaxLearned] a send; an ask
// past its resolution holds the lane, never past MaxHold, and refuses it
// past that; a reset holds where no bucket is stated; a count places the
// bucket; and an answer that says nothing of the lane changes nothing.
func TestHearLaneExhaustive(t *testing.T) {
	now := epoch
	n := 0
	for _, r := range hearRates() {
		for _, ln := range hearNews(now) {
			for _, quiet := range []time.Duration{0, IdleAfter, maxDuration} {
				n++
				checkHearLane(t, now, r, quiet, ln, Hear(r, now, quiet, ln))
			}
		}
	}
	t.Logf("%d Rates × news × quiets", n)
}

// hearRates is the grid of lanes: nothing known, learned (ramping, fast,
// steady; slow, fast, at the bounds), a provider's word (slowed or not), a
// coarse bound, a limit, on request and token lanes (a mean cost).
func hearRates() []Rates {
	ms := float64(time.Millisecond)
	var out []Rates
	for _, mean := range []float64{0, 1500} {
		for _, learned := range []float64{0, float64(MinInterval), 10 * ms, float64(MaxLearned), 20 * 1e3} {
			for _, word := range []float64{0, 10 * ms} {
				for _, slow := range []float64{0, 1.5} {
					for _, hi := range []float64{0, 5 * ms} {
						for _, mode := range []int{0, 1, 2} { // steady, ramp, fast
							if word == 0 && slow > 0 {
								continue
							}
							r := Rates{Learned: learned, Stated: word, Slowdown: slow, CoarseBound: hi, MeanCost: mean, Generation: 3, Limit: 10 * float64(mode%2)}
							r.Ramping, r.Regrowing = mode == 1, mode == 2
							out = append(out, r)
						}
					}
				}
			}
		}
	}
	return out
}

// hearNews is the grid of answers: success, 429 or a failure with an ask;
// paced at the current generation, an older one or not at all; every form
// of ask, reset and count; request and token costs.
func hearNews(now time.Time) []News {
	ms, s := time.Millisecond, time.Second
	type hint struct {
		d, res time.Duration
		ok     bool
	}
	var out []News
	for _, kind := range []int{0, 1, 2} { // success, 429 about the lane, nothing about it
		for _, paced := range []int{0, 1, 2, 3} { // not paced, at the current generation, an older one, current but sent at once
			for _, ask := range []hint{{}, {s, s, true}, {20 * s, s, true}, {13 * ms, 0, true}, {3 * ms, ms, true}, {10 * time.Minute, s, true}} {
				for _, reset := range []hint{{}, {100 * ms, ms, true}, {s, s, true}} {
					for _, c := range []signal.Counts{{}, {Limit: 10, Remaining: 0, Window: 100 * ms, Res: ms, OK: true},
						{Limit: 10, Remaining: 9, Window: s, Res: s, OK: true}, {Limit: 10, Remaining: 10, Window: 0, Res: ms, OK: true},
						{Limit: 2, Remaining: 1, Window: 999999 * time.Hour, Res: s, OK: true}, // a century a send
						{Limit: 50000, Remaining: 1000, Window: 980 * ms, Res: ms, OK: true}} {
						for _, cost := range []float64{0, 1, 1500} {
							if kind == 0 && ask.ok {
								continue // a success carries no ask (heardOf)
							}
							n := News{Counts: c, Hit: kind == 1, OK: kind == 0, Cost: cost,
								Ask: ask.d, AskRes: ask.res, HasAsk: ask.ok && kind == 1,
								Reset: reset.d, ResetRes: reset.res, HasReset: reset.ok, Sent: now.Add(-20 * ms)}
							n.Explained = n.Hit && c.OK && float64(c.Remaining) < math.Max(cost, 1)
							if paced > 0 {
								n.Paced, n.Generation, n.PacedPer, n.Queued = true, 3, 10*float64(ms)/math.Max(cost, 1), paced != 3
								if paced == 2 {
									n.Generation = 2 // an older generation
								}
							}
							out = append(out, n)
						}
					}
				}
			}
		}
	}
	return out
}

// checkHearLane reports each rule that e, what hearLane made at now of r
// after n, breaks; it formats nothing when they hold.
func checkHearLane(t *testing.T, now time.Time, r Rates, quiet time.Duration, n News, e Effect) {
	t.Helper()
	check := func(ok bool, rule string) {
		if !ok {
			t.Errorf("%s:\nrates %+v\nquiet %v\nnews %+v\ngot %+v", rule, r, quiet, n, e)
		}
	}
	g := e.Rates
	checkCountsRule(check, r, n, g)
	checkLimitRule(check, r, n, g, e)
	checkGrowRule(check, r, quiet, n, g)
	checkHoldRule(check, now, n, e)
	unit := math.Max(g.MeanCost, 1)
	if g.Learned > 0 {
		check(g.Learned >= float64(MinInterval)/unit*0.999 && g.Learned <= float64(MaxLearned)/unit*1.001, "a learned rate stays within [MinInterval, MaxLearned] a send")
	}
	for _, f := range []float64{g.Stated, g.Learned, g.CoarseBound, g.Slowdown, g.Per(), g.Burst()} {
		check(!math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0, "every rate is a finite number (a float to int overflow)")
	}
	if !n.Counts.OK && !n.Hit && !n.OK && !n.HasReset && !n.HasAsk {
		kept := r
		kept.MeanCost = g.MeanCost
		kept.bound()
		check(g == kept && e.Hold.IsZero() && e.Full.IsZero(), "nothing said, nothing changed (but the mean cost, and the bounds it sets)")
	}
	check(e.Changed == !sameButMean(g, r), "changed says whether the Rates changed")
}

// checkCountsRule: fine counts are the word, the slowest recent one;
// coarse ones a bound; a whole limit refills within a minute at most.
func checkCountsRule(check func(bool, string), r Rates, n News, g Rates) {
	c := n.Counts
	if !c.OK || c.Limit <= c.Remaining || c.Window <= 0 {
		return
	}
	iv := math.Min(float64(c.Window)/float64(c.Limit-c.Remaining), float64(MaxWindow)/float64(c.Limit))
	check(g.Limit == float64(c.Limit), "a count states the bucket")
	if c.Res*ExactRes <= c.Window {
		want := math.Max(iv*ExactSlack, r.Stated*StatedDecay)
		if r.Stated == 0 || iv*ExactSlack*2 < r.Stated && c.Limit-c.Remaining >= 2 {
			want = iv * ExactSlack // a rate twice as fast, from two units spent or more, is the rate now
		}
		want = math.Max(want, float64(MinInterval)/math.Max(g.MeanCost, 1))
		check(math.Abs(g.Stated-want) <= want*1e-9, "fine counts are the word: the slowest recent one")
		check(g.Stated <= float64(MaxWindow)/float64(c.Limit)*ExactSlack*1.001 || r.Stated*StatedDecay > float64(MaxWindow)/float64(c.Limit),
			"no count makes a rate slower than its whole limit in a minute")
	} else {
		want := iv
		if r.CoarseBound > 0 {
			want = math.Min(iv, r.CoarseBound/StatedDecay)
		}
		check(math.Abs(g.CoarseBound-math.Max(want, float64(MinInterval)/math.Max(g.MeanCost, 1))) <= g.CoarseBound*1e-9+1, "coarse counts bound the rate: the tightest recent bound")
	}
}

// checkLimitRule: a limit paces; a 429 to a send at the current rate cuts.
func checkLimitRule(check func(bool, string), r Rates, n News, g Rates, e Effect) {
	if !n.Hit {
		check(!e.Limited, "only a limit limits")
		return
	}
	check(e.Limited, "a limit is remembered")
	before := r
	before.Stated, before.CoarseBound, before.Limit, before.MeanCost = g.Stated, g.CoarseBound, g.Limit, g.MeanCost // what the counts and the cost did first
	kept := before
	kept.bound()
	switch {
	case before.Per() == 0:
		check(g.Ramping && g.Generation == r.Generation+1 && g.Learned > 0, "a limit with nothing known paces from a guess, ramping")
	case !n.Paced || n.Generation != r.Generation || !n.Queued:
		check(g.Generation == r.Generation && g.Slowdown == kept.Slowdown && g.Learned == kept.Learned, "a 429 to a send slotted at an older rate, or not paced, cuts nothing")
	case before.Stated > 0 && n.Explained:
		check(g.Generation == r.Generation && g.Slowdown == kept.Slowdown, "a 429 the provider's own count explains is no cut")
	default:
		check(g.Generation == r.Generation+1 && !g.Ramping && !g.Regrowing, "a 429 to a send at the current rate cuts, and ends a ramp")
		if before.Stated > 0 {
			want := math.Max(before.Slowdown, 1) * CutBy
			if before.Ramping {
				want = math.Max(before.Slowdown, 1) * RampCut
			}
			check(g.Slowdown >= math.Min(want, 1)*0.999 && g.Slowdown <= want*1.001, "it slows the provider's word")
		} else {
			check(g.Learned > before.Per()*0.999 || g.Learned >= float64(MaxLearned)/math.Max(g.MeanCost, 1)*0.999, "it cuts the learned rate")
		}
		check(!e.Hold.IsZero(), "and pauses the lane")
	}
}

// checkGrowRule: a success grows a rate only for a send paced at about it.
func checkGrowRule(check func(bool, string), r Rates, quiet time.Duration, n News, g Rates) {
	if !n.OK || n.Hit || r.Per() == 0 {
		return
	}
	near := n.Paced && (r.Ramping || n.PacedPer <= g.Per()*GrowSpan*1.0001)
	unit := math.Max(g.MeanCost, 1)
	switch {
	case g.Stated > 0 || r.Learned == 0:
	case !near:
		check(g.Learned == r.Learned || g.Learned == float64(MaxLearned)/unit || g.Learned == float64(MinInterval)/unit,
			"a success of a send not paced at about the rate says nothing of it")
	default:
		want := SteadyGrow
		if r.Ramping || r.Regrowing || quiet >= IdleAfter {
			want = RampGrow
		}
		bounded := math.Min(math.Max(r.Learned*want, float64(MinInterval)/unit), float64(MaxLearned)/unit)
		check(math.Abs(g.Learned-bounded) <= bounded*1e-9, "a success grows a learned rate: fast while ramping or quiet, else slowly")
		check(quiet < IdleAfter || g.Regrowing || g.Ramping, "quiet for IdleAfter, it grows fast again")
	}
}

// checkHoldRule: an ask past its resolution holds the lane; a reset holds
// where no bucket is stated; a count places the bucket; no hold past
// MaxHold, and one asked past it refuses.
func checkHoldRule(check func(bool, string), now time.Time, n News, e Effect) {
	if n.HasAsk && n.Ask > n.AskRes {
		check(!e.Hold.Before(now.Add(min(n.Ask, MaxHold))), "an ask past its resolution holds the lane all of it")
		check(e.Refuse == (n.Ask > MaxHold), "an ask past MaxHold refuses the lane meanwhile")
	}
	check(e.Hold.IsZero() || !e.Hold.After(now.Add(MaxHold)), "no hold past MaxHold")
	level := e.Rates.Limit > 0 && e.Rates.Stated > 0 && e.Rates.Slowdown <= 1
	if c := n.Counts; level && c.OK && c.Limit >= c.Remaining {
		want := min(DurNs(float64(c.Limit-c.Remaining)*e.Rates.Per()), MaxWindow)
		check(e.Full.Equal(n.Sent.Add(want)), "a count places the provider's bucket, from the send")
	} else {
		check(e.Full.IsZero(), "no count, or no bucket stated: nothing placed")
	}
	if n.HasReset && !level && n.Reset-n.ResetRes > 20*time.Millisecond {
		check(!e.Hold.Before(n.Sent.Add(min(n.Reset-n.ResetRes, MaxHold+20*time.Millisecond)).Add(-20*time.Millisecond)),
			"a reset holds the lane until a resolution before it, from the send")
	}
}

// epoch is the tests' now.
var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const maxDuration = time.Duration(math.MaxInt64)
