package retryhttp

import (
	"context"
	"errors"
	"strings"
	"time"
)

// ErrRateLimited is the cause (Error.Err) when a request that carries a
// Budget meets a rate limit it cannot wait out (R8): its last try was
// Throttled, or the server asked for a wait longer than what was left. Test
// for it with errors.Is and tell the user the service is busy; Error.RetryAfter
// says how long the server asked them to wait.
var ErrRateLimited = errors.New("retryhttp: rate limited")

// ErrUnavailable is the cause (Error.Err), or matches it with errors.Is,
// when a Cooldown's circuit (WithCircuit) refuses a call because its key's
// provider is down (R25): the call sent nothing, or stopped before a retry.
// Fall back to another model or provider at once: the circuit lets one
// probe through after its Open time, and the calls after a sign of life.
var ErrUnavailable = errors.New("retryhttp: provider unavailable")

// Error is returned when the transport gives up without a response to hand
// back: the last try failed with a transport error, the caller's context
// ended during a wait, or a Budget-carrying request was rate limited. It
// wraps its cause, so errors.Is(err, syscall.ECONNREFUSED),
// errors.Is(err, context.Canceled) and errors.Is(err, ErrRateLimited) hold.
type Error struct {
	Tries      int           // tries sent
	Waited     time.Duration // time spent waiting between tries
	Status     int           // last response status; 0 when there was none
	RetryAfter time.Duration // last wait the server asked for; 0 when none
	Reason     Outcome       // why the transport stopped
	Err        error         // the cause: last try's error, ErrRateLimited, or the context's error
}

// Error describes why the transport stopped, then its cause. It holds no
// URL, header or body.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("retryhttp: ")
	b.WriteString(e.Reason.String())
	b.WriteString(" after ")
	b.WriteString(itoa(max(e.Tries, 0)))
	if e.Tries == 1 {
		b.WriteString(" try")
	} else {
		b.WriteString(" tries")
	}
	if e.Waited > 0 {
		b.WriteString(", waited ")
		b.WriteString(e.Waited.String())
	}
	if e.Status > 0 {
		b.WriteString(", status ")
		b.WriteString(itoa(e.Status))
	}
	if e.RetryAfter > 0 {
		b.WriteString(", retry-after ")
		b.WriteString(e.RetryAfter.String())
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "retryhttp: "))
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnavailable and e's Reason is
// Unavailable: a call the circuit stopped after a try keeps that try's
// error as its cause, and still tells "down" (R25).
func (e *Error) Is(target error) bool {
	return target == ErrUnavailable && e.Reason == Unavailable
}

// Timeout reports whether the cause is a timeout: a net.Error whose Timeout
// is true (a dial or ResponseHeaderTimeout), a try that ran out of
// WithTryTimeout, or the caller's deadline (context.DeadlineExceeded). So
// os.IsTimeout(err) and (*url.Error).Timeout(), which ask only the error
// right inside them, answer through the transport as they do without it
// (R9). That holds for a deadline whose Err is its own (a test clock's):
// once the caller's context has ended, the cause is its ctx.Err(), never
// what a try's own context made of it.
func (e *Error) Timeout() bool {
	if e == nil || e.Err == nil {
		return false
	}
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}
