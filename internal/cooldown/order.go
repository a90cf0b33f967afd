package cooldown

import (
	"slices"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// Who goes first when a key's sends wait (R27). Across priorities the
// order is the lanes' (store.Apply's levels): a send of a higher one takes
// the first free slot before the sends waiting of lower ones, and pushes
// them a slot each. Within one priority, among the process's own sends of
// a key, the send whose call must end sooner goes first, then retries,
// then the order they came: a send slotted behind sends of its priority
// that may wait longer trades slots with them (the fleet's schedule keeps
// its slots; who holds which moves). Every send moved back is woken when
// its call has an end, so that one that no longer fits ends at once.

// An Order is what places a send among the sends of its key waiting.
type Order struct {
	Retry    bool          // a retry (R17): before its priority's first tries
	Priority int8          // -1 Background, 0 Normal, 1 Interactive
	Left     time.Duration // until the call must end (its deadline, its Budget); <= 0: no end
}

// A waiter is a send of this process waiting for its slot: its ticket
// lives here, under its key's lock, while it waits (a trade moves it), and
// goes back to its Pass when it sends or gives its slot back. A waiter is
// made only for a send that waits, so a send that goes at once costs no
// allocation.
type waiter struct {
	tk      ticket
	order   Order
	mustEnd time.Time // zero: none
	arrival uint64
}

// before reports whether w's send goes before v's among sends of one
// priority: the one whose call must end sooner, then a retry, then the
// first to come.
func (w *waiter) before(v *waiter) bool {
	switch {
	case !w.mustEnd.Equal(v.mustEnd):
		return !w.mustEnd.IsZero() && (v.mustEnd.IsZero() || w.mustEnd.Before(v.mustEnd))
	case w.order.Retry != v.order.Retry:
		return w.order.Retry
	}
	return w.arrival < v.arrival
}

// queue makes p's send, slotted to wait, one of its key's waiters: it
// trades slots with the waiters of its priority slotted before it that go
// after it (their calls end later), but for one due now, and wakes those
// moved back; traded reports a trade. k.mu is held.
func (k *KeyState) queue(p *Pass, now time.Time) (traded bool) {
	w := &waiter{tk: p.tk, order: p.order, arrival: k.arrivals}
	if p.order.Left > 0 {
		w.mustEnd = now.Add(p.order.Left)
	}
	k.arrivals++
	p.w = w
	due := k.dueOf(now, &w.tk)
	group := []*waiter{w}
	for _, v := range k.waiting {
		if v.order.Priority != w.order.Priority || v.tk.charged != w.tk.charged || !w.before(v) {
			continue
		}
		// A slot due now is its send's, going now (store.Apply's rule too).
		if d := k.dueOf(now, &v.tk); d.After(now) && d.Before(due) {
			group = append(group, v)
		}
	}
	k.waiting = append(k.waiting, w)
	if len(group) == 1 {
		return false
	}
	places := make([]place, len(group))
	for i, v := range group {
		places[i] = v.tk.place
	}
	slices.SortStableFunc(places, func(a, b place) int { return a.goes().Compare(b.goes()) })
	slices.SortStableFunc(group, func(a, b *waiter) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	for i, v := range group {
		v.tk.place = places[i]
		v.tk.mark = [numLanes]time.Time{} // a traded slot's mark is another send's schedule end
	}
	k.wakePushed()
	return true
}

// dueOf is when tk's send goes by its slot, brought up to date at now (the
// holds aside: they are the same for every send of its lanes). k.mu is
// held.
func (k *KeyState) dueOf(now time.Time, tk *ticket) time.Time {
	var due time.Time
	for l := range numLanes {
		if tk.charged.Has(l) {
			s := k.state.Lane(l)
			d, _ := k.refreshDue(l, now, tk, &s)
			due = later(due, d)
		}
	}
	return due
}

// unqueue takes w out of its key's waiters. k.mu is held.
func (k *KeyState) unqueue(w *waiter) {
	if i := slices.Index(k.waiting, w); i >= 0 {
		k.waiting = slices.Delete(k.waiting, i, i+1)
	}
}

// wokenPushed is what wakes a send waiting whose call has an end: closed
// when what wakes every send does (wakeAll), and when a send is moved back
// (a send of a higher priority let in before it, a trade), so that one that
// no longer fits ends at once. k.mu is held.
func (k *KeyState) wokenPushed() <-chan struct{} {
	if k.wakePush == nil {
		k.wakePush = make(chan struct{})
	}
	return k.wakePush
}

// wakePushed wakes the sends waiting whose calls have an end. k.mu is
// held.
func (k *KeyState) wakePushed() {
	if k.wakePush != nil {
		close(k.wakePush)
		k.wakePush = nil
	}
}

// pushMarks is what moves a lane's sends waiting back (R27): its pushes,
// and its floor's fixed slot.
type pushMarks [numLanes]struct {
	pushes [store.NumLevels - 1]time.Duration
	fixed  time.Time
}

// pushesOf is r's pushMarks.
func pushesOf(r *store.Record) (m pushMarks) {
	for l := range min(len(r.Lanes), int(numLanes)) {
		m[l].pushes, m[l].fixed = r.Lanes[l].Pushes, r.Lanes[l].Fixed
	}
	return m
}

// notePushes wakes the sends waiting whose calls have an end when the
// state's pushes moved from was (a send of a higher priority let in before
// sends waiting, of this process or another). k.mu is held.
func (k *KeyState) notePushes(was *pushMarks) {
	if k.wakePush != nil && pushesOf(&k.state.Record) != *was {
		k.wakePushed()
	}
}
