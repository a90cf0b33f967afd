package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// left returns what the request may still wait (the smaller of its deadline
// on the injected clock and its Budget, R7) and, apart, the deadline's share,
// which is all a Budget may reserve (R8).
func (c *call) left() (left, untilDeadline time.Duration) {
	untilDeadline = maxDuration
	if d, ok := c.ctx.Deadline(); ok {
		untilDeadline = d.Sub(c.cfg.clock.Now())
	}
	left = untilDeadline
	if c.budget != nil {
		left = min(left, c.budget.Left())
	}
	return left, untilDeadline
}

// sleep waits d on the injected clock unless the caller's context ends
// first; then it reports how much of d was not slept, for the Budget to get
// back (R8).
func (c *call) sleep(d time.Duration) (unused time.Duration, ok bool) {
	return c.sleepOr(d, nil)
}

// sleepOr is sleep, ended early, with ok true, when wake is closed (a nil
// wake never is).
func (c *call) sleepOr(d time.Duration, wake <-chan struct{}) (unused time.Duration, ok bool) {
	ctx := c.ctx
	if ctx.Err() != nil {
		return d, false
	}
	if d <= 0 {
		return 0, true
	}
	clk := c.cfg.clock
	start := clk.Now()
	timer := clk.Timer(d)
	select {
	case <-timer.C:
		if ctx.Err() != nil {
			// Both were ready: the caller's end wins, so a canceled call
			// never sends another try (R9).
			return max(d-clk.Since(start), 0), false
		}
		return 0, true
	case <-ctx.Done():
		timer.Stop()
		return max(d-clk.Since(start), 0), false
	case <-wake:
		timer.Stop()
		return max(d-clk.Since(start), 0), true
	}
}

// rewindBody returns a fresh copy of req's body for a retry (R10): nil when
// req has no body, ok false when there is none to be had.
func rewindBody(req *http.Request) (body io.ReadCloser, ok bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil || body == nil {
		return nil, false // never send an empty or partial body
	}
	return body, true
}

// discard drains a failed response the caller will not get (at most
// maxDrain) and closes it, so that its connection can be reused (R10). It
// waits for the drain at most bound, in real time, then abandons a body
// that stalls (readAhead.Close ends its read, without waiting for it).
// from is the try the response came from.
func discard(ctx context.Context, resp *http.Response, bound time.Duration, from sentTry) {
	drain(ctx, resp, bound, from, false)
}

// drain is discard, which with keep returns the body when it was read
// whole (its end within maxDrain and bound): the bytes of a response that
// may yet be handed back (a retry that a circuit refuses, R25); nil
// otherwise. Without keep it returns nil.
func drain(ctx context.Context, resp *http.Response, bound time.Duration, from sentTry, keep bool) []byte {
	ra, ok := resp.Body.(*readAhead)
	switch {
	case ok:
		bound = 0 // read ahead before the decision, it has had its bodyTimeout
	case resp.Body == http.NoBody || resp.ContentLength == 0:
		_ = resp.Body.Close() // nothing to drain: no goroutine for it
		if keep {
			return []byte{}
		}
		return nil
	case resp.ContentLength > maxDrain:
		_ = resp.Body.Close() // too long to drain: the connection goes
		return nil
	default:
		ra = startReadAhead(resp.Body, keep, from)
	}
	ra.wait(ctx, bound)
	var whole []byte
	if keep && ra.keep && ra.finished() && errors.Is(ra.err, io.EOF) && ra.off == 0 {
		whole = ra.buf // the goroutine is done with it
		if whole == nil {
			whole = []byte{}
		}
	}
	_ = ra.Close()
	return whole
}
