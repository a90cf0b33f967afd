package retryhttp

import "time"

// lane is what a Cooldown knows of one key (R17): until when every call
// holds, and, once the provider has limited the key, the spacing of the
// sends that follow. Its methods are pure functions of the lane, the instant
// and what an answer said, so that a test can exhaust them with no clock, as
// decide's (pace_test.go).
//
// Sends are admitted by rate, not by answers: each gets the next slot of a
// schedule (GCRA's theoretical arrival time, as golang.org/x/time/rate
// reserves), first come first served, so that a provider that answers slowly
// paces nobody slower, and every wait is known when it starts: it can be
// fitted to the deadline and the Budget, and charged, like any other.
type lane struct {
	until    time.Time     // no send before this: the provider's ask, less its resolution
	next     time.Time     // the earliest slot not yet given
	interval time.Duration // between two sends; 0 until the provider limits the key
	// exact: interval is the provider's own rate, read from its counts at a
	// resolution fine enough to trust; otherwise it is learned from its 429s.
	exact bool
	// ramp: the learned rate grows fast until its first cut (TCP's slow
	// start), so that pacing that begins from a guess finds the rate soon.
	ramp bool
	// cutAt is when the learned rate was last cut (or armed): a 429 that
	// answers a send made before it says nothing of the rate since.
	cutAt     time.Time
	limitedAt time.Time // of the last 429 heard, or of the lane's arming
	// ahead counts the retries let in before the sends already waiting for
	// a slot: each pushes them one slot on (see wait); retryNext is the
	// earliest slot the next retry may take, so that retries let in at
	// once go an interval apart.
	ahead     int64
	retryNext time.Time
	// shifted is how far the schedule has moved on for holds armed while
	// sends waited (see holdTo).
	shifted time.Duration
}

// A ticket is a send's slot: mark is the schedule's end after it was given
// (for untake), ahead and shifted the lane's counts when it last looked
// (see pushed).
type ticket struct {
	mark    time.Time
	ahead   int64
	shifted time.Duration
	retry   bool // a retry's: the retries let in after it go after it
}

// heard is what one answer says about its key.
type heard struct {
	limited bool // a 429, or a try the Classifier calls Throttled
	ok      bool // a success (status below 400): the rate may grow
	// slotted is when the try's slot was given, and sent when it went;
	// both zero for a try that was not paced (a first try in free flow).
	slotted, sent time.Time

	// The server's ask on a failed try (R5, R19), and its resolution: what
	// the true wait may be shorter by (1 s for whole seconds).
	ask, askRes time.Duration
	hasAsk      bool
	// The reset of an exhausted limit (R18), and its resolution.
	reset, resetRes time.Duration
	hasReset        bool
	// The provider's request counts, when it sends them.
	counts counts
}

// counts are a provider's request limit as it states it: limit requests a
// window, remaining of them left, the window full again in window (at
// resolution res).
type counts struct {
	limit, remaining int64
	window, res      time.Duration
	ok               bool
}

// The pacing policy's constants. They are a policy a human can read in a
// diff, chosen with the goodput benchmark (bench/, RESULTS.md).
const (
	// firstInterval paces a key limited by a provider that says nothing of
	// its rate: 200 sends a second, from which ramp grows it and the first
	// 429s halve it: a guess too fast costs a few 429s, one too slow a
	// queue of calls slotted at it.
	firstInterval = 5 * time.Millisecond
	// minInterval bounds the rate a lane may grow to: 10,000 sends a second.
	minInterval = 100 * time.Microsecond
	// rampGrow and steadyGrow are what one success takes off the interval
	// of a learned rate: 2% while ramping, 0.05% after the first cut. A
	// ramp of 20% a success (issue 16's first cut) grew 18-fold on the
	// burst a provider's bucket gives after a wait (10 successes at once
	// say nothing of its rate), and took 18 cuts and as many 429s to come
	// down; at 2% the burst moves it 18%, and 80 successes make it 5 times
	// faster.
	rampGrow   = 0.98
	steadyGrow = 0.9995
	// cutBy is what a 429 multiplies a learned interval by (the rate goes
	// down by 15%); while ramping, the rate halves (rampCut), as TCP's slow
	// start does: a ramp overshoots by more. Only a 429 to a send slotted
	// since the last cut cuts: the others were paced at the old rate.
	cutBy    = 1 / 0.85
	rampCut  = 2
	cutPause = 4
	// quietAfter: a lane whose provider has not limited it for this long,
	// and on which nobody waits, goes; the key flows freely again.
	quietAfter = 5 * time.Second
	// exactSlack paces a provider's own rate 2% under it: sends do not
	// leave in perfect step, and a bucket kept near empty by a client at
	// its exact rate answers every early one with a 429.
	exactSlack = 1.02
	// exactRes: counts whose window is at least this many resolutions long
	// are trusted as the rate; a coarser window only bounds it.
	exactRes = 8
)

// hear returns the lane after an answer at now. The hold only ever moves
// forward (R17). An ask longer than the resolution of its form holds every
// call for all of it (Retry-After: 20 holds every call 20 s; the server
// always wins); an ask within one resolution (a whole-second Retry-After: 1,
// which may mean a millisecond) holds only the call that got it (decide
// makes it wait all of it), and the others go at the paced rate. An
// exhausted limit's reset holds every call until the limit may be back (a
// whole-second reset: until a second before it), and in its last
// resolution the calls go paced.
func (l lane) hear(now time.Time, h heard) lane {
	if h.hasAsk && !h.limited && h.ask > 0 {
		h.limited = true // a 503 with Retry-After limits the key as a 429 does
	}
	if h.hasAsk && h.ask > h.askRes {
		l = l.holdTo(now, now.Add(h.ask))
	}
	if h.hasReset {
		// A reset is not an ask: it says when the limit is whole again,
		// rounded up to its resolution. Every call holds until the limit
		// may be back; in the last resolution, the others go paced (a
		// reset within its resolution holds nobody: holdTo ignores a hold
		// that ends before it starts).
		// A provider counts a request when it admits it: the reset of
		// an answer that took 30 s to write is 30 s old. It runs from
		// the send, when the Cooldown knows it, else from the answer.
		from := now
		if !h.sent.IsZero() && h.sent.Before(now) {
			from = h.sent
		}
		l = l.holdTo(now, from.Add(h.reset-h.resetRes))
	}
	if c := h.counts; c.ok && c.limit > c.remaining && c.window > 0 {
		iv := c.window / time.Duration(c.limit-c.remaining)
		switch {
		case c.res*exactRes <= c.window:
			l.interval, l.exact, l.ramp = max(time.Duration(float64(iv)*exactSlack), minInterval), true, false
		case l.interval > iv:
			// A coarse window is rounded up: the rate is at least this.
			l.interval = max(iv, minInterval)
		}
	}
	if h.limited {
		l.limitedAt = now
		switch {
		case l.interval == 0:
			l.interval, l.ramp, l.cutAt = firstInterval, true, now
			if h.hasAsk && h.askRes <= time.Millisecond && h.ask > 0 {
				// A fine ask is the time to the provider's next slot: a
				// better first guess of the rate than none.
				l.interval = min(max(h.ask, minInterval), firstInterval)
			}
		case !l.exact && h.slotted.After(l.cutAt):
			by := cutBy
			if l.ramp {
				by = rampCut
			}
			l.interval = time.Duration(float64(l.interval) * by)
			l.ramp, l.cutAt = false, now
			// The sends slotted at the old rate would go on emptying the
			// provider's bucket: a pause of a few slots lets it refill.
			l = l.holdTo(now, now.Add(cutPause*l.interval))
		}
		return l
	}
	if h.ok && l.interval > 0 && !l.exact {
		grow := steadyGrow
		if l.ramp {
			grow = rampGrow
		}
		l.interval = max(time.Duration(float64(l.interval)*grow), minInterval)
	}
	return l
}

// holdTo moves the hold on to u (forward only). The sends already given a
// slot past the old hold keep their order and their spacing: the schedule
// moves on by what the hold grew. Left in place, every send whose slot the
// hold covers would go the instant it ends, a burst the provider answers
// with 429s and a hold more (the goodput benchmark saw 26 to 43 429s in a
// quarter second, again and again). A provider whole again after a hold
// could take some of them at once, but letting it (its limit's worth)
// measured no better than this.
func (l lane) holdTo(now, u time.Time) lane {
	from := later(l.until, now)
	if !u.After(from) {
		return l
	}
	if l.next.After(from) {
		d := u.Sub(from)
		l.next = l.next.Add(d)
		l.shifted += d
	}
	l.until = u
	return l
}

// wait is how long a send that asks at now waits for its slot: the hold,
// then the schedule, first come first served. A retry goes before the sends
// already waiting (its call has waited its turn once, and the oldest call
// goes first): it takes the first slot of the schedule, and each send
// waiting goes one slot later (pushed), so that the provider sees the rate
// the lane keeps, exact or learned, and no send more. Retries let in at
// once go an interval apart, in the order they came. (Issue 16's first cut
// let a retry at an exact rate go the moment the hold ended and queued it
// at a learned one: 54 calls refused at once came back at once, or a second
// behind the calls that came after them.)
func (l lane) wait(now time.Time, retry bool) time.Duration {
	if retry && l.next.After(now) {
		return l.retrySlot(now).Sub(now)
	}
	return max(later(l.until, l.next).Sub(now), 0)
}

// retrySlot is the slot of a retry at now while sends wait: the first slot
// of the schedule at or after now, no earlier than the hold or than an
// interval after the retry let in before it.
func (l lane) retrySlot(now time.Time) time.Time {
	head := now
	if l.interval > 0 {
		head = l.next.Add(-l.next.Sub(now) / l.interval * l.interval)
	}
	return later(later(head, l.until), l.retryNext)
}

// take gives the slot of a send that asked at now and waits w, and returns
// the lane with the schedule moved past it, and the send's ticket.
func (l lane) take(now time.Time, w time.Duration, retry bool) (lane, ticket) {
	at := now.Add(w)
	if retry {
		if l.next.After(at) {
			l.ahead++ // let in before the sends already waiting
		}
		l.retryNext = at.Add(l.interval)
	}
	l.next = later(l.next, at).Add(l.interval)
	return l, ticket{mark: l.next, ahead: l.ahead, shifted: l.shifted, retry: retry}
}

// pushed is how much longer the send holding t waits: one slot for each
// retry let in before it since it last looked, and what the schedule moved
// on for holds armed since; and its ticket since.
func (l lane) pushed(t ticket) (time.Duration, ticket) {
	n, d := l.ahead-t.ahead, l.shifted-t.shifted
	if t.retry {
		n = 0
	}
	t.ahead, t.shifted = l.ahead, l.shifted
	return time.Duration(n)*l.interval + d, t
}

// untake gives back the slot of the send holding t, which did not go (its
// call ended, or a wait did not fit), when no later slot was given since:
// a hole before other sends' slots is simply a send less.
func (l lane) untake(t ticket) lane {
	if l.next.Equal(t.mark) {
		l.next = l.next.Add(-l.interval)
	}
	return l
}

// idle reports whether the lane has nothing left to say at now: no hold, no
// send waiting for a slot, and no 429 for quietAfter. Its key may go.
func (l lane) idle(now time.Time) bool {
	return !now.Before(l.until) && !now.Before(l.next) && now.Sub(l.limitedAt) >= quietAfter
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
