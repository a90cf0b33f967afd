package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callerEndCase is a row of TestCallerEndIsTheCause: the caller's context
// (its deadline on the kit's clock unless cancel is set), and what the base
// does on each try (from 1) once that context ended, or makes it end.
type callerEndCase struct {
	name       string
	deadline   time.Duration // on the kit's clock; 0: none
	cancel     error         // the caller cancels with this cause during its last try; nil: it does not
	opts       []Option
	tries      int // the last try is the one the caller's context ends during; those before it answer 503
	answer     func(r *http.Request) error
	wantErr    error // what errors.Is finds: the caller's ctx.Err()
	wantTries  int
	wantReason Outcome // of the *Error; Done with wantBare for a first try's error, returned as it is
	wantBare   bool
}

// errOwn is a try's own context's Err, as a base that answers ctx.Err() gives it.
func errOwn(r *http.Request) error { return r.Context().Err() }

// causeOwn is a try's own context's Cause, as net/http and the kit's Hang
// give it.
func causeOwn(r *http.Request) error { return context.Cause(r.Context()) }

var errMine = errors.New("the caller's own cause")

var callerEndCases = []callerEndCase{
	{name: "a retry answers its own context's Err after the caller's deadline", deadline: time.Second, tries: 2, answer: errOwn,
		wantErr: context.DeadlineExceeded, wantTries: 2, wantReason: Done},
	{name: "a retry answers its own context's Cause after the caller's deadline", deadline: time.Second, tries: 2, answer: causeOwn,
		wantErr: context.DeadlineExceeded, wantTries: 2, wantReason: Done},
	{name: "a first try under WithTryTimeout answers its own context's Err after the caller's deadline", deadline: time.Second,
		opts: []Option{WithTryTimeout(time.Minute)}, tries: 1, answer: errOwn,
		wantErr: context.DeadlineExceeded, wantTries: 1, wantBare: true},
	{name: "the try timeout and then the caller's deadline pass before the base answers its context's Err", deadline: 2 * time.Second,
		opts: []Option{WithTryTimeout(time.Second)}, tries: 1, answer: errOwn,
		wantErr: context.DeadlineExceeded, wantTries: 1, wantBare: true},
	{name: "the try timeout and then the caller's deadline pass before the base answers its context's Cause", deadline: 2 * time.Second,
		opts: []Option{WithTryTimeout(time.Second)}, tries: 1, answer: causeOwn,
		wantErr: context.DeadlineExceeded, wantTries: 1, wantBare: true},
	{name: "a retry under WithTryTimeout: both pass before the base answers", deadline: 2 * time.Second,
		opts: []Option{WithTryTimeout(time.Second)}, tries: 2, answer: errOwn,
		wantErr: context.DeadlineExceeded, wantTries: 2, wantReason: Done},
	{name: "the caller cancels during a retry: Canceled, no timeout", cancel: context.Canceled, tries: 2, answer: errOwn,
		wantErr: context.Canceled, wantTries: 2, wantReason: Done},
	{name: "the caller cancels with a cause of its own during a retry: its ctx.Err(), Canceled", cancel: errMine, tries: 2, answer: causeOwn,
		wantErr: context.Canceled, wantTries: 2, wantReason: Done},
}

// TestCallerEndIsTheCause: when the caller's context has ended, the cause
// of what comes back is the caller's ctx.Err(), never the error of a
// context the transport made for a try (a retry's, a try timeout's), so
// errors.Is(err, context.DeadlineExceeded), os.IsTimeout and
// (*Error).Timeout answer as they would without the transport (R9). The
// deadlines are the kit's (retryhttptest.Clock.WithTimeout), whose Err is
// their own: a context derived from one reports context.Canceled when it
// passes, as table-driven tests of users' code meet it.
func TestCallerEndIsTheCause(t *testing.T) {
	for _, tc := range callerEndCases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tc.deadline > 0 {
				var stop context.CancelFunc
				ctx, stop = clk.WithTimeout(ctx, tc.deadline)
				defer stop()
			}
			var tries int
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				tries++
				if tries < tc.tries {
					return respond(http.StatusServiceUnavailable, ""), nil
				}
				if tc.cancel != nil {
					cancel(tc.cancel)
				} else {
					clk.Add(5 * time.Second) // past the deadline (and any try timeout)
				}
				require.Error(t, ctx.Err(), "the caller's context, before the base answers")
				return nil, tc.answer(r)
			})
			tr := New(base, append([]Option{WithClock(clk), WithBackoff(noJitter)}, tc.opts...)...)
			req := newRequest(t, ctx, http.MethodPost, "https://api.example.com/v1/chat", []byte(`{}`))

			resp, err := (&http.Client{Transport: tr}).Do(req)
			require.Nil(t, resp)
			require.Error(t, err)
			assert.Equal(t, tc.wantTries, tries, "tries")
			timeout := errors.Is(tc.wantErr, context.DeadlineExceeded)
			assert.ErrorIs(t, err, tc.wantErr, "the caller's ctx.Err(): %v", ctx.Err())
			assert.Equal(t, timeout, errors.Is(err, context.DeadlineExceeded), "errors.Is(%v, context.DeadlineExceeded)", err)
			assert.Equal(t, !timeout, errors.Is(err, context.Canceled), "errors.Is(%v, context.Canceled)", err)
			assert.Equal(t, timeout, os.IsTimeout(err), "os.IsTimeout(%v)", err)
			var e *Error
			if tc.wantBare {
				assert.False(t, errors.As(err, &e), "a first try's error, returned as it is: %v", err)
				return
			}
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.wantReason, e.Reason)
			assert.Equal(t, timeout, e.Timeout(), "(*Error).Timeout() of %v", e)
			assert.Equal(t, ctx.Err(), e.Err, "the cause: the caller's ctx.Err()")
		})
	}
}
