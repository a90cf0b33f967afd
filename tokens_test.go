package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/signal"
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
