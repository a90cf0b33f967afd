package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 29, item 8: EstimateTokens never panics, whatever GetBody and the
// copy do, and never holds a call: the read of the copy is bounded in real
// time (bodyTimeout) and by the caller's context.

// hostileCopy is a GetBody copy that hands out its bytes, then panics,
// returns a count that cannot be, or blocks until release is closed; its
// Close may panic. It records whether it was closed, and whether that was
// under a Read.
type hostileCopy struct {
	r          *bytes.Reader
	then       string // "panic", "count", "negative", "block", or "" (EOF)
	closePanic bool
	release    chan struct{}
	reading    atomic.Bool
	closed     atomic.Bool
	underRead  atomic.Bool
}

func (c *hostileCopy) Read(p []byte) (int, error) {
	c.reading.Store(true)
	defer c.reading.Store(false)
	if c.r.Len() > 0 {
		return c.r.Read(p)
	}
	switch c.then {
	case "panic":
		panic("a copy's Read panicked")
	case "count":
		return len(p) + 1, nil
	case "negative":
		return -1, nil
	case "block":
		<-c.release
		for i := range p { // what a read abandoned writes, when it returns
			p[i] = '9'
		}
		return len(p), io.EOF
	}
	return 0, io.EOF
}

func (c *hostileCopy) Close() error {
	c.underRead.Store(c.reading.Load())
	c.closed.Store(true)
	if c.closePanic {
		panic("a copy's Close panicked")
	}
	return nil
}

// TestHardeningEstimateTokensNeverPanics: GetBody or the copy's Read
// panicking, a Read's count out of range, a Close that panics: the
// estimate counts what it has (the bytes before, and the cap they ask
// for), or ContentLength.
func TestHardeningEstimateTokensNeverPanics(t *testing.T) {
	const head = `{"max_tokens":10,"x":` // 21 bytes: 6 tokens, and a cap of 10
	for _, tc := range []struct {
		name       string
		getBody    string // "panic", "error", or "" (hostileCopy)
		then       string
		closePanic bool
		length     int64
		want       int64
	}{
		{"GetBody panics, length known", "panic", "", false, 100, 25},
		{"GetBody panics, length unknown", "panic", "", false, -1, 0},
		{"GetBody fails", "error", "", false, 100, 25},
		{"Read panics after the head, length known", "", "panic", false, 100, 25 + 10},
		{"Read panics after the head, length unknown", "", "panic", false, -1, 6 + 10},
		{"a count past the buffer", "", "count", false, -1, 6 + 10},
		{"a negative count", "", "negative", false, 100, 25 + 10},
		{"Close panics", "", "", true, -1, 6 + 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var copies []*hostileCopy
			req := sent(t, tc.length, func() (io.ReadCloser, error) {
				switch tc.getBody {
				case "panic":
					panic("GetBody panicked")
				case "error":
					return nil, errors.New("no copy")
				}
				c := &hostileCopy{r: bytes.NewReader([]byte(head)), then: tc.then, closePanic: tc.closePanic}
				copies = append(copies, c)
				return c, nil
			})
			var got int64
			require.NotPanics(t, func() { got = EstimateTokens(req) })
			assert.Equal(t, tc.want, got)
			for _, c := range copies {
				assert.True(t, c.closed.Load(), "the copy is closed")
			}
		})
	}
}

// TestHardeningEstimateTokensIsBounded: a copy whose Read blocks is given
// up after bodyTimeout, or when the caller's context ends if that is
// sooner (the estimate is then ContentLength's); the copy is closed once
// its Read returns, never under it, and what that Read writes then never
// reaches another estimate (its buffer is not back in the pool before).
func TestHardeningEstimateTokensIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // 0: none
		want     time.Duration
	}{
		{"bodyTimeout", 0, bodyTimeout},
		{"the caller's context, sooner", 10 * time.Millisecond, 10 * time.Millisecond},
		{"bodyTimeout, sooner than the context", time.Second, bodyTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				blocked := &hostileCopy{r: bytes.NewReader(nil), then: "block", release: make(chan struct{})}
				req := sent(t, 400, func() (io.ReadCloser, error) { return blocked, nil })
				if tc.deadline > 0 {
					ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
					defer cancel()
					req = req.WithContext(ctx)
				}
				start := time.Now()
				assert.Equal(t, int64(100), EstimateTokens(req), "ContentLength's")
				assert.Equal(t, tc.want, time.Since(start), "given up then")
				assert.False(t, blocked.closed.Load(), "not closed under its Read")

				// Another estimate while the abandoned Read writes its
				// buffer: its own bytes, its own result.
				body := `{"max_tokens":7}`
				next := &gate{r: bytes.NewReader([]byte(body)), release: blocked.release}
				req2 := sent(t, -1, func() (io.ReadCloser, error) { return next, nil })
				assert.Equal(t, int64(4+7), EstimateTokens(req2))
				synctest.Wait()
				assert.True(t, blocked.closed.Load(), "closed once its Read returned")
				assert.False(t, blocked.underRead.Load(), "never under it")
			})
		})
	}
}

// gate is a copy whose Read reads its bytes, then lets an abandoned Read
// go on and waits until it has written its buffer, before it returns.
type gate struct {
	r       *bytes.Reader
	release chan struct{}
}

func (g *gate) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if g.release != nil {
		close(g.release)
		g.release = nil
		synctest.Wait() // the abandoned Read has written its buffer and returned
	}
	return n, err
}

func (g *gate) Close() error { return nil }

// TestHardeningEstimateHoldsNoCall: on a token-paced key, a call with a
// 200 ms deadline whose GetBody copy never answers is sent within its
// deadline (the issue: it ran past 3 s).
func TestHardeningEstimateHoldsNoCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		arm := retryhttptest.Status(429, append(openAITokens("100000", "99000", "1s"), "Retry-After-Ms", "1")...)
		first := New(retryhttptest.NewScript(arm), WithCooldown(cd), WithMaxRetries(0))
		resp, err := first.RoundTrip(postOf(context.Background(), 4000))
		require.NoError(t, err)
		resp.Body.Close()

		script := retryhttptest.NewScript(okReply)
		tr := New(script, WithCooldown(cd))
		blocked := &hostileCopy{r: bytes.NewReader(nil), then: "block", release: make(chan struct{})}
		defer close(blocked.release)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", origin+"/v1/chat/completions", bytes.NewReader(make([]byte, 400)))
		req.GetBody = func() (io.ReadCloser, error) { return blocked, nil }
		start := time.Now()
		resp, err = tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Less(t, time.Since(start), 200*time.Millisecond, "sent within its deadline")
		assert.Equal(t, 1, script.Len())
	})
}
