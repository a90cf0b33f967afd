package retryhttp

import (
	"context"
	"errors"
	"github.com/benbjohnson/clock"
	"io"
	"net/http"
	"time"
)

// send makes one try. A retry, and every try with a try timeout (R13), runs
// under its own context, cancelled when the returned body is closed or
// abandoned (readAhead: that ends a stalled read without waiting on it), and
// with a try timeout by a timer on the injected clock if the headers are
// late: a stream outlives the timeout.
//
// A try under its own context that fails once the caller's context has
// ended fails with the caller's ctx.Err(), whatever the base says: what it
// says is of the try's context (context.Canceled when the caller's deadline
// passed, or the try timeout's cause), and errors.Is, os.IsTimeout and
// (*Error).Timeout must answer as they would without the transport (R9).
func (t *Transport) send(r *http.Request, retry bool) (*http.Response, error) {
	d := t.cfg.tryTimeout
	if d <= 0 && !retry {
		return checkResult(t.base.RoundTrip(r)) // the first try: the caller's context (R16)
	}
	ctx := r.Context()
	tryCtx, cancel := context.WithCancelCause(ctx)
	var timer *clock.Timer
	if d > 0 {
		timer = t.cfg.clock.AfterFunc(d, func() { cancel(errTryTimedOut) })
	}
	resp, err := checkResult(t.base.RoundTrip(r.WithContext(tryCtx)))
	if timer != nil && !timer.Stop() {
		// The timer fired, even if the headers came in the same instant:
		// the try's context is gone, and with it the body.
		cancel(errTryTimedOut)
		if resp != nil {
			_ = resp.Body.Close()
		}
		if err := ctx.Err(); err != nil {
			return nil, err // the caller's own end, not ours (R2, R9)
		}
		return nil, &tryTimeoutError{d: d}
	}
	if err != nil {
		cancel(nil)
		if err := ctx.Err(); err != nil {
			return nil, err // the caller's, not the try context's (R9)
		}
		return nil, err
	}
	resp.Body = cancelOnClose(resp.Body, cancel)
	return resp, nil
}

// checkResult enforces the RoundTripper contract on the base: exactly one of
// a response and an error (net/http's client does the same).
func checkResult(resp *http.Response, err error) (*http.Response, error) {
	switch {
	case resp != nil && err != nil:
		closeBody(resp.Body)
		return nil, err
	case resp == nil && err == nil:
		return nil, errNilResponse
	case resp != nil && resp.Body == nil:
		resp.Body = http.NoBody // callers may always Close a response's body
	}
	return resp, err
}

var (
	errNilResponse = errors.New("retryhttp: base RoundTripper returned a nil response and a nil error")
	errTryTimedOut = errors.New("retryhttp: try timed out")
)

// tryTimeoutError is a try that ran out of WithTryTimeout. It is a net.Error
// with Timeout() true; it does not match context.DeadlineExceeded, which
// would say the caller's own deadline had passed.
type tryTimeoutError struct{ d time.Duration }

func (e *tryTimeoutError) Error() string {
	return "retryhttp: try timed out after " + e.d.String() + " waiting for response headers"
}
func (e *tryTimeoutError) Timeout() bool   { return true }
func (e *tryTimeoutError) Temporary() bool { return true }

// cancelOnClose wraps a response body so that closing it also ends the try's
// context (R13). A body that is also an io.Writer (101 Switching Protocols)
// stays one.
func cancelOnClose(body io.ReadCloser, cancel context.CancelCauseFunc) io.ReadCloser {
	if rwc, ok := body.(io.ReadWriteCloser); ok {
		return &cancelReadWriteCloser{ReadWriteCloser: rwc, cancel: cancel}
	}
	return &cancelReadCloser{ReadCloser: body, cancel: cancel}
}

type cancelReadCloser struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelReadCloser) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

type cancelReadWriteCloser struct {
	io.ReadWriteCloser
	cancel context.CancelCauseFunc
}

func (b *cancelReadWriteCloser) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel(nil)
	return err
}
