package retryhttptest

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// wall is the real clock behind what the Clock cannot fake: timers whose Stop must
// work (a *clock.Timer can only be made by package clock), tickers, and
// functions due now.
var wall = clock.New()

// forever is how long a hidden real timer waits: it never fires; it is there
// so that Stop works and says who stopped it first.
const forever = time.Duration(math.MaxInt64)

// interruptGrace is the real time after which a wait that an AfterFunc
// interrupted goes on to its end, when the waiting call did not stop it. It
// is long enough that a call whose context the function ended always sees
// the context first (see Timer), and it is paid only in that rare case.
var interruptGrace = time.Second // a var only so that tests can shorten it

// Clock is a clock.Clock on which waiting takes no time, for tests of code
// that uses the transport: give it to retryhttp.WithClock (and to
// Script.WithClock, so that requests are stamped on it). It never sleeps and
// starts no goroutine (but in the rare case of an interrupted wait that goes
// on, below).
//
// Each Timer(d) the transport takes (a backoff, a server's Retry-After, a
// Cooldown hold: every wait between or before tries) moves the clock on by
// exactly d at once, records d in Waits, and returns a timer that has
// already fired. A function given to AfterFunc (the transport's per-try
// timeout) runs only when the clock's time reaches its instant: through a
// wait, an Add, or a Hang reply of a Script on this clock; it runs on the
// goroutine that moved the clock, and Stop keeps it from running.
//
// If such a function falls due within a wait, the wait stops at its instant
// and the function runs there: when it ends the waiting call's context (a
// test that cancels "one second into the wait"), the call sees the
// cancellation at that instant, with exactly the rest of the wait unused. If
// the call's context is still alive, the rest of the wait passes after one
// second of real time.
//
// The rest of the clock.Clock interface: Now, Since and Until read the
// clock. Sleep(d) and After(d) are waits like Timer(d): they move the clock
// on by d at once and are recorded in Waits. WithDeadline and WithTimeout
// return a context whose Deadline is on this clock and which ends, with
// context.DeadlineExceeded, when the clock reaches it (a context derived from
// it with context.WithCancel then reports context.Canceled, its
// context.Cause DeadlineExceeded). What is real time: Tick and Ticker are
// the real clock's; AfterFunc(d, f) with d <= 0 runs f at once in its own
// goroutine, as time.AfterFunc does; Reset on a timer of this clock re-arms
// a hidden real timer and never fires on this clock (the transport does not
// use it).
//
// A Clock is safe for concurrent use by multiple goroutines, which share its
// one time, but it is made for one call at a time. The clock never goes
// back, and each wait moves it at once: two calls that start a one-second
// wait at the very same instant move it by one second, but calls whose waits
// begin one after the other (a Cooldown pacing many calls, each waiting for
// its slot) see each other's waits added up, not overlapped. To test many
// concurrent calls in time, run them in a testing/synctest bubble with the
// transport's default clock (no WithClock): there every goroutine's waits
// overlap exactly as in real time. The zero Clock is at the zero Time; use
// NewClock.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waits   []time.Duration
	pending []*due // AfterFunc functions not yet run, by instant then order of arrival
	seq     uint64
}

// due is a function given to AfterFunc. Its hidden real timer tells whether
// the owner has stopped it: whoever stops the timer first wins, so a function
// runs if and only if its owner's Stop returns false.
type due struct {
	at    time.Time
	seq   uint64
	f     func()
	timer *clock.Timer
}

// NewClock returns a Clock set to time.Now() truncated to the second, so that
// real context deadlines compare sensibly with it and HTTP-dates, which have
// whole seconds, line up with its waits.
func NewClock() *Clock {
	return &Clock{now: time.Now().Truncate(time.Second)} // Truncate also drops the monotonic reading
}

// NewClockAt returns a Clock set to start: a test of what the transport does
// whatever the instant (the Unix epoch, where clock.NewMock starts, or one
// before it) starts there. Real context deadlines are then far from it: give
// requests deadlines on the Clock (WithTimeout, WithDeadline).
func NewClockAt(start time.Time) *Clock {
	return &Clock{now: start.Round(0)} // Round(0) drops the monotonic reading
}

// Waits returns every wait taken on the clock, in order: each Timer, After
// and Sleep, with the duration asked. For the transport that is every
// backoff, Retry-After and Cooldown hold, and never a per-try timeout.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

// Add moves the clock on by d, running every AfterFunc function that falls
// due on the way, in order, each at its instant. It is not a wait: it is not
// recorded in Waits. A d <= 0 does nothing.
func (c *Clock) Add(d time.Duration) {
	if d <= 0 {
		return
	}
	c.advance(c.Now().Add(d), false)
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns the time on the clock since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the time on the clock until t.
func (c *Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// Timer is a wait of d: it moves the clock on by d at once, records d in
// Waits, and returns a timer whose C already holds the time at the end of the
// wait. Stop on it returns false, as on a timer that has fired. See the type's
// doc for a wait that an AfterFunc function interrupts.
func (c *Clock) Timer(d time.Duration) *clock.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	end := c.now.Add(max(d, 0))
	c.mu.Unlock()

	ch := make(chan time.Time, 1)
	if c.advance(end, true) {
		// A function ran within the wait and may have ended the waiting call's
		// context. That context must then win the caller's select, so C stays
		// empty: the caller stops this timer, and the clock stays where the
		// function ran (R8 gives back exactly the rest). If nobody stops it,
		// the rest of the wait passes after interruptGrace of real time.
		t := wall.AfterFunc(interruptGrace, func() {
			c.advance(end, false)
			ch <- end
		})
		t.C = ch
		return t
	}
	ch <- end
	t := wall.AfterFunc(forever, func() {})
	t.Stop() // it has fired
	t.C = ch
	return t
}

// After is Timer(d).C: a wait of d, at once.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.Timer(d).C }

// Sleep is a wait of d that returns at once: it moves the clock on by d,
// running the AfterFunc functions due on the way, and records d in Waits.
func (c *Clock) Sleep(d time.Duration) {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	end := c.now.Add(max(d, 0))
	c.mu.Unlock()
	c.advance(end, false)
}

// AfterFunc arranges for f to run when the clock reaches now+d, on the
// goroutine that moves it there; Stop on the returned timer keeps it from
// running and returns true when it had not run. A d <= 0 runs f at once in its
// own goroutine, as time.AfterFunc does.
func (c *Clock) AfterFunc(d time.Duration, f func()) *clock.Timer {
	if d <= 0 {
		return wall.AfterFunc(0, f)
	}
	t := wall.AfterFunc(forever, func() {})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	e := &due{at: c.now.Add(d), seq: c.seq, f: f, timer: t}
	i, _ := slices.BinarySearchFunc(c.pending, e, func(a, b *due) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	c.pending = slices.Insert(c.pending, i, e)
	return t
}

// Tick is the real clock's time.Tick: the transport does not use it.
func (c *Clock) Tick(d time.Duration) <-chan time.Time { return wall.Tick(d) }

// Ticker is the real clock's: the transport does not use it.
func (c *Clock) Ticker(d time.Duration) *clock.Ticker { return wall.Ticker(d) }

// WithTimeout is WithDeadline(parent, c.Now().Add(d)).
func (c *Clock) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return c.WithDeadline(parent, c.Now().Add(d))
}

// WithDeadline returns a copy of parent whose Deadline is d on this clock and
// which ends with context.DeadlineExceeded when the clock reaches d (or at
// once when it is past). When parent's deadline is earlier, it keeps
// parent's.
func (c *Clock) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	inner, cancel := context.WithCancelCause(parent)
	if cur, ok := parent.Deadline(); ok && !cur.After(d) {
		return &deadlineCtx{Context: inner, deadline: cur}, func() { cancel(context.Canceled) }
	}
	ctx := &deadlineCtx{Context: inner, deadline: d}
	wait := c.Until(d)
	if wait <= 0 {
		cancel(context.DeadlineExceeded)
		return ctx, func() { cancel(context.Canceled) }
	}
	t := c.AfterFunc(wait, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// deadlineCtx is a context whose deadline is on a Clock. The embedded context
// carries Done, Value and Cause; only Deadline and Err differ.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// advance moves the clock to end (never back), running each function due on
// the way at its instant, in order, outside the lock so that it may use the
// clock. With stopAtRun it stops right after the first function it runs, the
// clock at that function's instant, and reports true.
func (c *Clock) advance(end time.Time, stopAtRun bool) (ran bool) {
	for {
		e := c.pop(end, true)
		if e == nil {
			return false
		}
		if e.timer.Stop() { // its owner had not stopped it: it is due
			e.f()
			if stopAtRun {
				return true
			}
		}
	}
}

// pop takes the next function due and moves the clock to its instant; nil
// when none is pending or, when bounded, none is due by end (then the clock
// moves to end).
func (c *Clock) pop(end time.Time, bounded bool) *due {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 || bounded && c.pending[0].at.After(end) {
		if bounded && end.After(c.now) {
			c.now = end
		}
		return nil
	}
	e := c.pending[0]
	c.pending[0] = nil
	c.pending = c.pending[1:]
	if e.at.After(c.now) {
		c.now = e.at
	}
	return e
}

// runNext moves the clock to the next function due, whenever that is, and
// runs it unless its owner stopped it. It reports false when none is pending.
func (c *Clock) runNext() bool {
	e := c.pop(time.Time{}, false)
	if e == nil {
		return false
	}
	if e.timer.Stop() {
		e.f()
	}
	return true
}

var _ clock.Clock = (*Clock)(nil)
