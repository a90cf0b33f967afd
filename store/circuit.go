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
// failed probe opens it again. It reports whether the circuit opened.
func (c *Circuit) fail(now time.Time, op *Op) bool {
	open, failures := op.Open, op.Failures
	if open <= 0 {
		open = DefaultOpen
	}
	if failures <= 0 {
		failures = DefaultFailures
	}
	open = min(span(open), MaxAhead)
	c.Last = now
	if op.Probe && c.IsOpen() && !c.Probe.IsZero() {
		c.Open, c.Probe = now.Add(max(open, time.Microsecond)), time.Time{}
		return true
	}
	if c.Failures == 0 {
		c.From, c.Many = op.From, false
	} else if op.From != c.From {
		c.Many = true
	}
	if c.Failures < maxInt-1 {
		c.Failures++
	}
	if c.IsOpen() || c.Failures < failures || !c.Many && !op.Solo {
		return false
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
