package retryhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tokens (R23) through the transport.

// openAITokens is an OpenAI answer's token counts: limit tokens a bucket,
// remaining left, full again in reset.
func openAITokens(limit, remaining, reset string) []string {
	return []string{"X-Ratelimit-Limit-Tokens", limit, "X-Ratelimit-Remaining-Tokens", remaining, "X-Ratelimit-Reset-Tokens", reset}
}

// tokens429 is OpenAI's 429 for the limit named ("tokens" or "requests").
func tokens429(limit string) retryhttptest.Reply {
	return retryhttptest.Reply{Status: 429, Header: http.Header{"Content-Type": {"application/json"}},
		Body: `{"error":{"message":"Rate limit reached for gpt-4o on ` + limit + ` per min","type":"` + limit + `","code":"rate_limit_exceeded"}}`}
}

// postOf is a POST to origin of a body of n bytes (n/4 tokens), with GetBody.
func postOf(ctx context.Context, n int) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, "POST", origin+"/v1/chat/completions", bytes.NewReader(bytes.Repeat([]byte("x"), n)))
	return req
}

// TestCooldownA429HitsItsLimitOnly: a 429 the body puts on tokens paces
// the token lane and never the request lane, and the other way round (R23).
func TestCooldownA429HitsItsLimitOnly(t *testing.T) {
	for _, tc := range []struct {
		limit     string
		hit, miss laneID
	}{{"tokens", laneTokens, laneRequests}, {"requests", laneRequests, laneTokens}} {
		t.Run(tc.limit, func(t *testing.T) {
			clk := newClock()
			cd := NewCooldown(nil)
			tr := New(retryhttptest.NewScript(tokens429(tc.limit), okReply).WithClock(clk), WithClock(clk), WithCooldown(cd))
			resp, err := tr.RoundTrip(postOf(context.Background(), 4000))
			require.NoError(t, err)
			resp.Body.Close()
			require.NotNil(t, cd.entry(origin))
			st := cd.stateOf(origin)
			assert.Positive(t, st.Lane(tc.hit).Per, "the lane it hit is paced")
			assert.Zero(t, st.Lane(tc.miss).Per, "the other is not")
			assert.False(t, st.Lane(tc.miss).Limited.After(time.Time{}), "nor limited")
		})
	}
}

// TestCooldownRequestTooLarge: OpenAI's "Request too large ... on tokens
// per min" (a call asking for more than the whole limit) can never succeed:
// handed back at once, never retried, even with a Budget (R23), and
// ParseErrorBody reports it as Exhausted.
func TestCooldownRequestTooLarge(t *testing.T) {
	body := `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 40000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	assert.True(t, ParseErrorBody([]byte(body)).Exhausted)
	for _, budget := range []bool{false, true} {
		clk := newClock()
		script := retryhttptest.NewScript(retryhttptest.Reply{Status: 429, Header: http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}}, Body: body}, okReply).WithClock(clk)
		tr := New(script, WithClock(clk), WithCooldown(NewCooldown(nil)))
		ctx := context.Background()
		if budget {
			ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
		}
		resp, err := tr.RoundTrip(postOf(ctx, 100))
		require.NoError(t, err, "handed back, not ErrRateLimited (budget %v)", budget)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 429, resp.StatusCode)
		assert.Equal(t, body, string(got), "whole")
		assert.Equal(t, 1, script.Len(), "never retried")
		assert.Empty(t, clk.Waits())
	}
}

// tokenPaced is a Transport over script whose Cooldown paces origin's
// token lane by OpenAI's counts: a bucket of 1,000 tokens refilling in a
// second, empty.
func tokenPaced(t *testing.T, clk *retryhttptest.Clock, script *retryhttptest.Script, opts ...Option) *Transport {
	t.Helper()
	cd := NewCooldown(nil)
	arm := retryhttptest.Status(429, append(openAITokens("1000", "0", "1s"), "Retry-After-Ms", "1")...)
	first := New(retryhttptest.NewScript(arm).WithClock(clk), WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	resp, err := first.RoundTrip(postOf(context.Background(), 4000))
	require.NoError(t, err)
	resp.Body.Close()
	return New(script, append([]Option{WithClock(clk), WithCooldown(cd)}, opts...)...)
}

// TestCooldownTokenWaits: a send waits until the provider's tokens cover
// its cost ("remaining < cost" refuses, not "remaining == 0"); the wait is
// a Cooldown wait (R17): charged to the Budget, reported in Held, logged
// when a second or more, and one that does not fit sends nothing.
func TestCooldownTokenWaits(t *testing.T) {
	t.Run("remaining below the cost waits for the rest", func(t *testing.T) {
		clk := newClock()
		var held []time.Duration
		script := retryhttptest.NewScript(retryhttptest.Status(200, openAITokens("1000", "0", "1s")...)).WithClock(clk)
		tr := tokenPaced(t, clk, script, WithObserver(func(_ context.Context, a Attempt) { held = append(held, a.Held) }))
		resp, err := tr.RoundTrip(postOf(context.Background(), 2000)) // 500 tokens
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, held, 1)
		assert.InDelta(t, float64(510*time.Millisecond), float64(held[0]), float64(20*time.Millisecond), "500 of the 1,000 refilled (paced 2% under)")
	})
	t.Run("a wait that does not fit sends nothing", func(t *testing.T) {
		clk := newClock()
		script := retryhttptest.NewScript(okReply).WithClock(clk)
		tr := tokenPaced(t, clk, script)
		ctx, cancel := clk.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := tr.RoundTrip(postOf(ctx, 2000))
		require.ErrorIs(t, err, ErrRateLimited)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, OutOfTime, e.Reason)
		assert.Zero(t, script.Len(), "nothing sent")
	})
	t.Run("charged to the Budget and logged", func(t *testing.T) {
		clk := newClock()
		log, logs := logSink()
		script := retryhttptest.NewScript(okReply).WithClock(clk)
		tr := tokenPaced(t, clk, script, WithLogger(log))
		b := NewBudget(PublicTierMaxWait)
		resp, err := tr.RoundTrip(postOf(WithBudget(context.Background(), b), 6000)) // 1,500 tokens: over the whole bucket
		require.NoError(t, err)
		resp.Body.Close()
		assert.InDelta(t, float64(1020*time.Millisecond), float64(b.Waited()), float64(20*time.Millisecond), "until the bucket is full: a cost over it goes alone then")
		assert.Equal(t, 1, logs.FilterMessage(msgHolding).Len(), "a wait of a second is logged")
	})
}

// TestCooldownTokensOfTheCaller: WithTokens says what a call costs,
// instead of its estimate.
func TestCooldownTokensOfTheCaller(t *testing.T) {
	clk := newClock()
	var held []time.Duration
	script := retryhttptest.NewScript(okReply).WithClock(clk)
	tr := tokenPaced(t, clk, script, WithObserver(func(_ context.Context, a Attempt) { held = append(held, a.Held) }))
	resp, err := tr.RoundTrip(postOf(WithTokens(context.Background(), 250), 40000)) // estimated 10,000
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, held, 1)
	assert.InDelta(t, float64(255*time.Millisecond), float64(held[0]), float64(20*time.Millisecond), "250 tokens' wait")
}

// countingBody counts its reads, for a test that nothing reads it.
type countingBody struct {
	io.Reader
	reads *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) { b.reads.Add(1); return b.Reader.Read(p) }
func (b countingBody) Close() error               { return nil }

// TestCooldownEstimatesOnlyForTokenLanes: a call is estimated (its GetBody
// copy read) only for a key whose token lane is paced or held: never for a
// key that is not watched (R16), nor for one paced by requests only.
func TestCooldownEstimatesOnlyForTokenLanes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		arm       func(*Cooldown, time.Time)
		estimated bool
	}{
		{"a key not watched", func(*Cooldown, time.Time) {}, false},
		{"a key paced by requests only", func(cd *Cooldown, now time.Time) { paceAt(cd, now, time.Millisecond) }, false},
		{"a key whose token lane is held", func(cd *Cooldown, now time.Time) {
			e := cd.watch(origin, cd.on(now))
			cd.apply(e, store.Op{Kind: store.OpHold, Lane: laneTokens, For: time.Millisecond})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			cd := NewCooldown(nil)
			tr := New(retryhttptest.NewScript(okReply).WithClock(clk), WithClock(clk), WithCooldown(cd))
			tc.arm(cd, clk.Now())
			var copies atomic.Int64
			req, _ := http.NewRequest("POST", origin+"/v1", strings.NewReader("prompt"))
			req.GetBody = func() (io.ReadCloser, error) {
				copies.Add(1)
				return countingBody{strings.NewReader("prompt"), &atomic.Int64{}}, nil
			}
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.estimated, copies.Load() > 0, "GetBody called for an estimate")
		})
	}
}
