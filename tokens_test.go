package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tokensURL = "https://api.example.com/v1/chat/completions"

// post is a POST of body as http.NewRequest makes it: ContentLength
// len(body), a GetBody over a bytes.Reader (http.NoBody when body is empty).
func post(t *testing.T, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tokensURL, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	return req
}

// untouchable is a req.Body that fails the test when read or closed:
// estimating a call's cost must never take the bytes the call sends (R23).
type untouchable struct{ t *testing.T }

func (u untouchable) Read([]byte) (int, error) {
	u.t.Error("req.Body was read")
	return 0, errors.New("req.Body was read")
}

func (u untouchable) Close() error {
	u.t.Error("req.Body was closed")
	return nil
}

// copyBody is a GetBody copy that counts what is read of it and whether it
// was closed.
type copyBody struct {
	r      *bytes.Reader
	read   int
	closed bool
}

func (c *copyBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func (c *copyBody) Close() error { c.closed = true; return nil }

// sent is a request whose req.Body must not be touched, with contentLength
// and getBody as given.
func sent(t *testing.T, contentLength int64, getBody func() (io.ReadCloser, error)) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tokensURL, nil)
	require.NoError(t, err)
	req.Body, req.ContentLength, req.GetBody = untouchable{t}, contentLength, getBody
	return req
}

// pad is n bytes of a body that asks for no cap: a JSON string's insides.
func pad(n int) string { return strings.Repeat("a", n) }

// bigBody is a 100 KiB body whose caps are at either end: the first is read,
// the last is past the 64 KiB EstimateTokens reads.
var bigBody = `{"max_tokens":500,"messages":[{"role":"user","content":"` + pad(100<<10) + `"}],"max_completion_tokens":9000}`

func TestEstimateTokens(t *testing.T) {
	getBodyFails := func() (io.ReadCloser, error) { return nil, errors.New("no copy") }
	for _, tt := range []struct {
		name string
		req  func(t *testing.T) *http.Request
		want int64
	}{
		{"nil request", func(*testing.T) *http.Request { return nil }, 0},
		{"no body", func(t *testing.T) *http.Request {
			r, err := http.NewRequest(http.MethodGet, tokensURL, nil)
			require.NoError(t, err)
			return r
		}, 0},
		{"nil Body", func(t *testing.T) *http.Request {
			r := post(t, "abcd")
			r.Body = nil
			return r
		}, 0},
		{"http.NoBody, whatever ContentLength and GetBody say", func(t *testing.T) *http.Request {
			r := post(t, `{"max_tokens":100}`)
			r.Body, r.ContentLength = http.NoBody, 400
			return r
		}, 0},
		{"0 bytes", func(t *testing.T) *http.Request { return post(t, "") }, 0},
		{"1 byte", func(t *testing.T) *http.Request { return post(t, "a") }, 1},
		{"3 bytes", func(t *testing.T) *http.Request { return post(t, "abc") }, 1},
		{"4 bytes", func(t *testing.T) *http.Request { return post(t, "abcd") }, 1},
		{"5 bytes", func(t *testing.T) *http.Request { return post(t, "abcde") }, 2},
		{"8 bytes", func(t *testing.T) *http.Request { return post(t, pad(8)) }, 2},
		{"9 bytes", func(t *testing.T) *http.Request { return post(t, pad(9)) }, 3},
		{"4000 bytes", func(t *testing.T) *http.Request { return post(t, pad(4000)) }, 1000},
		{"ContentLength -1: the bytes read", func(t *testing.T) *http.Request {
			r := post(t, pad(9))
			r.ContentLength = -1
			return r
		}, 3},
		{"ContentLength known: it, not the copy's length", func(t *testing.T) *http.Request {
			r := post(t, pad(9))
			r.ContentLength = 400
			return r
		}, 100},
		{"over 64 KiB: ContentLength, and the first cap only", func(t *testing.T) *http.Request { return post(t, bigBody) }, (int64(len(bigBody))+3)/4 + 500},
		{"over 64 KiB, ContentLength -1: the 64 KiB read", func(t *testing.T) *http.Request {
			r := post(t, bigBody)
			r.ContentLength = -1
			return r
		}, maxDrain/4 + 500},
		{"no GetBody: ContentLength alone, the body never read", func(t *testing.T) *http.Request { return sent(t, 41, nil) }, 11},
		{"no GetBody, the largest ContentLength: ceil, never a wrap", func(t *testing.T) *http.Request { return sent(t, math.MaxInt64, nil) }, math.MaxInt64/4 + 1},
		{"the largest ContentLength and the largest cap: still an int64", func(t *testing.T) *http.Request {
			r := post(t, `{"max_tokens":`+strings.Repeat("9", 30)+`}`)
			r.ContentLength = math.MaxInt64
			return r
		}, math.MaxInt64/4 + 1 + mostTokens},
		{"no GetBody, ContentLength -1: 0", func(t *testing.T) *http.Request { return sent(t, -1, nil) }, 0},
		{"no GetBody, ContentLength 0 (unknown): 0", func(t *testing.T) *http.Request { return sent(t, 0, nil) }, 0},
		{"GetBody fails: ContentLength alone", func(t *testing.T) *http.Request { return sent(t, 41, getBodyFails) }, 11},
		{"GetBody fails, ContentLength -1: 0", func(t *testing.T) *http.Request { return sent(t, -1, getBodyFails) }, 0},
		{"GetBody returns no body: ContentLength alone", func(t *testing.T) *http.Request {
			return sent(t, 41, func() (io.ReadCloser, error) { return nil, nil })
		}, 11},
		{"GetBody's copy fails midway: what was read", func(t *testing.T) *http.Request {
			return sent(t, -1, func() (io.ReadCloser, error) {
				return io.NopCloser(io.MultiReader(strings.NewReader(`{"max_tokens":7,"a":"`+pad(20)), iotestErr{})), nil
			})
		}, 11 + 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, EstimateTokens(tt.req(t)))
		})
	}
}

// iotestErr is a reader that fails.
type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("broken copy") }

// TestEstimateTokensOutputCap: a JSON body's output cap is added to
// ceil(length ÷ 4).
func TestEstimateTokensOutputCap(t *testing.T) {
	for _, tt := range []struct {
		name string
		body string
		cap  int64
	}{
		{"max_tokens", `{"model":"m","max_tokens":100}`, 100},
		{"max_completion_tokens", `{"max_completion_tokens":200}`, 200},
		{"max_output_tokens", `{"max_output_tokens":300}`, 300},
		{"generationConfig.maxOutputTokens", `{"generationConfig":{"maxOutputTokens":400}}`, 400},
		{"generation_config.max_output_tokens", `{"generation_config":{"max_output_tokens":500}}`, 500},
		{"all at once: the largest", `{"max_tokens":100,"max_completion_tokens":200,"max_output_tokens":300,"generationConfig":{"maxOutputTokens":400},"generation_config":{"max_output_tokens":250}}`, 400},
		{"in a message's content: not counted", `{"messages":[{"role":"user","content":"\"max_tokens\":9999"}]}`, 0},
		{"in another object: not counted", `{"metadata":{"max_tokens":9999},"tools":[{"max_output_tokens":9999}]}`, 0},
		{"negative", `{"max_tokens":-100}`, 0},
		{"fractional", `{"max_tokens":100.5}`, 0},
		{"huge: saturating", `{"max_tokens":` + strings.Repeat("9", 40) + `}`, mostTokens},
		{"a string", `{"max_tokens":"100"}`, 0},
		{"null, then a cap", `{"max_tokens":null,"max_completion_tokens":64}`, 64},
		{"not JSON", `max_tokens=100`, 0},
		{"HTML", `<html>{"max_tokens":100}</html>`, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := (int64(len(tt.body)) + 3) / 4
			assert.Equal(t, in+tt.cap, EstimateTokens(post(t, tt.body)), "%d bytes", len(tt.body))
		})
	}
}

// TestEstimateTokensTruncated: a body cut at every byte costs its
// ceil(length ÷ 4) and the caps before the cut (signal.OutputCap of the
// cut, tested on its own in internal/signal), never panicking.
func TestEstimateTokensTruncated(t *testing.T) {
	const sample = `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"say \"max_tokens\": 9999"}],` +
		`"generationConfig":{"maxOutputTokens":300},"max_completion_tokens":200}`
	for n := 0; n <= len(sample); n++ {
		body := sample[:n]
		want := (int64(n)+3)/4 + signal.OutputCap([]byte(body))
		assert.Equal(t, want, EstimateTokens(post(t, body)), "cut at %d: %q", n, body)
	}
}

// TestEstimateTokensReadsACopy: the body is read from one GetBody copy, at
// most its first 64 KiB, and the copy is closed; req.Body is never read or
// closed (untouchable).
func TestEstimateTokensReadsACopy(t *testing.T) {
	for _, tt := range []struct {
		name          string
		size          int
		contentLength int64
		wantRead      int
	}{
		{"empty", 0, -1, 0},
		{"small", 100, 100, 100},
		{"small, length unknown", 100, -1, 100},
		{"64 KiB", maxDrain, maxDrain, maxDrain},
		{"64 KiB and a byte", maxDrain + 1, maxDrain + 1, maxDrain},
		{"1 MiB", 1 << 20, 1 << 20, maxDrain},
		{"1 MiB, length unknown", 1 << 20, -1, maxDrain},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(`{"max_tokens":10,"x":"` + pad(max(tt.size-22, 0)) + `"}`)[:tt.size]
			var copies []*copyBody
			req := sent(t, tt.contentLength, func() (io.ReadCloser, error) {
				c := &copyBody{r: bytes.NewReader(body)}
				copies = append(copies, c)
				return c, nil
			})
			got := EstimateTokens(req)
			require.Len(t, copies, 1, "GetBody called once")
			assert.True(t, copies[0].closed, "the copy is closed")
			assert.Equal(t, tt.wantRead, copies[0].read, "bytes read of the copy")
			length := int64(tt.wantRead)
			if tt.contentLength > 0 {
				length = tt.contentLength
			}
			wantCap := int64(0)
			if tt.size > len(`{"max_tokens":10,`) {
				wantCap = 10
			}
			assert.Equal(t, (length+3)/4+wantCap, got)
		})
	}
}

func TestWithTokens(t *testing.T) {
	type other struct{}
	for _, n := range []int64{math.MinInt64, -1, 0, 1, 1500, math.MaxInt64} {
		t.Run(itoa(int(n)), func(t *testing.T) {
			ctx := context.WithValue(context.Background(), other{}, "x")
			got := WithTokens(ctx, n)
			if n <= 0 {
				assert.True(t, got == ctx, "n <= 0: ctx itself, unchanged")
				return
			}
			assert.Equal(t, n, got.Value(tokensKey{}), "the tokens said")
			assert.Equal(t, "x", got.Value(other{}), "the rest of ctx")
		})
	}
}

// TestCallCosts: what a call costs on each lane, [requests, tokens, input,
// output] (R23): estimated, or the caller's n, less the output cap for the
// input (n itself when the cap is larger).
func TestCallCosts(t *testing.T) {
	const capped = `{"max_tokens":50,"model":"gpt-4o-mini","x":"` + `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa` + `"}` // 80 bytes: 20 tokens
	require.Len(t, capped, 80)
	for _, tt := range []struct {
		name   string
		body   string
		tokens int64 // WithTokens; 0: not said
		want   [numLanes]float64
	}{
		{"no body", "", 0, [numLanes]float64{1, 0, 0, 0}},
		{"no cap: all input", pad(400), 0, [numLanes]float64{1, 100, 100, 0}},
		{"a cap: input and output", capped, 0, [numLanes]float64{1, 70, 20, 50}},
		{"said, no body", "", 900, [numLanes]float64{1, 900, 900, 0}},
		{"said, no cap", pad(400), 900, [numLanes]float64{1, 900, 900, 0}},
		{"said, with a cap: input is the rest", capped, 1000, [numLanes]float64{1, 1000, 950, 50}},
		{"said, the cap exactly", capped, 50, [numLanes]float64{1, 50, 0, 50}},
		{"said, below the cap: input is n", capped, 40, [numLanes]float64{1, 40, 40, 50}},
		{"said 0: estimated", capped, 0, [numLanes]float64{1, 70, 20, 50}},
		{"said negative: estimated", capped, -5, [numLanes]float64{1, 70, 20, 50}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := post(t, tt.body)
			if tt.tokens != 0 {
				req = req.WithContext(WithTokens(req.Context(), tt.tokens))
			}
			assert.Equal(t, tt.want, callCosts(req))
			if tt.tokens <= 0 {
				assert.Equal(t, EstimateTokens(req), int64(tt.want[laneTokens]), "tokens: EstimateTokens")
			}
		})
	}
}

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
			require.NotNil(t, cd.entry())
			st := cd.stateOf()
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

// one call's cost shut a key for centuries. On a token
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

// TestOneCallOwesAtMostTheBucket: after one call of each absurd
// cost, answered by a 400 or a transport error, the next call on the key
// waits at most the lane's whole bucket and goes; over one process, and
// over a store.Local shared with the replica that makes the next call.
func TestOneCallOwesAtMostTheBucket(t *testing.T) {
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
	require.NotNil(t, next.entry(), "the replica of the next call watches the key")

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
	return cd.stateOf().Lane(l)
}

// OpenAI's "Request too large ... on tokens per min" is
// the caller's mistake (a call asking for more than the whole limit), not
// the provider's word on its limit: it is handed back (R23), and it neither
// arms a key, nor cuts, holds or limits a lane.

// tooLargeBody is OpenAI's answer to a call of 40,000 tokens on a limit of
// 30,000 a minute.
const tooLargeBody = `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 40000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`

func tooLarge429() retryhttptest.Reply {
	return retryhttptest.Reply{Status: 429, Header: http.Header{"Content-Type": {"application/json"}}, Body: tooLargeBody}
}

// laneState is what a test compares of a lane before and after an answer:
// its rates, hold and limit.
type laneState struct {
	per     float64
	rates   pace.Rates
	until   time.Time
	limited time.Time
}

func laneNow(cd *Cooldown, l laneID) (laneState, bool) {
	if cd.entry() == nil {
		return laneState{}, false
	}
	s := cd.stateOf().Lane(l)
	return laneState{per: s.Per, rates: pace.DecodeRates(s.Rates), until: s.Until, limited: s.Limited}, true
}

// TestTooLargeSaysNothingOfTheLimit: a "Request too large" 429 on
// a key nobody watches arms nothing; on a key whose token lane is paced
// (learned from a 429 that named it, ramping), sent behind another send so
// that a 429 to it would cut, it leaves the lane as it was: no cut (the
// issue: the learned rate halved), no pause (157 ms), no limit remembered.
// Over one process and over a Store shared with another replica, which
// hears nothing either.
func TestTooLargeSaysNothingOfTheLimit(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "one process", true: "a fleet on a store.Local"}[shared]
		t.Run(name+": a key not watched", func(t *testing.T) {
			clk := newClock()
			cd, other := tooLargeCooldowns(clk, shared)
			tr := New(retryhttptest.NewScript(tooLarge429()).WithClock(clk), WithClock(clk), WithCooldown(cd))
			resp, err := tr.RoundTrip(postOf(context.Background(), 160000))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 429, resp.StatusCode, "handed back")
			assert.Zero(t, cd.size(), "nothing armed")
			assert.Zero(t, other.size(), "nothing heard by the other replica")
		})
		t.Run(name+": a token lane paced", func(t *testing.T) {
			clk := newClock()
			cd, other := tooLargeCooldowns(clk, shared)
			arm := New(retryhttptest.NewScript(tokens429("tokens"), okReply).WithClock(clk), WithClock(clk), WithCooldown(cd))
			resp, err := arm.RoundTrip(postOf(context.Background(), 4000))
			require.NoError(t, err)
			resp.Body.Close()
			before, ok := laneNow(cd, laneTokens)
			require.True(t, ok)
			require.Positive(t, before.per, "the token lane is paced")
			require.True(t, before.rates.Ramping, "ramping: a cut would halve it")

			// Another send's slot of 100,000 tokens (2 s at the learned
			// rate) is ahead of the too-large call: it waits behind it, so
			// that a 429 to it is one that would cut.
			res := cd.eng.Take(context.Background(), cd.entry(), cd.now(), cooldown.Costs{1, 100000, 100000}, time.Hour)
			require.True(t, res.Took)
			script := retryhttptest.NewScript(tooLarge429()).WithClock(clk)
			var held time.Duration
			tr := New(script, WithClock(clk), WithCooldown(cd), WithObserver(func(_ context.Context, a Attempt) { held = a.Held }))
			resp, err = tr.RoundTrip(postOf(context.Background(), 160000)) // 40,000 tokens
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, tooLargeBody, string(body), "handed back whole")
			assert.Equal(t, 1, script.Len(), "never retried")
			require.Greater(t, held, time.Second, "it waited behind the other send")

			after, _ := laneNow(cd, laneTokens)
			assert.Equal(t, before.per, after.per, "no cut")
			assert.Equal(t, before.rates.Generation, after.rates.Generation, "no cut")
			assert.False(t, after.until.After(clk.Now()), "no hold, no pause")
			assert.Equal(t, before.limited, after.limited, "no limit remembered")
			if shared {
				got, err := other.store().Apply(context.Background(), origin, nil)
				require.NoError(t, err)
				assert.Equal(t, before.per, got.Lane(laneTokens).Per, "the fleet's rate is not cut")
				assert.False(t, got.Lane(laneTokens).Until.After(got.Now), "the fleet is not held")
			}
		})
	}
}

// tooLargeCooldowns is a Cooldown on clk and another replica's: over one
// store.Local when shared, else each its own.
func tooLargeCooldowns(clk *retryhttptest.Clock, shared bool) (cd, other *Cooldown) {
	if !shared {
		return NewCooldown(nil), NewCooldown(nil)
	}
	local := store.NewLocal(clk.Now)
	cd, other = NewCooldown(nil, WithStore(local)), NewCooldown(nil, WithStore(local))
	New(nil, WithClock(clk), WithCooldown(other)) // binds other's clock
	return cd, other
}

// EstimateTokens never panics, whatever GetBody and the
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

// TestEstimateTokensNeverPanics: GetBody or the copy's Read
// panicking, a Read's count out of range, a Close that panics: the
// estimate counts what it has (the bytes before, and the cap they ask
// for), or ContentLength.
func TestEstimateTokensNeverPanics(t *testing.T) {
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

// TestEstimateTokensIsBounded: a copy whose Read blocks is given
// up after bodyTimeout, or when the caller's context ends if that is
// sooner (the estimate is then ContentLength's); the copy is closed once
// its Read returns, never under it, and what that Read writes then never
// reaches another estimate (its buffer is not back in the pool before).
func TestEstimateTokensIsBounded(t *testing.T) {
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

// TestEstimateHoldsNoCall: on a token-paced key, a call with a
// 200 ms deadline whose GetBody copy never answers is sent within its
// deadline (the issue: it ran past 3 s).
func TestEstimateHoldsNoCall(t *testing.T) {
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

// mostTokens is where an output cap saturates (signal.OutputCap): a cap
// past 2^62 tokens means "a cap no limit holds".
const mostTokens = 1 << 62

// FuzzEstimateTokens: whatever the body, EstimateTokens of the request
// http.NewRequest makes of it never panics, is at least ceil(len ÷ 4), and
// is exactly that plus signal.OutputCap of its first 64 KiB (fuzzed on its
// own: internal/signal's FuzzOutputCap); without GetBody it is
// ceil(len ÷ 4) alone, the body never read.
func FuzzEstimateTokens(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","max_tokens":100}`, `{"generationConfig":{"maxOutputTokens":400}}`, `{"max_tokens":4611686018427387909}`,
		`{"max_tokens":99999999999999999999}`, "\xff{", "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := http.NewRequest(http.MethodPost, tokensURL, bytes.NewReader(body))
		require.NoError(t, err)
		in := (int64(len(body)) + 3) / 4
		outCap := signal.OutputCap(body[:min(len(body), maxDrain)])
		got := EstimateTokens(req)
		require.GreaterOrEqual(t, got, in, "EstimateTokens(%q): at least ceil(len/4)", body)
		require.Equal(t, in+outCap, got, "EstimateTokens(%q): ceil(len/4) + OutputCap", body)

		req.ContentLength = -1 // unknown: the bytes read
		require.Equal(t, got, EstimateTokens(req), "EstimateTokens(%q), length unknown", body)
		req.Body, req.ContentLength, req.GetBody = untouchable{t}, int64(len(body)), nil
		require.Equal(t, in, EstimateTokens(req), "EstimateTokens(%q) without GetBody: ContentLength alone", body)
	})
}

// TestEstimateTokensUnknownLength: a body whose length is not known
// (ContentLength 0 with a body, as a request built around a reader of its
// own has) is measured from its GetBody copy.
func TestEstimateTokensUnknownLength(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}],"max_tokens":50}`
	req, err := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat/completions", io.NopCloser(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 0
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte(body))), nil }
	assert.Equal(t, int64((len(body)+3)/4+50), EstimateTokens(req))
}
