package store

import "time"

// The circuit's defaults (R25): Failures and Open of an OpFail that gives
// none.
const (
	DefaultFailures = 5
	DefaultOpen     = time.Second
)

// fail is OpFail (see Apply): the row grows, and opens the circuit when it
// reaches the op's Failures, from two processes at least unless Solo; a
// failed probe opens it again. A row whose last failure is KeepFor old
// starts again: a failure a minute old says nothing of now. It reports
// whether the circuit opened, or the row started: news every process
// must hear, so that each watches the key and its next sign of life ends
// the row (a row is failures in a row across the whole fleet).
func (c *Circuit) fail(now time.Time, op *Op) bool {
	open, failures := op.Open, op.Failures
	if open <= 0 {
		open = DefaultOpen
	}
	if failures <= 0 {
		failures = DefaultFailures
	}
	open = min(span(open), MaxAhead)
	if op.Probe && c.IsOpen() && !c.Probe.IsZero() {
		c.Last = now
		c.Open, c.Probe = now.Add(max(open, time.Microsecond)), time.Time{}
		return true
	}
	if !c.IsOpen() && c.Failures > 0 && !now.Before(c.Last.Add(KeepFor)) {
		c.Failures = 0 // the row's last failure is KeepFor old: it starts again
	}
	started := c.Failures == 0
	if started {
		c.From, c.Many = op.From, false
	} else if op.From != c.From {
		c.Many = true
	}
	if c.Failures < maxInt-1 {
		c.Failures++
	}
	c.Last = now
	if c.IsOpen() || c.Failures < failures || !c.Many && !op.Solo {
		return started
	}
	c.Open, c.Since = now.Add(max(open, time.Microsecond)), now
	return true
}

// alive is OpAlive: the row ends, and an open circuit closes. It reports
// whether the circuit closed.
func (c *Circuit) alive() bool {
	was := c.IsOpen()
	*c = Circuit{}
	return was
}
