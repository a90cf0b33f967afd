package retryhttptest_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// costOf reads a Cost from a body "requests,tokens,input,output", so that a
// test says what each request costs.
func costOf(_ *http.Request, body []byte) retryhttptest.Cost {
	var n [4]int64
	for i, f := range strings.Split(string(body), ",") {
		n[i], _ = strconv.ParseInt(f, 10, 64)
	}
	return retryhttptest.Cost{Requests: n[0], Tokens: n[1], InputTokens: n[2], OutputTokens: n[3]}
}

type admitStep struct {
	after time.Duration
	cost  string // requests,tokens,input,output
	by    string // the limit that refuses: requests, tokens, input, output, too-large; "" when admitted
}

// refusedBy says which counter of Stats moved between a and b.
func refusedBy(a, b retryhttptest.ProviderStats) string {
	switch {
	case b.Admitted > a.Admitted:
		return ""
	case b.TooLarge > a.TooLarge:
		return "too-large"
	case b.RefusedRequests > a.RefusedRequests:
		return "requests"
	case b.RefusedTokens > a.RefusedTokens:
		return "tokens"
	case b.RefusedInputTokens > a.RefusedInputTokens:
		return "input"
	case b.RefusedOutputTokens > a.RefusedOutputTokens:
		return "output"
	}
	return "?"
}

var admitTests = []struct {
	name  string
	cfg   retryhttptest.ProviderConfig
	steps []admitStep
}{
	{"room is remaining >= cost; a refusal charges nothing",
		retryhttptest.ProviderConfig{Tokens: retryhttptest.Limit{Rate: 10, Size: 100}},
		[]admitStep{{0, "1,60", ""}, {0, "1,50", "tokens"}, {0, "1,40", ""}, {0, "1,1", "tokens"}, {100 * ms, "1,1", ""}}},
	{"every limit must have room, and a refusal by one charges none",
		retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 1, Size: 1}, Tokens: retryhttptest.Limit{Rate: 10, Size: 100}},
		[]admitStep{{0, "1,50", ""}, {0, "1,10", "requests"}, {time.Second, "1,60", ""}}},
	{"the limit that refuses is the one with the longest wait",
		retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 1, Size: 1}, Tokens: retryhttptest.Limit{Rate: 10, Size: 100}},
		[]admitStep{{0, "1,100", ""}, {0, "1,100", "tokens"}, {0, "1,5", "requests"}}},
	{"a zero limit is no limit; a cost of 0 or less always has room",
		retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 1, Size: 1}, Tokens: retryhttptest.Limit{Size: 5}},
		[]admitStep{{0, "0,1000000", ""}, {0, "-5", ""}, {0, "1", ""}, {0, "1", "requests"}}},
	{"a Size of 0 is a second's worth",
		retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 2.5}},
		[]admitStep{{0, "1", ""}, {0, "1", ""}, {0, "1", ""}, {0, "1", "requests"}, {400 * ms, "1", ""}}},
	{"OpenAI: a cost larger than the bucket never has room",
		retryhttptest.ProviderConfig{Tokens: retryhttptest.Limit{Rate: 10, Size: 100}},
		[]admitStep{{0, "1,101", "too-large"}, {time.Hour, "1,101", "too-large"}, {0, "1,100", ""}}},
	{"elsewhere: alone into a full bucket, which goes into debt",
		retryhttptest.ProviderConfig{Dialect: retryhttptest.AnthropicDialect, Tokens: retryhttptest.Limit{Rate: 10, Size: 100}},
		[]admitStep{{0, "1,150", ""}, {10 * time.Second, "1,60", "tokens"}, {0, "1,50", ""},
			{0, "1,150", "too-large"}, {9999 * ms, "1,150", "too-large"}, {ms, "1,150", ""}}},
	{"Anthropic's input and output tokens",
		retryhttptest.ProviderConfig{Dialect: retryhttptest.AnthropicDialect,
			InputTokens: retryhttptest.Limit{Rate: 10, Size: 100}, OutputTokens: retryhttptest.Limit{Rate: 10, Size: 100}},
		[]admitStep{{0, "1,0,50,100", ""}, {0, "1,0,10,1", "output"}, {0, "1,0,60,0", "input"}, {0, "1,0,50,0", ""}}},
}

// TestProviderAdmits runs requests of given costs at given instants and
// checks which are admitted, and which limit refuses the others.
func TestProviderAdmits(t *testing.T) {
	for _, tt := range admitTests {
		t.Run(tt.name, func(t *testing.T) {
			mock := at()
			cfg := tt.cfg
			cfg.Clock, cfg.Cost = mock, costOf
			p := retryhttptest.NewProvider(cfg)
			var tokens int64
			for i, s := range tt.steps {
				mock.Add(s.after)
				before := p.Stats()
				resp, _ := post(t, p, s.cost)
				after := p.Stats()
				assert.Equal(t, s.by, refusedBy(before, after), "step %d (%s at +%v)", i, s.cost, s.after)
				assert.Equal(t, map[bool]int{true: 200, false: 429}[s.by == ""], resp.StatusCode, "step %d", i)
				if s.by == "" {
					tokens += max(0, costOf(nil, []byte(s.cost)).Tokens)
				}
			}
			s := p.Stats()
			assert.Equal(t, int64(len(tt.steps)), s.Requests)
			assert.Equal(t, s.Requests, s.Admitted+s.Refused)
			assert.Equal(t, s.Refused, s.RefusedRequests+s.RefusedTokens+s.RefusedInputTokens+s.RefusedOutputTokens+s.RefusedOutage)
			assert.Equal(t, tokens, s.Tokens, "tokens admitted")
		})
	}
}

func TestDefaultCost(t *testing.T) {
	tests := []struct {
		body string
		want retryhttptest.Cost
	}{
		{"", retryhttptest.Cost{Requests: 1}},
		{"abc", retryhttptest.Cost{Requests: 1, Tokens: 1, InputTokens: 1}},
		{"abcd", retryhttptest.Cost{Requests: 1, Tokens: 1, InputTokens: 1}},
		{"abcde", retryhttptest.Cost{Requests: 1, Tokens: 2, InputTokens: 2}},
		{`{"max_tokens":100}`, retryhttptest.Cost{Requests: 1, Tokens: 5, InputTokens: 5, OutputTokens: 100}},
		{`{"max_completion_tokens":7}`, retryhttptest.Cost{Requests: 1, Tokens: 7, InputTokens: 7, OutputTokens: 7}},
		{`{"max_output_tokens":9000}`, retryhttptest.Cost{Requests: 1, Tokens: 7, InputTokens: 7, OutputTokens: 9000}},
		{`{"generationConfig":{"maxOutputTokens":64}}`, retryhttptest.Cost{Requests: 1, Tokens: 11, InputTokens: 11, OutputTokens: 64}},
		{`{"max_tokens":10,"max_completion_tokens":30}`, retryhttptest.Cost{Requests: 1, Tokens: 11, InputTokens: 11, OutputTokens: 30}},
		{`{"max_tokens":"100","model":"m"}`, retryhttptest.Cost{Requests: 1, Tokens: 8, InputTokens: 8}},
		{`{"max_tokens":-3}`, retryhttptest.Cost{Requests: 1, Tokens: 5, InputTokens: 5}},
		{`max_tokens=100`, retryhttptest.Cost{Requests: 1, Tokens: 4, InputTokens: 4}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, retryhttptest.DefaultCost([]byte(tt.body)), "%q", tt.body)
	}
}

func TestPerMinute(t *testing.T) {
	assert.Equal(t, retryhttptest.Limit{Rate: 1000, Size: 60000}, retryhttptest.PerMinute(60000))
	assert.Equal(t, retryhttptest.Limit{}, retryhttptest.PerMinute(0))
	assert.Equal(t, retryhttptest.Limit{}, retryhttptest.PerMinute(-1))
}

func TestNewProviderPanics(t *testing.T) {
	assert.PanicsWithValue(t, "retryhttptest: NewProvider: unknown Dialect(9)", func() {
		retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: 9})
	})
	assert.PanicsWithValue(t, "retryhttptest: NewProvider: InputTokens and OutputTokens are Anthropic's; the openai dialect has no words for them", func() {
		retryhttptest.NewProvider(retryhttptest.ProviderConfig{InputTokens: retryhttptest.PerMinute(10)})
	})
	assert.PanicsWithValue(t, `retryhttptest: NewProvider: InputTokens and OutputTokens of model "gpt-4o" are Anthropic's; the gemini dialect has no words for them`, func() {
		retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: retryhttptest.GeminiDialect,
			Models: map[string]retryhttptest.ModelLimits{"gpt-4o": {OutputTokens: retryhttptest.PerMinute(10)}}})
	})
	assert.PanicsWithValue(t, `retryhttptest: NewProvider: Models has the model "": a request with no model found has the Provider's limits`, func() {
		retryhttptest.NewProvider(retryhttptest.ProviderConfig{Models: map[string]retryhttptest.ModelLimits{"": {}}})
	})
	assert.NotPanics(t, func() {
		retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: retryhttptest.AnthropicDialect, OutputTokens: retryhttptest.PerMinute(10),
			Models: map[string]retryhttptest.ModelLimits{"claude-sonnet-4-5": {InputTokens: retryhttptest.PerMinute(10)}}})
	})
}

func TestDialectString(t *testing.T) {
	var names []string
	for _, d := range retryhttptest.Dialects() {
		names = append(names, d.String())
	}
	assert.Equal(t, []string{"openai", "anthropic", "retry-after", "gemini", "bare"}, names)
	assert.Equal(t, retryhttptest.OpenAIDialect, retryhttptest.Dialect(0), "the zero Dialect")
	assert.Equal(t, "Dialect(5)", (retryhttptest.BareDialect + 1).String())
}

// TestProviderOutage: every request is refused until the outage ends,
// asked to wait what is left of it, and charged nothing.
func TestProviderOutage(t *testing.T) {
	mock := at()
	p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Clock: mock, Requests: retryhttptest.Limit{Rate: 1, Size: 1}})
	p.Outage(mock.Now().Add(2 * time.Second))
	asks := func() string {
		resp, _ := post(t, p, "{}")
		require.Equal(t, 429, resp.StatusCode)
		return resp.Header.Get("Retry-After-Ms")
	}
	assert.Equal(t, "2000", asks())
	mock.Add(1500 * ms)
	assert.Equal(t, "500", asks())
	mock.Add(500 * ms)
	resp, _ := post(t, p, "{}")
	assert.Equal(t, 200, resp.StatusCode, "back, with the bucket it had: the outage took nothing")

	p.Outage(mock.Now().Add(time.Hour))
	p.Outage(mock.Now().Add(time.Minute)) // replaces it
	mock.Add(time.Minute)
	resp, _ = post(t, p, "{}")
	assert.Equal(t, 200, resp.StatusCode)
	p.Outage(mock.Now().Add(time.Hour))
	p.Outage(time.Time{}) // ends it
	mock.Add(time.Second)
	resp, _ = post(t, p, "{}")
	assert.Equal(t, 200, resp.StatusCode)
	s := p.Stats()
	assert.Equal(t, [3]int64{2, 2, 0}, [3]int64{s.RefusedOutage, s.Refused, s.RefusedRequests})
}
