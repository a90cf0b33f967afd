package retryhttptest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Limits per model (ProviderConfig.Models): each model's buckets, how a
// request's model is found, and what falls back to the Provider's limits.

// perModel makes the limits of one kind ("requests", "tokens", "input",
// "output") that admit n requests of unit at once and refill one in n
// seconds: n admitted, then a wait of n seconds.
func perModel(kind string, n, unit float64) retryhttptest.ModelLimits {
	l := retryhttptest.Limit{Rate: unit / n, Size: int64(n * unit)}
	var m retryhttptest.ModelLimits
	switch kind {
	case "requests":
		m.Requests = l
	case "tokens":
		m.Tokens = l
	case "input":
		m.InputTokens = l
	case "output":
		m.OutputTokens = l
	}
	return m
}

// countHeader is the header of the dialect's counts of kind, with
// "%s" for Limit or Remaining; "" when the dialect sends none.
func countHeader(d retryhttptest.Dialect, kind string) string {
	switch d {
	case retryhttptest.OpenAIDialect:
		return "X-Ratelimit-%s-" + map[string]string{"requests": "Requests", "tokens": "Tokens"}[kind]
	case retryhttptest.AnthropicDialect:
		return "Anthropic-Ratelimit-" + map[string]string{"requests": "Requests", "tokens": "Tokens", "input": "Input-Tokens", "output": "Output-Tokens"}[kind] + "-%s"
	}
	return ""
}

// limitSaid is where a dialect's 429 body states the limit that refused:
// OpenAI's "Limit n" (the bucket), Anthropic's "rate limit of n" and
// Gemini's quotaValue (a minute's rate).
var limitSaid = map[retryhttptest.Dialect]*regexp.Regexp{
	retryhttptest.OpenAIDialect:    regexp.MustCompile(`Limit (\d+), Used`),
	retryhttptest.AnthropicDialect: regexp.MustCompile(`rate limit of ([\d,]+) `),
	retryhttptest.GeminiDialect:    regexp.MustCompile(`"quotaValue":"(\d+)"`),
}

// modelSteps run at one instant but the last three: gpt-4o admits 1 at
// once (a wait of 1 s), gpt-4o-mini 2 (2 s), and every other model, and a
// request with none, share the Provider's 4 (4 s).
var modelSteps = []struct {
	after time.Duration
	model string        // "" sends no model
	n     float64       // the bucket the model is charged to: 1, 2 or 4
	left  float64       // what it has left after the request, in requests
	wait  time.Duration // asked for; 0: admitted
}{
	{0, "gpt-4o", 1, 0, 0},
	{0, "gpt-4o", 1, 0, time.Second},
	{0, "gpt-4o-mini", 2, 1, 0},
	{0, "gpt-4o-mini", 2, 0, 0},
	{0, "gpt-4o-mini", 2, 0, 2 * time.Second},
	{0, "o3", 4, 3, 0},
	{0, "", 4, 2, 0},
	{0, "o1", 4, 1, 0},
	{0, "o3", 4, 0, 0},
	{0, "o1", 4, 0, 4 * time.Second},
	{time.Second, "gpt-4o", 1, 0, 0},
	{0, "gpt-4o-mini", 2, 0.5, time.Second},
	{0, "o3", 4, 0.25, 3 * time.Second},
}

// TestProviderModelsIndependent: in every dialect, and for each of its
// limits, a model's bucket is its own: spending it refuses that model
// alone, and every answer (its counts, its wait, its 429's words) is of the
// bucket the request was charged to.
func TestProviderModelsIndependent(t *testing.T) {
	for _, d := range retryhttptest.Dialects() {
		kinds := []string{"requests", "tokens"}
		if d == retryhttptest.AnthropicDialect {
			kinds = append(kinds, "input", "output")
		}
		for _, kind := range kinds {
			t.Run(d.String()+"/"+kind, func(t *testing.T) {
				unit := map[bool]float64{true: 1, false: 100}[kind == "requests"]
				testModelSteps(t, d, kind, unit)
			})
		}
	}
}

func testModelSteps(t *testing.T, d retryhttptest.Dialect, kind string, unit float64) {
	mock := at()
	def := perModel(kind, 4, unit)
	p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: d, Clock: mock,
		Requests: def.Requests, Tokens: def.Tokens, InputTokens: def.InputTokens, OutputTokens: def.OutputTokens,
		Models: map[string]retryhttptest.ModelLimits{"gpt-4o": perModel(kind, 1, unit), "gpt-4o-mini": perModel(kind, 2, unit)},
		Cost: func(*http.Request, []byte) retryhttptest.Cost {
			return retryhttptest.Cost{Requests: 1, Tokens: 100, InputTokens: 100, OutputTokens: 100}
		}})
	for i, s := range modelSteps {
		mock.Add(s.after)
		body := "{}"
		if s.model != "" {
			body = `{"model":"` + s.model + `"}`
		}
		resp, got := post(t, p, body)
		where := fmt.Sprintf("step %d (%q at +%v)", i, s.model, s.after)
		require.Equal(t, map[bool]int{true: 200, false: 429}[s.wait == 0], resp.StatusCode, where)
		if h := countHeader(d, kind); h != "" {
			assert.Equal(t, strconv.Itoa(int(s.n*unit)), resp.Header.Get(fmt.Sprintf(h, "Limit")), where)
			assert.Equal(t, strconv.Itoa(int(s.left*unit)), resp.Header.Get(fmt.Sprintf(h, "Remaining")), where)
		}
		if s.wait == 0 {
			continue
		}
		asked, _ := retryhttp.ParseRetryAfter(resp.Header, mock.Now())
		asked = max(asked, retryhttp.ParseErrorBody([]byte(got)).RetryAfter)
		if d == retryhttptest.BareDialect {
			assert.Zero(t, asked, where)
			continue
		}
		assert.Equal(t, s.wait, asked, where)
		if re := limitSaid[d]; re != nil {
			perMinute := strconv.Itoa(int(unit * 60 / s.n))
			want := map[bool]string{true: strconv.Itoa(int(s.n * unit)), false: perMinute}[d == retryhttptest.OpenAIDialect]
			if m := re.FindStringSubmatch(got); assert.NotNil(t, m, "%s: %s", where, got) {
				assert.Equal(t, want, strings.ReplaceAll(m[1], ",", ""), where)
			}
		}
		if s.model != "" && (d == retryhttptest.OpenAIDialect || d == retryhttptest.GeminiDialect) {
			assert.Contains(t, got, s.model, "%s names its model", where)
		}
	}
	want := map[string][2]int64{"gpt-4o": {3, 2}, "gpt-4o-mini": {4, 2}, "o3": {3, 2}, "": {1, 1}, "o1": {2, 1}, "o4": {0, 0}}
	var sum retryhttptest.ProviderStats
	for model, w := range want {
		s := p.ModelStats(model)
		assert.Equal(t, w, [2]int64{s.Requests, s.Admitted}, "ModelStats(%q): requests, admitted", model)
		sum.Requests, sum.Admitted, sum.Refused = sum.Requests+s.Requests, sum.Admitted+s.Admitted, sum.Refused+s.Refused
	}
	all := p.Stats()
	assert.Equal(t, [3]int64{all.Requests, all.Admitted, all.Refused}, [3]int64{sum.Requests, sum.Admitted, sum.Refused}, "Stats is the sum")
}

// modelBody is a JSON body of exactly n bytes that asks for gpt-4o.
func modelBody(n int) string {
	head, tail := `{"model":"gpt-4o","messages":"`, `"}`
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

func TestRequestModel(t *testing.T) {
	tests := []struct {
		url, body string
		want      string
	}{
		{"https://api.openai.com/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`, "gpt-4o"},
		{"https://api.anthropic.com/v1/messages", `{"max_tokens":1024,"messages":[{"role":"user","content":"hi"}],"model":"claude-sonnet-4-5"}`, "claude-sonnet-4-5"},
		{"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent", `{"contents":[]}`, "gemini-2.0-flash"},
		{"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", "", "gemini-2.0-flash"},
		{"https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent", "", "gemini-2.5-pro"},
		{"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent", `{"model":"other"}`, "gemini-2.0-flash"},
		{"https://api.openai.com/v1/models/gpt-4o", "", ""},
		{"https://generativelanguage.googleapis.com/v1beta/models/:generateContent", "", ""},
		{"https://generativelanguage.googleapis.com/v1beta/models/gemini:generateContent/x", "", ""},
		{"https://api.openai.com/v1/chat/completions", modelBody(64 << 10), "gpt-4o"},
		{"https://api.openai.com/v1/chat/completions", modelBody(64<<10 + 1), ""},
		{"https://api.openai.com/v1/chat/completions", `model=gpt-4o`, ""},
		{"https://api.openai.com/v1/chat/completions", `{"model":"gpt-4o"`, ""},
		{"https://api.openai.com/v1/chat/completions", `["model","gpt-4o"]`, ""},
		{"https://api.openai.com/v1/chat/completions", `{"Model":"gpt-4o"}`, ""},
		{"https://api.openai.com/v1/chat/completions", `{"model":4}`, ""},
		{"https://api.openai.com/v1/chat/completions", `{"input":{"model":"gpt-4o"}}`, ""},
		{"https://api.openai.com/v1/chat/completions", "", ""},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(http.MethodPost, tt.url, nil)
		require.NoError(t, err)
		assert.Equal(t, tt.want, retryhttptest.RequestModel(req, []byte(tt.body)), "%s %.60q", tt.url, tt.body)
	}
	assert.Equal(t, "gpt-4o", retryhttptest.RequestModel(nil, []byte(`{"model":"gpt-4o"}`)), "a nil request")
}

// TestProviderModelFound: a request is charged to the limits of the model
// RequestModel finds, through RoundTrip and through ServeHTTP alike; one
// with no model found (a body over 64 KiB, or not JSON) to the Provider's.
// Cost still gets the whole body.
func TestProviderModelFound(t *testing.T) {
	const chatURL, gemini = "/v1/chat/completions", "/v1beta/models/gemini-2.0-flash:"
	tests := []struct {
		name, path, body string
		want             string // the requests limit the answer states: 1 gpt-4o, 2 gemini-2.0-flash, 3 the Provider's
	}{
		{"OpenAI body", chatURL, `{"model":"gpt-4o","messages":[]}`, "1"},
		{"Anthropic body", "/v1/messages", `{"max_tokens":10,"messages":[],"model":"gpt-4o"}`, "1"},
		{"Gemini path", gemini + "generateContent", `{"contents":[]}`, "2"},
		{"Gemini stream", gemini + "streamGenerateContent?alt=sse", `{"contents":[]}`, "2"},
		{"Vertex path", "/v1/projects/p/locations/l/publishers/google/models/gemini-2.0-flash:generateContent", "", "2"},
		{"a body of 64 KiB", chatURL, modelBody(64 << 10), "1"},
		{"a body over 64 KiB", chatURL, modelBody(64<<10 + 1), "3"},
		{"not JSON", chatURL, "model=gpt-4o", "3"},
		{"a model of no limits of its own", chatURL, `{"model":"o3"}`, "3"},
		{"no body", chatURL, "", "3"},
	}
	for _, tt := range tests {
		for _, how := range []string{"RoundTrip", "ServeHTTP"} {
			t.Run(tt.name+"/"+how, func(t *testing.T) {
				var costed atomic.Int64
				p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 1, Size: 3},
					Models: map[string]retryhttptest.ModelLimits{
						"gpt-4o":           {Requests: retryhttptest.Limit{Rate: 1, Size: 1}},
						"gemini-2.0-flash": {Requests: retryhttptest.Limit{Rate: 1, Size: 2}},
					},
					Cost: func(_ *http.Request, body []byte) retryhttptest.Cost {
						costed.Store(int64(len(body)))
						return retryhttptest.DefaultCost(body)
					}})
				var rt http.RoundTripper = p
				base := "https://api.example.com"
				if how == "ServeHTTP" {
					srv := httptest.NewServer(p)
					defer srv.Close()
					rt, base = srv.Client().Transport, srv.URL
				}
				req, err := http.NewRequest(http.MethodPost, base+tt.path, strings.NewReader(tt.body))
				require.NoError(t, err)
				resp, err := rt.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, tt.want, resp.Header.Get("X-Ratelimit-Limit-Requests"))
				assert.Equal(t, int64(len(tt.body)), costed.Load(), "the body Cost gets")
			})
		}
	}
}
