package main

import (
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// fakeClock is a clock.Mock that jumps over every wait the transport starts
// and records it, so no test sleeps for real to wait out a backoff or a
// Retry-After. The transport waits only through Timer (R7's fit and the
// Observer's Elapsed read Now, which stands still during a try).
type fakeClock struct {
	*clock.Mock
	mu    sync.Mutex
	waits []time.Duration
}

func newFakeClock() *fakeClock {
	m := clock.NewMock()
	m.Set(time.Now().Truncate(time.Second))
	return &fakeClock{Mock: m}
}

// Timer is how the transport waits between tries: the wait is recorded and
// the clock moved past it at once, so the timer has fired when it returns.
func (c *fakeClock) Timer(d time.Duration) *clock.Timer {
	t := c.Mock.Timer(d)
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	c.Mock.Add(d)
	return t
}

// Waits returns every wait the transport started, in order.
func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

// cancelClock is a clock.Mock on which every wait is cut short: Timer
// calls cancel and never fires, as if the user gave up during the wait.
type cancelClock struct {
	*clock.Mock
	cancel func()
}

func (c *cancelClock) Timer(d time.Duration) *clock.Timer {
	c.cancel()
	return c.Mock.Timer(d)
}
