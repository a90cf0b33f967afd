package retryhttp

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
// quiet; no learned rate leaves [minInterval, maxLearned] a send; an ask
// past its resolution holds the lane, never past maxHold, and refuses it
// past that; a reset holds where no bucket is stated; a count places the
// bucket; and an answer that says nothing of the lane changes nothing.
func TestHearLaneExhaustive(t *testing.T) {
	now := epoch
	n := 0
	for _, r := range hearRates() {
		for _, ln := range hearNews(now) {
			for _, quiet := range []time.Duration{0, quietAfter, maxDuration} {
				n++
				checkHearLane(t, now, r, quiet, ln, hearLane(r, now, quiet, ln))
			}
		}
	}
	t.Logf("%d rates × news × quiets", n)
}

// hearRates is the grid of lanes: nothing known, learned (ramping, fast,
// steady; slow, fast, at the bounds), a provider's word (slowed or not), a
// coarse bound, a limit, on request and token lanes (a mean cost).
func hearRates() []rates {
	ms := float64(time.Millisecond)
	var out []rates
	for _, mean := range []float64{0, 1500} {
		for _, learned := range []float64{0, float64(minInterval), 10 * ms, float64(maxLearned), 20 * 1e3} {
			for _, word := range []float64{0, 10 * ms} {
				for _, slow := range []float64{0, 1.5} {
					for _, hi := range []float64{0, 5 * ms} {
						for _, mode := range []int{0, 1, 2} { // steady, ramp, fast
							if word == 0 && slow > 0 {
								continue
							}
							r := rates{learned: learned, word: word, slow: slow, hi: hi, mean: mean, gen: 3, limit: 10 * float64(mode%2)}
							r.ramp, r.fast = mode == 1, mode == 2
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
func hearNews(now time.Time) []laneNews {
	ms, s := time.Millisecond, time.Second
	type hint struct {
		d, res time.Duration
		ok     bool
	}
	var out []laneNews
	for _, kind := range []int{0, 1, 2} { // success, 429 about the lane, nothing about it
		for _, paced := range []int{0, 1, 2, 3} { // not paced, at the current generation, an older one, current but sent at once
			for _, ask := range []hint{{}, {s, s, true}, {20 * s, s, true}, {13 * ms, 0, true}, {3 * ms, ms, true}, {10 * time.Minute, s, true}} {
				for _, reset := range []hint{{}, {100 * ms, ms, true}, {s, s, true}} {
					for _, c := range []signal.Counts{{}, {Limit: 10, Remaining: 0, Window: 100 * ms, Res: ms, OK: true},
						{Limit: 10, Remaining: 9, Window: s, Res: s, OK: true}, {Limit: 10, Remaining: 10, Window: 0, Res: ms, OK: true},
						{Limit: 2, Remaining: 1, Window: 999999 * time.Hour, Res: s, OK: true}, // issue 21: a century a send
						{Limit: 50000, Remaining: 1000, Window: 980 * ms, Res: ms, OK: true}} {
						for _, cost := range []float64{0, 1, 1500} {
							if kind == 0 && ask.ok {
								continue // a success carries no ask (heardOf)
							}
							n := laneNews{counts: c, hit: kind == 1, ok: kind == 0, cost: cost,
								ask: ask.d, askRes: ask.res, hasAsk: ask.ok && kind == 1,
								reset: reset.d, resetRes: reset.res, hasReset: reset.ok, sent: now.Add(-20 * ms)}
							n.explained = n.hit && c.OK && float64(c.Remaining) < math.Max(cost, 1)
							if paced > 0 {
								n.paced, n.gen, n.pacedPer, n.queued = true, 3, 10*float64(ms)/math.Max(cost, 1), paced != 3
								if paced == 2 {
									n.gen = 2 // an older generation
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
func checkHearLane(t *testing.T, now time.Time, r rates, quiet time.Duration, n laneNews, e laneEffect) {
	t.Helper()
	check := func(ok bool, rule string) {
		if !ok {
			t.Errorf("%s:\nrates %+v\nquiet %v\nnews %+v\ngot %+v", rule, r, quiet, n, e)
		}
	}
	g := e.rates
	checkCountsRule(check, r, n, g)
	checkLimitRule(check, r, n, g, e)
	checkGrowRule(check, r, quiet, n, g)
	checkHoldRule(check, now, n, e)
	unit := math.Max(g.mean, 1)
	if g.learned > 0 {
		check(g.learned >= float64(minInterval)/unit*0.999 && g.learned <= float64(maxLearned)/unit*1.001, "a learned rate stays within [minInterval, maxLearned] a send")
	}
	for _, f := range []float64{g.word, g.learned, g.hi, g.slow, g.per(), g.burst()} {
		check(!math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0, "every rate is a finite number (issue 21: a float to int overflow)")
	}
	if !n.counts.OK && !n.hit && !n.ok && !n.hasReset && !n.hasAsk {
		kept := r
		kept.mean = g.mean
		kept.bound()
		check(g == kept && e.hold.IsZero() && e.full.IsZero(), "nothing said, nothing changed (but the mean cost, and the bounds it sets)")
	}
	check(e.changed == !sameButMean(g, r), "changed says whether the rates changed")
}

// checkCountsRule: fine counts are the word, the slowest recent one;
// coarse ones a bound; a whole limit refills within a minute at most.
func checkCountsRule(check func(bool, string), r rates, n laneNews, g rates) {
	c := n.counts
	if !c.OK || c.Limit <= c.Remaining || c.Window <= 0 {
		return
	}
	iv := math.Min(float64(c.Window)/float64(c.Limit-c.Remaining), float64(maxWindow)/float64(c.Limit))
	check(g.limit == float64(c.Limit), "a count states the bucket")
	if c.Res*exactRes <= c.Window {
		want := math.Max(iv*exactSlack, r.word*wordDecay)
		if r.word == 0 || iv*exactSlack*2 < r.word && c.Limit-c.Remaining >= 2 {
			want = iv * exactSlack // a rate twice as fast, from two units spent or more, is the rate now
		}
		want = math.Max(want, float64(minInterval)/math.Max(g.mean, 1))
		check(math.Abs(g.word-want) <= want*1e-9, "fine counts are the word: the slowest recent one")
		check(g.word <= float64(maxWindow)/float64(c.Limit)*exactSlack*1.001 || r.word*wordDecay > float64(maxWindow)/float64(c.Limit),
			"no count makes a rate slower than its whole limit in a minute (issue 21)")
	} else {
		want := iv
		if r.hi > 0 {
			want = math.Min(iv, r.hi/wordDecay)
		}
		check(math.Abs(g.hi-math.Max(want, float64(minInterval)/math.Max(g.mean, 1))) <= g.hi*1e-9+1, "coarse counts bound the rate: the tightest recent bound")
	}
}

// checkLimitRule: a limit paces; a 429 to a send at the current rate cuts.
func checkLimitRule(check func(bool, string), r rates, n laneNews, g rates, e laneEffect) {
	if !n.hit {
		check(!e.limited, "only a limit limits")
		return
	}
	check(e.limited, "a limit is remembered")
	before := r
	before.word, before.hi, before.limit, before.mean = g.word, g.hi, g.limit, g.mean // what the counts and the cost did first
	kept := before
	kept.bound()
	switch {
	case before.per() == 0:
		check(g.ramp && g.gen == r.gen+1 && g.learned > 0, "a limit with nothing known paces from a guess, ramping")
	case !n.paced || n.gen != r.gen || !n.queued:
		check(g.gen == r.gen && g.slow == kept.slow && g.learned == kept.learned, "a 429 to a send slotted at an older rate, or not paced, cuts nothing")
	case before.word > 0 && n.explained:
		check(g.gen == r.gen && g.slow == kept.slow, "a 429 the provider's own count explains is no cut")
	default:
		check(g.gen == r.gen+1 && !g.ramp && !g.fast, "a 429 to a send at the current rate cuts, and ends a ramp")
		if before.word > 0 {
			want := math.Max(before.slow, 1) * cutBy
			if before.ramp {
				want = math.Max(before.slow, 1) * rampCut
			}
			check(g.slow >= math.Min(want, 1)*0.999 && g.slow <= want*1.001, "it slows the provider's word")
		} else {
			check(g.learned > before.per()*0.999 || g.learned >= float64(maxLearned)/math.Max(g.mean, 1)*0.999, "it cuts the learned rate")
		}
		check(!e.hold.IsZero(), "and pauses the lane")
	}
}

// checkGrowRule: a success grows a rate only for a send paced at about it.
func checkGrowRule(check func(bool, string), r rates, quiet time.Duration, n laneNews, g rates) {
	if !n.ok || n.hit || r.per() == 0 {
		return
	}
	near := n.paced && (r.ramp || n.pacedPer <= g.per()*growSpan*1.0001)
	unit := math.Max(g.mean, 1)
	switch {
	case g.word > 0 || r.learned == 0:
	case !near:
		check(g.learned == r.learned || g.learned == float64(maxLearned)/unit || g.learned == float64(minInterval)/unit,
			"a success of a send not paced at about the rate says nothing of it")
	default:
		want := steadyGrow
		if r.ramp || r.fast || quiet >= quietAfter {
			want = rampGrow
		}
		bounded := math.Min(math.Max(r.learned*want, float64(minInterval)/unit), float64(maxLearned)/unit)
		check(math.Abs(g.learned-bounded) <= bounded*1e-9, "a success grows a learned rate: fast while ramping or quiet, else slowly")
		check(quiet < quietAfter || g.fast || g.ramp, "quiet for quietAfter, it grows fast again (issue 21)")
	}
}

// checkHoldRule: an ask past its resolution holds the lane; a reset holds
// where no bucket is stated; a count places the bucket; no hold past
// maxHold, and one asked past it refuses.
func checkHoldRule(check func(bool, string), now time.Time, n laneNews, e laneEffect) {
	if n.hasAsk && n.ask > n.askRes {
		check(!e.hold.Before(now.Add(min(n.ask, maxHold))), "an ask past its resolution holds the lane all of it")
		check(e.refuse == (n.ask > maxHold), "an ask past maxHold refuses the lane meanwhile (issue 21)")
	}
	check(e.hold.IsZero() || !e.hold.After(now.Add(maxHold)), "no hold past maxHold")
	level := e.rates.limit > 0 && e.rates.word > 0 && e.rates.slow <= 1
	if c := n.counts; level && c.OK && c.Limit >= c.Remaining {
		want := min(durNs(float64(c.Limit-c.Remaining)*e.rates.per()), maxWindow)
		check(e.full.Equal(n.sent.Add(want)), "a count places the provider's bucket, from the send")
	} else {
		check(e.full.IsZero(), "no count, or no bucket stated: nothing placed")
	}
	if n.hasReset && !level && n.reset-n.resetRes > 20*time.Millisecond {
		check(!e.hold.Before(n.sent.Add(min(n.reset-n.resetRes, maxHold+20*time.Millisecond)).Add(-20*time.Millisecond)),
			"a reset holds the lane until a resolution before it, from the send")
	}
}
