package retryredis

import (
	"sync"
	"sync/atomic"
	"time"
)

// A breaker skips Redis while it fails (R24: Redis failing is not the
// provider failing, and a call must not pay the bound again and again).
// The rule: failures operations in a row failed → open for coolOff, every
// operation fails at once; then one operation (the probe) tries Redis:
// success closes it, failure opens it for coolOff again. An operation that
// succeeds closes it whenever it ends. Closed, an operation reads two
// atomics and writes nothing unless it fails (R16's habit: shared state
// is not written when nothing changes).
type breaker struct {
	failures int32
	coolOff  time.Duration

	fails     atomic.Int32 // operations failed in a row
	openUntil atomic.Int64 // unix ns; 0: closed
	probing   atomic.Bool  // the probe is out
	mu        sync.Mutex   // serializes opening and closing, so each is reported once
	openedAt  time.Time    // mu is held
}

// A transition is what an outcome changed: reported (logged) once.
type transition uint8

const (
	unchanged transition = iota
	opened
	closed
)

// An outcome is what became of an operation.
type outcome uint8

const (
	succeeded outcome = iota
	failed
	abandoned // the caller's context ended: Redis is not to blame
)

// allow reports whether an operation may try Redis at now, and whether it
// is the probe (it must then report with done).
func (b *breaker) allow(now time.Time) (ok, probe bool) {
	u := b.openUntil.Load()
	if u == 0 {
		return true, false
	}
	if now.UnixNano() < u || !b.probing.CompareAndSwap(false, true) {
		return false, false
	}
	return true, true
}

// done records the outcome of an operation allowed at now, and returns
// what it changed and, when it closed the breaker, how long it was open.
func (b *breaker) done(now time.Time, probe bool, o outcome) (transition, time.Duration) {
	switch o {
	case succeeded:
		if b.fails.Load() != 0 {
			b.fails.Store(0)
		}
		if probe {
			b.probing.Store(false)
		}
		if b.openUntil.Load() == 0 {
			return unchanged, 0
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.openUntil.Load() == 0 {
			return unchanged, 0
		}
		b.openUntil.Store(0)
		return closed, now.Sub(b.openedAt)
	case failed:
		n := b.fails.Add(1)
		if probe {
			b.openUntil.Store(now.Add(b.coolOff).UnixNano())
			b.probing.Store(false)
			return unchanged, 0
		}
		if n < b.failures || b.openUntil.Load() != 0 {
			return unchanged, 0
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.openUntil.Load() != 0 {
			return unchanged, 0
		}
		b.openedAt = now
		b.openUntil.Store(now.Add(b.coolOff).UnixNano())
		return opened, 0
	}
	if probe {
		b.probing.Store(false)
	}
	return unchanged, 0
}

// isOpen reports whether the breaker skips Redis (for tests and polls).
func (b *breaker) isOpen() bool { return b.openUntil.Load() != 0 }
