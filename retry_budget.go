package retryhttp

import (
	"context"
	"sync/atomic"
	"time"
)

// PublicTierMaxWait is the total time the requests of one public-tier user
// turn may spend waiting between tries.
const PublicTierMaxWait = 10 * time.Second

// A Budget caps the total time that every request carrying it (WithBudget)
// spends waiting between tries: one user turn may make several calls, some at
// once, and they all draw on one Budget (R8). A wait is charged before it is
// slept, atomically, so concurrent requests never overspend; a wait cut short
// by cancellation gives back what it did not use.
//
// A request that carries a Budget also fails fast on a rate-limit signal: see
// ErrRateLimited. The zero Budget, like NewBudget(0), has no room. A Budget
// is safe for concurrent use by multiple goroutines.
type Budget struct {
	max    time.Duration
	waited atomic.Int64 // nanoseconds charged, less what was given back
	err    atomic.Pointer[Error]
}

// NewBudget returns a Budget that allows maxWait of waiting in all. A maxWait
// <= 0 has no room: every wait is OutOfTime.
func NewBudget(maxWait time.Duration) *Budget {
	return &Budget{max: max(maxWait, 0)}
}

type budgetKey struct{}

// WithBudget returns a copy of ctx that carries b. WithBudget(ctx, nil)
// returns ctx unchanged.
func WithBudget(ctx context.Context, b *Budget) context.Context {
	if b == nil {
		return ctx
	}
	return context.WithValue(ctx, budgetKey{}, b)
}

// BudgetFrom returns the Budget ctx carries, or nil when it carries none
// (or ctx is nil).
func BudgetFrom(ctx context.Context) *Budget {
	if ctx == nil {
		return nil
	}
	b, _ := ctx.Value(budgetKey{}).(*Budget)
	return b
}

// Waited returns the total wait charged so far, less what was given back.
// A nil Budget has waited 0.
func (b *Budget) Waited() time.Duration {
	if b == nil {
		return 0
	}
	return time.Duration(b.waited.Load())
}

// Left returns the wait still allowed: maxWait - Waited, never below 0.
// A nil Budget has 0 left.
func (b *Budget) Left() time.Duration {
	if b == nil {
		return 0
	}
	return max(b.max-b.Waited(), 0)
}

// Err returns the first *Error wrapping ErrRateLimited that the transport
// returned to a call carrying b, and nil until then (or for a nil Budget).
// Some SDKs replace the transport's error with their own text, so that
// errors.Is cannot find ErrRateLimited in what they return; after such a
// call the Budget can still tell "busy" from "down", and RetryAfter says
// for how long (R20).
func (b *Budget) Err() error {
	if b == nil {
		return nil
	}
	if e := b.err.Load(); e != nil {
		return e
	}
	return nil // a nil *Error in an error interface would not be nil
}

// noteErr keeps e if it is the first rate-limit error of b (R20).
func (b *Budget) noteErr(e *Error) {
	b.err.CompareAndSwap(nil, e)
}

// reserve charges wait when it is shorter than both limit and what is left
// (R7), in one atomic step so that two requests racing for the last of the
// budget cannot both win.
func (b *Budget) reserve(wait, limit time.Duration) bool {
	if wait >= limit {
		return false
	}
	for {
		waited := b.waited.Load()
		if wait >= b.max-time.Duration(waited) {
			return false
		}
		if reserveRace != nil {
			reserveRace()
		}
		if b.waited.CompareAndSwap(waited, waited+int64(wait)) {
			return true
		}
	}
}

// reserveRace, when a test sets it, runs between reading the Budget and
// charging it: a test holds every caller there at once to prove that the
// charge is one atomic step.
var reserveRace func()

// refund gives back the part of a charged wait that was not slept.
func (b *Budget) refund(unused time.Duration) {
	if unused > 0 {
		b.waited.Add(-int64(unused))
	}
}
