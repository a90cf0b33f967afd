package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 29, item 1: one call's cost shut a key for centuries. On a token
// lane, a call of an absurd cost that then got no count (a 400, a
// transport error) made the lane owe 292 years; a realistic one, max_tokens
// 1,000,000 on a limit of 1,000 tokens a second, 17 minutes. A lane owes at
// most its whole bucket (store.Lane.Charge: Burst, or store.MaxDebt where
// no bucket is known).

// costlyCall is a request to origin that costs what its name says.
type costlyCall struct {
	name string
	make func(ctx context.Context) *http.Request
}

func costlyCalls() []costlyCall {
	body := func(ctx context.Context, b string) *http.Request {
		req, _ := http.NewRequestWithContext(ctx, "POST", origin+"/v1/chat/completions", bytes.NewReader([]byte(b)))
		return req
	}
	return []costlyCall{
		{"max_tokens 99999999999999999999", func(ctx context.Context) *http.Request {
			return body(ctx, `{"model":"gpt-4o","max_tokens":99999999999999999999}`)
		}},
		{"WithTokens MaxInt64", func(ctx context.Context) *http.Request {
			return body(WithTokens(ctx, math.MaxInt64), `{"model":"gpt-4o"}`)
		}},
		{"ContentLength 1<<62", func(ctx context.Context) *http.Request {
			req := body(ctx, `{"model":"gpt-4o"}`)
			req.ContentLength = 1 << 62
			return req
		}},
		{"max_tokens 1,000,000 (realistic)", func(ctx context.Context) *http.Request {
			return body(ctx, `{"model":"gpt-4o","max_tokens":1000000}`)
		}},
	}
}

// tokenArms are the answers that pace origin's token lane: by OpenAI's
// counts (1,000 tokens a second, a bucket of 60,000 with room), or learned
// from a 429 that names tokens (no bucket known).
var tokenArms = []struct {
	name    string
	replies []retryhttptest.Reply
}{
	{"a bucket stated", []retryhttptest.Reply{retryhttptest.Status(429, append(openAITokens("60000", "59000", "1s"), "Retry-After-Ms", "1")...), okReply}},
	{"no bucket known", []retryhttptest.Reply{tokens429("tokens"), okReply}},
}

// TestHardeningOneCallOwesAtMostTheBucket: after one call of each absurd
// cost, answered by a 400 or a transport error, the next call on the key
// waits at most the lane's whole bucket and goes; over one process, and
// over a store.Local shared with the replica that makes the next call.
func TestHardeningOneCallOwesAtMostTheBucket(t *testing.T) {
	answers := []struct {
		name  string
		reply retryhttptest.Reply
	}{{"400", reply(400)}, {"a transport error", retryhttptest.Fail(syscall.ECONNRESET)}}
	for _, arm := range tokenArms {
		for _, cc := range costlyCalls() {
			for _, answer := range answers {
				for _, shared := range []bool{false, true} {
					name := arm.name + "/" + cc.name + "/" + answer.name + "/" + map[bool]string{false: "one process", true: "a store.Local"}[shared]
					t.Run(name, func(t *testing.T) {
						oweAtMostTheBucket(t, arm.replies, cc, answer.reply, shared)
					})
				}
			}
		}
	}
}

func oweAtMostTheBucket(t *testing.T, arm []retryhttptest.Reply, cc costlyCall, answer retryhttptest.Reply, shared bool) {
	clk := newClock()
	cd, next := NewCooldown(nil), (*Cooldown)(nil)
	if shared {
		local := store.NewLocal(clk.Now)
		cd, next = NewCooldown(nil, WithStore(local)), NewCooldown(nil, WithStore(local))
	} else {
		next = cd
	}
	var held []time.Duration
	trNext := New(retryhttptest.NewScript(okReply).WithClock(clk), WithClock(clk), WithCooldown(next),
		WithObserver(func(_ context.Context, a Attempt) { held = append(held, a.Held) }))
	trArm := New(retryhttptest.NewScript(arm...).WithClock(clk), WithClock(clk), WithCooldown(cd))
	resp, err := trArm.RoundTrip(postOf(context.Background(), 4000))
	require.NoError(t, err)
	resp.Body.Close()
	require.NotNil(t, next.entry(origin), "the replica of the next call watches the key")

	ctx, cancel := clk.WithTimeout(context.Background(), time.Minute)
	trBig := New(retryhttptest.NewScript(answer).WithClock(clk), WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	resp, err = trBig.RoundTrip(cc.make(ctx))
	require.False(t, errors.Is(err, ErrRateLimited), "the costly call itself goes: %v", err)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cancel() // (its deadline must not fall in the next call's wait: the kit's Clock would stop there)

	s := laneOfEntry(next, laneTokens)
	require.Positive(t, s.Per, "the token lane is paced")
	bucket := time.Duration(s.Burst)
	if s.Burst <= 0 {
		bucket = store.MaxDebt
	}
	ctx, cancel = clk.WithTimeout(context.Background(), 2*bucket)
	defer cancel()
	resp, err = trNext.RoundTrip(postOf(ctx, 400)) // 100 tokens
	require.NoError(t, err, "the next call goes: it is no ErrRateLimited for centuries")
	resp.Body.Close()
	require.Len(t, held, 1)
	assert.LessOrEqual(t, held[0], bucket, "it waits at most the whole bucket (%v)", bucket)
}

// laneOfEntry is lane l of origin as cd knows it; a zero Lane when cd
// does not watch it.
func laneOfEntry(cd *Cooldown, l laneID) store.Lane {
	return cd.stateOf(origin).Lane(l)
}
