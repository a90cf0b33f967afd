package retryhttp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// piecesBody is a response body that comes in pieces of at most n bytes a
// Read, as from the network, in sizes that need not divide 64 KiB. It counts
// what was read from it, and closed is closed when it is.
type piecesBody struct {
	r      io.Reader
	n      int
	read   atomic.Int64
	closed chan struct{}
}

func (b *piecesBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p[:min(len(p), b.n)])
	b.read.Add(int64(n))
	return n, err
}

func (b *piecesBody) Close() error { close(b.closed); return nil }

// TestDrainBoundInPieces: before a retry the transport reads at most 64 KiB
// of a failed body of unknown length, drained (R10) or read ahead for its
// JSON error (R19), whatever the pieces it comes in.
func TestDrainBoundInPieces(t *testing.T) {
	for _, json := range []bool{false, true} {
		for _, piece := range []int{1, 3000, 4095, 10 << 10} {
			name := map[bool]string{false: "drained", true: "JSON, read ahead"}[json]
			t.Run(name+", pieces of "+itoa(piece), func(t *testing.T) {
				body := &piecesBody{r: strings.NewReader(strings.Repeat(" ", 100<<10)), n: piece, closed: make(chan struct{})}
				base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
					if ResendCount(r.Context()) > 0 {
						return respond(200, "ok"), nil
					}
					resp := respond(503, "")
					resp.Body, resp.ContentLength = body, -1
					if json {
						resp.Header.Set("Content-Type", "application/json")
					}
					return resp, nil
				})
				tr := New(base, WithClock(newClock()), WithBackoff(noJitter))
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil))
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, 200, resp.StatusCode, "the retry's answer")
				select {
				case <-body.closed:
				case <-time.After(5 * time.Second):
					t.Fatal("the failed body was never closed")
				}
				assert.LessOrEqual(t, body.read.Load(), int64(64<<10), "bytes of the failed body read")
			})
		}
	}
}

// stallingBody is a response body whose Read blocks until release is closed.
type stallingBody struct{ release chan struct{} }

func (b stallingBody) Read([]byte) (int, error) { <-b.release; return 0, io.EOF }
func (b stallingBody) Close() error             { return nil }

// TestDrainOverlapsTheWait: the wait runs from the failed response (R4) and
// the drain overlaps it, abandoned when the wait ends, but given 1 ms all the
// same (R10). Here the transport's clock moves on between the response and
// the wait (the Observer's while): the drain of a body that stalls gets what
// is left of the wait, at least 1 ms and at most 40 ms of real time, and the
// sleep after it only the rest, so the retry goes the wait after the
// response. Run in a bubble, the real time is exact.
func TestDrainOverlapsTheWait(t *testing.T) {
	const wait = 400 * time.Millisecond // noJitter's first
	for _, tc := range []struct {
		name      string
		left      time.Duration // of the wait, when the transport comes to it
		wantDrain time.Duration // real time
	}{
		{"half a millisecond left: 1 ms", 500 * time.Microsecond, reuseGrace},
		{"10 ms left: 10 ms", 10 * time.Millisecond, 10 * time.Millisecond},
		{"300 ms left: 40 ms", 300 * time.Millisecond, bodyTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := newClock()
				release := make(chan struct{})
				var tries []time.Time // on clk
				base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
					tries = append(tries, clk.Now())
					if len(tries) > 1 {
						return respond(200, "ok"), nil
					}
					resp := respond(503, "")
					resp.Body, resp.ContentLength = stallingBody{release}, -1
					return resp, nil
				})
				tr := New(base, WithClock(clk), WithBackoff(noJitter), WithObserver(func(_ context.Context, a Attempt) {
					if a.Outcome == Retrying {
						clk.Add(a.Wait - tc.left)
					}
				}))
				start := time.Now()
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil))
				drained := time.Since(start)
				close(release) // the abandoned read ends; its goroutine closes the body
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tc.wantDrain, drained, "real time on the stalled body")
				assertWaits(t, []time.Duration{tc.left}, clk.Waits(), "the sleep: the rest of the wait")
				require.Len(t, tries, 2)
				assert.Equal(t, wait, tries[1].Sub(tries[0]), "the retry, the wait after the response")
			})
		})
	}
}
