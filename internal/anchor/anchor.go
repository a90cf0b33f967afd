// Package anchor moves a clock's instants to where a store.Record can hold
// them. A Record's times are whole microseconds after the Unix epoch and
// below 2^53 µs (store.Record.Valid), but a clock may give any instant:
// github.com/benbjohnson/clock's Mock starts at the epoch itself, and a
// test may set one before it or centuries ahead. Every instant a clock
// gives must work (RULES.md R17).
//
// A Clock reads a clock and moves what it gives by a whole number of
// seconds: by nothing for every instant from 1971 to 2200 (a real clock,
// retryhttptest.Clock, a testing/synctest bubble), else by what puts the
// instant read at 2000-01-01. An instant that would leave that range moves
// the anchor again: a clock stepped by decades starts over, and what was
// kept on the old anchor reads as out of range (as nothing).
package anchor

import (
	"sync/atomic"
	"time"
)

// The range an anchored instant stays in, in Unix seconds, and where an
// instant outside it is put.
var (
	lo = time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	at = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
)

// A Clock is a clock anchored in the range a Record holds. The zero Clock
// reads time.Now. A Clock is safe for concurrent use by multiple
// goroutines.
type Clock struct {
	read   func() time.Time
	offset atomic.Int64 // seconds added to what read gives
}

// New returns a Clock that reads read (nil: time.Now).
func New(read func() time.Time) *Clock {
	return &Clock{read: read}
}

// Now returns the clock's instant, anchored.
func (c *Clock) Now() time.Time {
	read := c.read
	if read == nil {
		read = time.Now
	}
	return c.On(read())
}

// On returns t anchored: t itself when the anchor is where it was set for
// real clocks, else t moved by it. A t the anchor would put out of range
// moves the anchor.
func (c *Clock) On(t time.Time) time.Time {
	off := c.offset.Load()
	if s := t.Unix() + off; lo <= s && s < hi {
		return move(t, off)
	}
	off = 0
	if s := t.Unix(); s < lo || s >= hi {
		off = at - s
	}
	c.offset.Store(off)
	return move(t, off)
}

// Off returns an anchored instant back on the clock it was read from.
func (c *Clock) Off(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return move(t, -c.offset.Load())
}

// move adds off seconds to t, exactly whatever the years between (a
// time.Duration spans only 292 of them).
func move(t time.Time, off int64) time.Time {
	if off == 0 {
		return t
	}
	return time.Unix(t.Unix()+off, int64(t.Nanosecond())).UTC()
}
