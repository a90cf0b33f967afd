package retryhttptest_test

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/provider_answers.golden")

// chat returns a JSON chat request of exactly 4 × tokens bytes, so that
// DefaultCost charges it tokens tokens; maxTokens > 0 adds that output cap.
func chat(tokens, maxTokens int) string {
	limit := ""
	if maxTokens > 0 {
		limit = fmt.Sprintf(`,"max_tokens":%d`, maxTokens)
	}
	head, tail := `{"model":"gpt-4o","messages":[{"role":"user","content":"`, `"}]`+limit+`}`
	pad := 4*tokens - len(head) - len(tail)
	if pad < 0 {
		panic("chat: too few tokens for the envelope")
	}
	return head + strings.Repeat("a", pad) + tail
}

// post sends body to p through RoundTrip and returns the answer, its body
// read.
func post(t *testing.T, p http.RoundTripper, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	resp, err := p.RoundTrip(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, string(b)
}

// at returns a clock.Mock at a fixed instant, on a whole second.
func at() *clock.Mock {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	return mock
}

// goldenSteps is one scenario, run in every dialect (goldenConfig): in the
// OpenAI dialect the first request is admitted, the second refused by the
// tokens (500 left, 600 asked), the third admitted, the fourth refused by
// the requests (0.25 left), the fifth too large for the token bucket, the
// sixth refused by an outage. In Anthropic's the output tokens refuse the
// third, and the input tokens the fifth (which would be admitted alone
// into a full bucket).
var goldenSteps = []struct {
	after          time.Duration // the mock clock moves this much before the request
	tokens, output int           // the body's tokens and its max_tokens
	outage         time.Duration // when > 0, an Outage of this long starts first
}{
	{0, 500, 100, 0},
	{0, 600, 100, 0},
	{250 * ms, 100, 100, 0},
	{0, 100, 0, 0},
	{0, 2000, 0, 0},
	{time.Second, 100, 0, 2500 * ms},
}

// goldenConfig: a request a second with a burst of 2; 100 tokens a second
// into a bucket of 1000; in the Anthropic dialect, 1200 input tokens a
// minute and 50 output tokens a second into a bucket of 150.
func goldenConfig(d retryhttptest.Dialect, clk clock.Clock) retryhttptest.ProviderConfig {
	cfg := retryhttptest.ProviderConfig{Dialect: d, Clock: clk,
		Requests: retryhttptest.Limit{Rate: 1, Size: 2}, Tokens: retryhttptest.Limit{Rate: 100, Size: 1000}}
	if d == retryhttptest.AnthropicDialect {
		cfg.InputTokens, cfg.OutputTokens = retryhttptest.PerMinute(1200), retryhttptest.Limit{Rate: 50, Size: 150}
	}
	return cfg
}

// TestProviderAnswersGolden pins every header and body each dialect writes
// in one scenario, at fixed instants: testdata/provider_answers.golden is
// the dialects' reference (go test -run Golden -update rewrites it).
func TestProviderAnswersGolden(t *testing.T) {
	var out strings.Builder
	for _, d := range retryhttptest.Dialects() {
		mock := at()
		p := retryhttptest.NewProvider(goldenConfig(d, mock))
		c := goldenConfig(d, nil)
		fmt.Fprintf(&out, "## %s: requests %+v, tokens %+v, input tokens %+v, output tokens %+v\n", d, c.Requests, c.Tokens, c.InputTokens, c.OutputTokens)
		for _, s := range goldenSteps {
			mock.Add(s.after)
			if s.outage > 0 {
				p.Outage(mock.Now().Add(s.outage))
			}
			resp, body := post(t, p, chat(s.tokens, s.output))
			if s.outage > 0 {
				fmt.Fprintf(&out, "\n# an Outage of %v", s.outage)
			}
			fmt.Fprintf(&out, "\n# at +%v: %d tokens, max_tokens %d\n%d\n", mock.Now().Sub(at().Now()), s.tokens, s.output, resp.StatusCode)
			names := slices.Sorted(func(yield func(string) bool) {
				for k := range resp.Header {
					if !yield(k) {
						return
					}
				}
			})
			for _, k := range names {
				fmt.Fprintf(&out, "%s: %s\n", k, strings.Join(resp.Header[k], ", "))
			}
			if resp.StatusCode == http.StatusOK {
				body = "(a completion)"
			}
			fmt.Fprintf(&out, "%s\n", strings.TrimSuffix(body, "\n"))
		}
		fmt.Fprintf(&out, "\n%+v\n\n", p.Stats())
	}
	const golden = "testdata/provider_answers.golden"
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(out.String()), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), out.String())
}

// TestProviderWaitsAreExact checks that what each dialect asks for, read
// by retryhttp's own parsers, is the time until room, rounded up to the
// dialect's resolution: a client that comes back then is admitted, and
// (where the dialect is exact) one that comes back a nanosecond earlier is
// not.
func TestProviderWaitsAreExact(t *testing.T) {
	tests := []struct {
		d     retryhttptest.Dialect
		limit string        // which limit refuses
		want  time.Duration // what the parsers read, for a true wait of 123.456789 ms
		exact bool
	}{
		{retryhttptest.OpenAIDialect, "requests", 124 * ms, false},
		{retryhttptest.OpenAIDialect, "tokens", 124 * ms, false},
		{retryhttptest.AnthropicDialect, "requests", time.Second, false},
		{retryhttptest.AnthropicDialect, "tokens", time.Second, false},
		{retryhttptest.RetryAfterDialect, "tokens", time.Second, false},
		{retryhttptest.GeminiDialect, "requests", 123456789, true},
		{retryhttptest.GeminiDialect, "tokens", 123456789, true},
		{retryhttptest.BareDialect, "tokens", 0, false},
	}
	const wait = 123456789 * time.Nanosecond
	for _, tt := range tests {
		t.Run(tt.d.String()+"/"+tt.limit, func(t *testing.T) {
			mock := at()
			cfg := retryhttptest.ProviderConfig{Dialect: tt.d, Clock: mock}
			body := chat(100, 0) // 100 tokens
			if tt.limit == "requests" {
				cfg.Requests = retryhttptest.Limit{Rate: 1e9 / float64(wait), Size: 1} // one a wait
			} else {
				cfg.Tokens = retryhttptest.Limit{Rate: 100 * 1e9 / float64(wait), Size: 100} // 100 tokens a wait
			}
			p := retryhttptest.NewProvider(cfg)
			resp, _ := post(t, p, body)
			require.Equal(t, 200, resp.StatusCode)
			resp, got := post(t, p, body)
			require.Equal(t, 429, resp.StatusCode)
			asked, ok := retryhttp.ParseRetryAfter(resp.Header, mock.Now())
			if hint := retryhttp.ParseErrorBody([]byte(got)); hint.RetryAfter > 0 {
				asked, ok = hint.RetryAfter, true
				assert.False(t, hint.Exhausted, "a per-minute limit is not a spent quota")
			}
			assert.Equal(t, tt.want > 0, ok, "asks for a wait")
			assert.Equal(t, tt.want, asked)
			if tt.exact {
				mock.Add(asked - 1)
				resp, _ = post(t, p, body)
				assert.Equal(t, 429, resp.StatusCode, "a nanosecond early")
				mock.Add(1)
			} else {
				mock.Add(max(asked, wait))
			}
			resp, _ = post(t, p, body)
			assert.Equal(t, 200, resp.StatusCode, "back when asked")
		})
	}
}
