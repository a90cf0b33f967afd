package retryhttp

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestLaneHearExhaustive holds lane.hear to the rules of the Cooldown's
// package doc over every combination of a grid of lanes and answers: the
// hold only moves forward and never past the provider's own word; an ask
// holds the others for what is left of it past its resolution; a reset runs
// from the send; a hold moves the sends already waiting on by what it
// grew; a limit paces; the provider's counts at a fine
// resolution are the rate; a learned rate is cut by a 429 to a send slotted
// since the last cut and grows with a success; an answer that says nothing
// changes nothing.
func TestLaneHearExhaustive(t *testing.T) {
	now := epoch
	n := 0
	for _, l := range hearLanes(now) {
		for _, h := range hearAnswers(now) {
			n++
			checkHear(t, now, l, h, l.hear(now, h))
		}
	}
	t.Logf("%d lanes × answers", n)
}

// hearLanes is the grid of lanes TestLaneHearExhaustive starts from: held
// or not, paced at every kind of rate, with sends waiting or not, cut
// recently or long ago.
func hearLanes(now time.Time) []lane {
	ms, s := time.Millisecond, time.Second
	var lanes []lane
	for _, until := range []time.Duration{-s, 0, 10 * ms, 30 * s} {
		for _, iv := range []time.Duration{0, minInterval, 10 * ms, firstInterval, 2 * s} {
			for _, exact := range []bool{false, true} {
				for _, cutAgo := range []time.Duration{0, 5 * ms, 100 * ms, time.Minute} {
					for _, next := range []time.Duration{until / 2, max(until, 0) + 50*ms} {
						if iv == 0 && exact {
							continue
						}
						lanes = append(lanes, lane{until: now.Add(until), next: now.Add(next), interval: iv, exact: exact,
							ramp: cutAgo == time.Minute, cutAt: now.Add(-cutAgo), limitedAt: now.Add(-cutAgo), shifted: 3 * ms})
					}
				}
			}
		}
	}
	return lanes
}

// hearAnswers is the grid of answers: every status, sent long ago or just
// now or not paced, with every form of ask, reset and counts.
func hearAnswers(now time.Time) []heard {
	ms, s := time.Millisecond, time.Second
	type hint struct {
		d, res time.Duration
		ok     bool
	}
	var answers []heard
	for _, status := range []int{200, 429, 503} {
		for _, sentAgo := range []time.Duration{-1, 0, 20 * ms, time.Hour} {
			for _, ask := range []hint{{}, {s, s, true}, {20 * s, s, true}, {20 * ms, ms, true}, {13 * ms, 0, true}, {0, ms, true},
				{2 * ms, ms, true}, {50 * time.Microsecond, 0, true}, {3 * ms, s, true}} {
				for _, reset := range []hint{{}, {100 * ms, ms, true}, {s, s, true}, {0, s, true}} {
					for _, c := range []counts{{}, {limit: 10, remaining: 0, window: 100 * ms, res: ms, ok: true},
						{limit: 10, remaining: 9, window: s, res: s, ok: true}, {limit: 10, remaining: 10, window: 0, res: ms, ok: true},
						{limit: 500, remaining: 499, window: 120 * ms, res: ms, ok: true},
						{limit: 10, remaining: 10, window: 100 * ms, res: ms, ok: true}, // full: no rate in it
						{limit: 10, remaining: 5, window: 0, res: ms, ok: true}} {       // a window of nothing: no rate either
						if status == 200 && ask.ok {
							continue // a success carries no ask (heardOf)
						}
						var sent time.Time
						if sentAgo >= 0 {
							sent = now.Add(-sentAgo)
						}
						answers = append(answers, heard{limited: status == 429, ok: status < 400, slotted: sent, sent: sent,
							ask: ask.d, askRes: ask.res, hasAsk: ask.ok, reset: reset.d, resetRes: reset.res, hasReset: reset.ok, counts: c})
					}
				}
			}
		}
	}
	return answers
}

// checkHear reports each rule that got, the lane l after h at now, breaks;
// it formats nothing when the rules hold (over a million cases).
func checkHear(t *testing.T, now time.Time, l lane, h heard, got lane) {
	t.Helper()
	check := func(ok bool, rule string) {
		if !ok {
			t.Errorf("%s:\nlane %+v\nheard %+v\ngot %+v", rule, l, h, got)
		}
	}
	checkHold(check, now, l, h, got)
	limits := h.limited || h.hasAsk && h.ask > 0
	before := l.interval // the interval once coarse counts have bounded it
	if c := h.counts; c.ok && c.limit > c.remaining && c.window > 0 && before > c.window/time.Duration(c.limit-c.remaining) {
		before = max(c.window/time.Duration(c.limit-c.remaining), minInterval)
	}
	fine := h.counts.ok && h.counts.limit > h.counts.remaining && h.counts.window > 0 && h.counts.res*exactRes <= h.counts.window
	switch {
	case fine:
		want := max(time.Duration(float64(h.counts.window/time.Duration(h.counts.limit-h.counts.remaining))*exactSlack), minInterval)
		check(got.interval == want && got.exact, "the provider's counts are the rate")
	case limits && l.interval == 0:
		want := firstInterval
		if h.hasAsk && h.askRes <= time.Millisecond && h.ask > 0 {
			want = min(max(h.ask, minInterval), firstInterval) // a fine ask: the time to the provider's next slot
		}
		check(got.interval == want && got.ramp, "a limit paces, from a guess, ramping")
	case limits && !l.exact && h.slotted.After(l.cutAt):
		by := cutBy
		if l.ramp {
			by = rampCut
		}
		check(math.Abs(float64(before)*by-float64(got.interval)) <= 1, "a 429 to a send slotted since the last cut cuts a learned rate")
		check(got.cutAt.Equal(now) && !got.ramp, "and ends the ramp")
	case limits:
		check(got.interval == before, "a 429 to a send slotted before the last cut does not cut")
	case h.ok && l.interval > 0 && !l.exact:
		check(got.interval <= before && got.interval >= minInterval, "a success grows a learned rate")
	default:
		check(got.interval == before, "nothing said, nothing changed")
	}
	if limits {
		check(got.limitedAt.Equal(now), "a limit is remembered")
	}
	if got.interval > 0 {
		check(got.interval >= minInterval, "never faster than minInterval")
	}
}

// checkHold holds the hold and the schedule to their rules.
func checkHold(check func(bool, string), now time.Time, l lane, h heard, got lane) {
	check(!got.until.Before(l.until), "forward only")
	word := l.until
	if h.hasAsk {
		word = later(word, now.Add(h.ask))
		if h.ask > h.askRes {
			check(!got.until.Before(now.Add(h.ask)), "an ask past its resolution holds all of it")
		}
	}
	if h.hasReset {
		from := now // a reset runs from the send
		if !h.sent.IsZero() && h.sent.Before(now) {
			from = h.sent
		}
		word = later(word, from.Add(h.reset))
		if h.reset > h.resetRes {
			check(!got.until.Before(from.Add(h.reset-h.resetRes)), "a reset holds until the limit may be back")
		}
	}
	cut := got.cutAt.Equal(now) && !l.cutAt.Equal(now) && l.interval > 0 // arming sets cutAt too, with no pause
	holds := h.hasAsk && h.ask > h.askRes || h.hasReset && h.reset > h.resetRes
	if !holds && !cut {
		check(got.until.Equal(l.until), "an ask within its resolution holds nobody else")
	}
	if cut {
		word = later(word, now.Add(cutPause*got.interval)) // the pause after a cut
		check(!got.until.Before(now.Add(cutPause*got.interval)), "a cut pauses the key some slots")
	}
	check(!got.until.After(word), "never past the provider's word")

	// The sends already waiting past the old hold move on by what the hold
	// grew; nobody else moves.
	from := later(l.until, now)
	var shift time.Duration
	if l.next.After(from) && got.until.After(from) {
		shift = got.until.Sub(from)
	}
	check(got.shifted-l.shifted == shift, "a hold moves the waiting sends on by what it grew")
	check(got.next.Equal(l.next.Add(shift)), "hearing gives no slot: the schedule moves only with the hold")
}

// TestLaneSlots: slots are given first come first served, each interval
// after the last, never before the hold; a slot given back reopens only
// when it was the last; retries go first; an idle lane makes nobody wait.
func TestLaneSlots(t *testing.T) {
	now := epoch
	for _, tc := range []struct {
		name      string
		l         lane
		wantFirst time.Duration
	}{
		{"free", lane{}, 0},
		{"paced", lane{interval: 10 * time.Millisecond}, 0},
		{"paced exactly", lane{interval: 10 * time.Millisecond, exact: true}, 0},
		{"queued exactly", lane{next: now.Add(50 * time.Millisecond), interval: 10 * time.Millisecond, exact: true}, 50 * time.Millisecond},
		{"held", lane{until: now.Add(time.Second), interval: 10 * time.Millisecond}, time.Second},
		{"queued", lane{next: now.Add(50 * time.Millisecond), interval: 10 * time.Millisecond}, 50 * time.Millisecond},
		{"queued behind a hold", lane{until: now.Add(time.Second), next: now.Add(2 * time.Second), interval: time.Millisecond}, 2 * time.Second},
		{"held, not paced", lane{until: now.Add(time.Second)}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.l
			var (
				waits []time.Duration
				tks   []ticket
			)
			for range 4 {
				w := l.wait(now, false)
				waits = append(waits, w)
				var tk ticket
				l, tk = l.take(now, w, false)
				tks = append(tks, tk)
			}
			for i, w := range waits {
				assert.Equal(t, tc.wantFirst+time.Duration(i)*tc.l.interval, w, "slot %d", i)
			}
			// The last slot given back reopens; an earlier one does not.
			back := l.untake(tks[3])
			assert.Equal(t, waits[3], back.wait(now, false))
			assert.Equal(t, l, l.untake(tks[1]), "a hole before later slots stays a hole")

			checkRetriesFirst(t, now, l, tks)
		})
	}
	l := lane{until: now, next: now, interval: time.Second, limitedAt: now.Add(-quietAfter)}
	assert.True(t, l.idle(now))
	assert.Zero(t, l.wait(now, false))
	for _, busy := range []lane{
		{until: now.Add(1), limitedAt: now.Add(-time.Hour)},
		{next: now.Add(1), limitedAt: now.Add(-time.Hour)},
		{limitedAt: now.Add(-quietAfter + 1)},
	} {
		assert.False(t, busy.idle(now), "%+v", busy)
	}
}

// checkRetriesFirst: with sends waiting on l (their tickets tks), a retry,
// exact rate or learned, takes the first slot of the schedule at or after
// now, never before the hold; each send waiting goes one slot later, and the
// schedule too, so the provider sees no send more; a second retry goes an
// interval after the first, and neither is pushed by the other.
func checkRetriesFirst(t *testing.T, now time.Time, l lane, tks []ticket) {
	t.Helper()
	queued := l.next.After(now)
	head := later(now, l.until)
	if queued && l.interval > 0 {
		head = later(l.next.Add(-l.next.Sub(now)/l.interval*l.interval), l.until)
	}
	rw := l.wait(now, true)
	if !queued {
		assert.Equal(t, l.wait(now, false), rw, "nobody waits: a retry waits as any send")
		return
	}
	assert.Equal(t, head.Sub(now), rw, "the retry takes the head of the schedule")
	after, rtk := l.take(now, rw, true)
	assert.Equal(t, l.wait(now, false)+l.interval, after.wait(now, false), "the schedule moves one slot on")
	more, _ := after.pushed(tks[2])
	assert.Equal(t, l.interval, more, "a send already waiting goes one slot later")
	rw2 := after.wait(now, true)
	assert.Equal(t, rw+l.interval, rw2, "a second retry goes an interval after the first")
	after2, rtk2 := after.take(now, rw2, true)
	more, _ = after2.pushed(rtk)
	assert.Zero(t, more, "a retry is not pushed by the retry after it")
	more, _ = after2.pushed(rtk2)
	assert.Zero(t, more, "nor by itself")
	more, _ = after2.pushed(tks[2])
	assert.Equal(t, 2*l.interval, more, "the send waiting goes a slot later for each retry")
}
