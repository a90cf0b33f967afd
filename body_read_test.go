package retryhttp

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probeBody is a response body that says whether the transport used it as
// io.ReadCloser allows: its first Read gives prefix, then Read panics (with
// a value that must not leak) or stalls until release is closed or its
// request's context ends (as a net/http body's does). A Close that comes
// while a Read is in progress is recorded: io.ReadCloser does not promise
// that is safe, and net/http's gzip reader blocks on it.
type probeBody struct {
	prefix  string
	panics  bool
	ctx     context.Context
	release <-chan struct{}

	off     int // of prefix, given; only Read touches it
	reading atomic.Int32
	raced   atomic.Bool
	closes  atomic.Int32
	closed  chan struct{}
}

func newProbeBody(ctx context.Context, release <-chan struct{}, prefix string, panics bool) *probeBody {
	return &probeBody{prefix: prefix, panics: panics, ctx: ctx, release: release, closed: make(chan struct{})}
}

func (b *probeBody) Read(p []byte) (int, error) {
	b.reading.Add(1)
	defer b.reading.Add(-1)
	if b.off < len(b.prefix) {
		n := copy(p, b.prefix[b.off:])
		b.off += n
		return n, nil
	}
	if b.panics {
		panic("sk-live-0123456789: a secret in the panic's value")
	}
	select {
	case <-b.release:
		return 0, io.EOF
	case <-b.ctx.Done():
		return 0, context.Cause(b.ctx)
	}
}

func (b *probeBody) Close() error {
	if b.reading.Load() > 0 {
		b.raced.Store(true)
	}
	if b.closes.Add(1) == 1 {
		close(b.closed)
	}
	return nil
}

// waitClosed waits, at most 5 s of real time, for b to be closed.
func (b *probeBody) waitClosed(t *testing.T, msg string) {
	t.Helper()
	select {
	case <-b.closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the body was not closed 5 s later", msg)
	}
}

// probeCase is a call whose try number probe answers status with a
// probeBody; the tries before it get an empty 503, those after it a 200.
type probeCase struct {
	name       string
	probe      int // the try whose body is the probe: 1, on the caller's context; 2, a retry's own
	status     int
	json       bool
	retryAfter string
	budget     bool
	maxRetries int
	tryTimeout bool // WithTryTimeout: the first try too has a context of its own
	handedBack bool // the probe's response comes back to the caller
	wantLimit  bool // the call fails with ErrRateLimited
}

// probeBase answers the tries of c, with body as the probe, and records each
// try's context.
func probeBase(c probeCase, body func(ctx context.Context) *probeBody) (http.RoundTripper, func() []context.Context) {
	var (
		mu   sync.Mutex
		ctxs []context.Context
	)
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		ctxs = append(ctxs, r.Context())
		try := len(ctxs)
		mu.Unlock()
		switch {
		case try < c.probe:
			return respond(http.StatusServiceUnavailable, ""), nil
		case try > c.probe:
			return respond(http.StatusOK, "ok"), nil
		}
		var kv []string
		if c.retryAfter != "" {
			kv = append(kv, "Retry-After", c.retryAfter)
		}
		if c.json {
			kv = append(kv, "Content-Type", "application/json")
		}
		resp := respond(c.status, "", kv...)
		resp.Body, resp.ContentLength = body(r.Context()), -1
		return resp, nil
	})
	return base, func() []context.Context {
		mu.Lock()
		defer mu.Unlock()
		return append([]context.Context(nil), ctxs...)
	}
}

// runProbe makes the call of c and checks how it ended; it returns the
// response handed back, if any, for the caller's part.
func runProbe(t *testing.T, c probeCase, base http.RoundTripper) *http.Response {
	t.Helper()
	opts := []Option{WithClock(newClock()), WithBackoff(noJitter), WithMaxRetries(c.maxRetries)}
	if c.tryTimeout {
		opts = append(opts, WithTryTimeout(2*time.Second)) // never reached: the kit's Clock moves only by the waits
	}
	tr := New(base, opts...)
	ctx := context.Background()
	if c.budget {
		ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
	}
	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, "https://api.example.com/v1/chat", []byte(`{"q":1}`)))
	switch {
	case c.wantLimit:
		require.Nil(t, resp)
		assert.ErrorIs(t, err, ErrRateLimited)
		return nil
	case c.handedBack:
		require.NoError(t, err)
		require.Equal(t, c.status, resp.StatusCode, "the probe's response, handed back")
		return resp
	}
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the try after the probe's")
	resp.Body.Close()
	return nil
}

var probeCases = []probeCase{
	{name: "first try: a 503 drained before the retry", probe: 1, status: 503, maxRetries: 2},
	{name: "first try: a JSON 429 read ahead, then retried", probe: 1, status: 429, json: true, maxRetries: 2},
	{name: "first try: a public-tier 429 fails fast", probe: 1, status: 429, retryAfter: "30", budget: true, maxRetries: 2, wantLimit: true},
	{name: "first try: a JSON 429 handed back, closed by the caller", probe: 1, status: 429, json: true, maxRetries: 0, handedBack: true},
	{name: "first try, try timeout: a 503 drained before the retry", probe: 1, status: 503, maxRetries: 2, tryTimeout: true},
	{name: "first try, try timeout: a JSON 429 handed back, closed by the caller", probe: 1, status: 429, json: true, maxRetries: 0, tryTimeout: true, handedBack: true},
	{name: "retry: a 503 drained before the next", probe: 2, status: 503, maxRetries: 2},
	{name: "retry: a JSON 429 read ahead, then retried", probe: 2, status: 429, json: true, maxRetries: 2},
	{name: "retry: a public-tier 429 fails fast", probe: 2, status: 429, retryAfter: "30", budget: true, maxRetries: 2, wantLimit: true},
	{name: "retry: a JSON 429 handed back, closed by the caller", probe: 2, status: 429, json: true, maxRetries: 1, handedBack: true},
}

// The transport never closes a body while its own read of it goes on
// (issue 17). A read it gives up on is ended by the try's own context,
// which every retry has (and, with WithTryTimeout, the first try too), and
// the read ahead then closes the body; on the first try, sent with the
// caller's context, the read ahead closes the body when its Read returns
// (here, when the test releases it), and RoundTrip does not wait for that.
func TestBodyNeverClosedDuringRead(t *testing.T) {
	for _, c := range probeCases {
		t.Run(c.name, func(t *testing.T) {
			ttNoLeak(t)
			release := make(chan struct{})
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(release) }) }) // a failing test leaves nothing stalled
			var body *probeBody
			base, ctxs := probeBase(c, func(ctx context.Context) *probeBody {
				body = newProbeBody(ctx, release, `{"err":`, false)
				return body
			})

			resp := runProbe(t, c, base)
			if resp != nil {
				b := make([]byte, 7)
				_, err := io.ReadFull(resp.Body, b)
				require.NoError(t, err, "the bytes the server sent before it stalled")
				assert.Equal(t, `{"err":`, string(b))
				assert.NoError(t, resp.Body.Close())
			}
			ownContext := c.probe > 1 || c.tryTimeout
			if !ownContext {
				select {
				case <-body.closed:
					t.Error("the first try's body was closed while its read went on (or before it ended)")
				default:
				}
				once.Do(func() { close(release) }) // the server sends the rest: the read ends
			}
			body.waitClosed(t, "the probe")
			assert.False(t, body.raced.Load(), "the body was closed during a Read")
			assert.EqualValues(t, 1, body.closes.Load(), "times the body was closed")
			if ownContext {
				ctx := ctxs()[c.probe-1]
				assert.ErrorIs(t, context.Cause(ctx), context.Canceled, "the try's own context: ended when its body was given up")
			}
			waitReadsEnded(t)
		})
	}
}

// A body whose Read panics does not take the process down from the read
// ahead's goroutine: the read ends with an error that does not hold the
// panic's value, the body is closed, and a body handed back gives the
// caller the bytes that came, then that error.
func TestBodyReadPanics(t *testing.T) {
	for _, c := range probeCases {
		if c.retryAfter != "" {
			continue // the same paths as the other 429s
		}
		t.Run(c.name, func(t *testing.T) {
			ttNoLeak(t)
			var body *probeBody
			base, _ := probeBase(c, func(ctx context.Context) *probeBody {
				body = newProbeBody(ctx, nil, `{"err":`, true)
				return body
			})

			resp := runProbe(t, c, base)
			if resp != nil {
				got, err := io.ReadAll(resp.Body)
				assert.Equal(t, `{"err":`, string(got), "the bytes that came before the panic")
				assert.ErrorIs(t, err, errBodyReadPanicked)
				assert.EqualError(t, err, "retryhttp: response body Read panicked")
				assert.NotContains(t, err.Error(), "sk-live", "the panic's value")
				assert.NoError(t, resp.Body.Close())
			}
			body.waitClosed(t, "the panicking body")
			waitReadsEnded(t)
			assert.False(t, body.raced.Load(), "the body was closed during a Read")
			assert.EqualValues(t, 1, body.closes.Load(), "times the body was closed")
		})
	}
}
