package retryhttp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lanes is the set of ls.
func lanes(ls ...laneID) laneMask {
	var m laneMask
	for _, l := range ls {
		m |= 1 << l
	}
	return m
}

// GoString names m's lanes, so that a failure reads "tokens|input_tokens".
func (m laneMask) GoString() string {
	var names []string
	for l := range numLanes {
		if m.has(l) {
			names = append(names, l.String())
		}
	}
	if rest := m &^ (1<<numLanes - 1); rest != 0 || len(names) == 0 {
		names = append(names, itoa(int(rest)))
	}
	return strings.Join(names, "|")
}

// Error bodies of a 429, in each provider's words.
const (
	openAIRequests = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-1 on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	openAITooLarge = `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 40000. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	azureTokens    = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds."}}`
	azureCalls     = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded call rate limit of your current OpenAI S0 pricing tier. Please retry after 1 second."}}`
	geminiTokens   = `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"1000000"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}]}}`
	geminiRequests = `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_requests_per_model","quotaId":"GenerateRequestsPerMinutePerProjectPerModel","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"}}]}]}}`
)

// anthropic429 is Anthropic's rate_limit_error body with msg.
func anthropic429(msg string) string {
	return `{"type":"error","error":{"type":"rate_limit_error","message":"` + msg + `"}}`
}

// quotaFailure is a Google error whose QuotaFailure has violations.
func quotaFailure(violations string) string {
	return `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[` + violations + `]}]}}`
}

// bodyLimitsTest is a row of TestBodyLimits.
type bodyLimitsTest struct {
	name     string
	body     string
	hit      laneMask
	tooLarge bool
}

var bodyLimitsTests = []bodyLimitsTest{
	// OpenAI: error.type, or the message alone.
	{"openai tokens", openAIRate, lanes(laneTokens), false},
	{"openai requests", openAIRequests, lanes(laneRequests), false},
	{"openai tokens, type alone", `{"error":{"type":"tokens"}}`, lanes(laneTokens), false},
	{"openai requests, type alone", `{"error":{"type":"requests"}}`, lanes(laneRequests), false},
	{"openai tokens, message alone", `{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000."}}`, lanes(laneTokens), false},
	{"openai requests, message alone", `{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM): Limit 500."}}`, lanes(laneRequests), false},
	{"openai request too large", openAITooLarge, lanes(laneTokens), true},
	{"openai request too large, message alone", `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 40000."}}`, lanes(laneTokens), true},
	{"openai request too large, any case", `{"error":{"type":"tokens","message":"REQUEST TOO LARGE for m on tokens per min"}}`, lanes(laneTokens), true},
	{"openai too large, but not first: not read", `{"error":{"type":"tokens","message":"Rate limit reached on tokens per min: request too large"}}`, lanes(laneTokens), false},
	{"openai type is the case: Tokens is not tokens", `{"error":{"type":"Tokens"}}`, 0, false},

	{"openai insufficient_quota: spent, not too large", openAIQuota, 0, false},
	{"gemini per day: spent, not too large", geminiPerDay, lanes(laneRequests), false},
	{"vertex array, too large and spent", `[` + openAIQuota + `,` + openAITooLarge + `]`, lanes(laneTokens), true},

	// Azure OpenAI.
	{"azure token rate limit", azureTokens, lanes(laneTokens), false},
	{"azure call rate limit", azureCalls, lanes(laneRequests), false},

	// Anthropic.
	{"anthropic input tokens", anthropic429("This request would exceed your organization's rate limit of 1,200 input tokens per minute. Please reduce the prompt length or the maximum tokens requested, or try again later."), lanes(laneInput), false},
	{"anthropic output tokens", anthropic429("This request would exceed your organization's rate limit of 3,000 output tokens per minute. Please reduce the prompt length or the maximum tokens requested, or try again later."), lanes(laneOutput), false},
	{"anthropic input tokens, Anthropic's own words", anthropic429("This request would exceed the rate limit for your organization (org-1) of 40,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."), lanes(laneInput), false},
	{"anthropic tokens", anthropic429("This request would exceed your organization's rate limit of 6,000 tokens per minute."), lanes(laneTokens), false},
	{"anthropic requests", anthropic429("This request would exceed your organization's rate limit of 50 requests per minute. Please try again later."), lanes(laneRequests), false},
	{"anthropic requests, with advice that names tokens", anthropic429("This request would exceed your organization's rate limit of 50 requests per minute. Please reduce the prompt length or the maximum tokens requested, or try again later."), lanes(laneRequests), false},
	{"anthropic tokens, with advice that names output tokens", anthropic429("This request would exceed your organization's rate limit of 6,000 tokens per minute. Please reduce the output tokens requested."), lanes(laneTokens), false},
	{"anthropic, the older words", anthropic429("Number of request tokens has exceeded your per-minute rate limit"), lanes(laneTokens), false},
	{"anthropic outage", anthropic429("This request would exceed your organization's rate limit: every request is refused for now."), lanes(laneRequests), false},
	{"anthropic naming nothing", anthropic429("Rate limited."), 0, false},
	{"anthropic overloaded is not a limit", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 0, false},

	// Google: the QuotaFailure's quotaId or quotaMetric.
	{"gemini tokens", geminiTokens, lanes(laneTokens), false},
	{"gemini requests", geminiRequests, lanes(laneRequests), false},
	{"gemini free tier requests", geminiPerMinute, lanes(laneRequests), false},
	{"gemini tokens, quotaId alone", quotaFailure(`{"quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier"}`), lanes(laneTokens), false},
	{"gemini tokens, quotaMetric alone", quotaFailure(`{"quotaMetric":"generativelanguage.googleapis.com/generate_content_input_token_count"}`), lanes(laneTokens), false},
	{"gemini requests, quotaMetric alone", quotaFailure(`{"quotaMetric":"generativelanguage.googleapis.com/generate_requests_per_model"}`), lanes(laneRequests), false},
	{"gemini both, in two violations", quotaFailure(`{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel"},{"quotaId":"GenerateContentInputTokensPerModelPerMinute"}`), lanes(laneRequests, laneTokens), false},
	{"gemini naming neither", quotaFailure(`{"quotaId":"SomethingPerMinute","quotaMetric":"x/y"}`), 0, false},
	{"QuotaFailure without its prefix", `{"error":{"details":[{"@type":"google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinute"}]}]}}`, lanes(laneRequests), false},
	{"QuotaFailure by another @type is not read", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailureX","violations":[{"quotaId":"GenerateRequestsPerMinute"}]}]}}`, 0, false},
	{"violations outside a QuotaFailure are not read", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.Help","violations":[{"quotaId":"Tokens"}]}]}}`, 0, false},

	// Vertex AI: an array of envelopes, whose limits combine.
	{"vertex array", `[` + geminiTokens + `]`, lanes(laneTokens), false},
	{"vertex array of two", `[` + geminiTokens + `,` + geminiRequests + `]`, lanes(laneTokens, laneRequests), false},
	{"vertex array with junk", `[1,"x",null,[],{},{"error":null},` + geminiRequests + `]`, lanes(laneRequests), false},
	{"vertex array, too large among them", `[` + geminiRequests + `,` + openAITooLarge + `]`, lanes(laneTokens, laneRequests), true},
	{"nested array is not an envelope", `[[` + geminiTokens + `]]`, 0, false},

	// Bodies that name nothing.
	{"too many requests", `{"error":{"message":"Too Many Requests"}}`, 0, false},
	{"vertex resource exhausted", `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`, 0, false},
	{"a 504", google504, 0, false},
	{"a retryDelay alone", retryInfo(`"3s"`), 0, false},
	{"outside the envelope", `{"type":"tokens","message":"on tokens per min","details":[{"@type":"google.rpc.QuotaFailure","violations":[{"quotaId":"Tokens"}]}]}`, 0, false},
	{"error is a string", `{"error":"Rate limit reached on tokens per min"}`, 0, false},

	// Wrong types leave out only their own field.
	{"type a number", `{"error":{"type":5,"message":"on requests per min"}}`, lanes(laneRequests), false},
	{"message a number", `{"error":{"type":"tokens","message":5}}`, lanes(laneTokens), false},
	{"message an array", `{"error":{"message":["on tokens per min"]}}`, 0, false},
	{"type an object", `{"error":{"type":{"tokens":true}}}`, 0, false},
	{"details an object", `{"error":{"details":{"@type":"google.rpc.QuotaFailure","violations":[{"quotaId":"Tokens"}]}}}`, 0, false},
	{"wrong types everywhere", `{"error":{"code":429,"type":[],"message":null,"details":[5,null,"x",[],
		{"@type":7,"violations":[{"quotaId":"Tokens"}]},
		{"@type":"google.rpc.QuotaFailure","violations":{"quotaId":"Tokens"}},
		{"@type":"google.rpc.QuotaFailure","violations":[5,null,"Tokens",[],{"quotaId":7,"quotaMetric":["tokens"]},{"quotaId":"GenerateRequestsPerMinute"}]}]}}`, lanes(laneRequests), false},
	{"huge numbers", `{"error":{"code":1e400,"type":"tokens","n":-123456789012345678901234567890}}`, lanes(laneTokens), false},

	// Not JSON.
	{"empty", ``, 0, false},
	{"plain text", `Too Many Requests`, 0, false},
	{"html", `<html><body>tokens per min</body></html>`, 0, false},
	{"truncated", openAIRate[:len(openAIRate)-2], 0, false},
	{"trailing garbage", openAIRate + "}}garbage", lanes(laneTokens), false},
}

func TestBodyLimits(t *testing.T) {
	for _, tt := range bodyLimitsTests {
		t.Run(tt.name, func(t *testing.T) {
			hit, tooLarge := bodyLimits([]byte(tt.body))
			assert.Equal(t, tt.hit, hit, "the limit named")
			assert.Equal(t, tt.tooLarge, tooLarge, "too large")
			assert.Equal(t, hit, parseErrorBody([]byte(tt.body)).limits, "parseErrorBody's limits")
		})
	}
}

// TestErrorLimits reads error objects as encoding/json decodes them with
// UseNumber (parseErrorBody's decoder), and as no decoder does.
func TestErrorLimits(t *testing.T) {
	for _, tt := range []struct {
		name     string
		e        map[string]any
		hit      laneMask
		tooLarge bool
	}{
		{"nil", nil, 0, false},
		{"empty", map[string]any{}, 0, false},
		{"type tokens", map[string]any{"type": "tokens"}, lanes(laneTokens), false},
		{"type a json.Number", map[string]any{"type": json.Number("5"), "message": "on tokens per min"}, lanes(laneTokens), false},
		{"message too large", map[string]any{"message": "Request too large for m on tokens per min"}, lanes(laneTokens), true},
		{"details of maps of the wrong kind", map[string]any{"details": []any{map[string]string{"@type": "google.rpc.QuotaFailure"}}}, 0, false},
		{"violations of the wrong kind", map[string]any{"details": []any{map[string]any{"@type": "google.rpc.QuotaFailure", "violations": []map[string]any{{"quotaId": "Tokens"}}}}}, 0, false},
		{"a violation", map[string]any{"details": []any{map[string]any{"@type": "google.rpc.QuotaFailure", "violations": []any{map[string]any{"quotaId": "Tokens"}}}}}, lanes(laneTokens), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hit, tooLarge := errorLimits(tt.e)
			assert.Equal(t, tt.hit, hit)
			assert.Equal(t, tt.tooLarge, tooLarge)
		})
	}
}

// TestAnthropicLimit reads the lowercased messages of a rate_limit_error.
func TestAnthropicLimit(t *testing.T) {
	for _, tt := range []struct {
		msg  string
		want laneMask
	}{
		{"this request would exceed your organization's rate limit of 1,200 input tokens per minute.", lanes(laneInput)},
		{"this request would exceed your organization's rate limit of 3,000 output tokens per minute.", lanes(laneOutput)},
		{"this request would exceed your organization's rate limit of 6,000 tokens per minute.", lanes(laneTokens)},
		{"this request would exceed your organization's rate limit of 50 requests per minute.", lanes(laneRequests)},
		{"rate limit of 50 requests per minute. please reduce the prompt length or the maximum tokens requested.", lanes(laneRequests)},
		{"rate limit of 1,200 input tokens per minute. please reduce the output tokens.", lanes(laneInput)},
		{"number of request tokens has exceeded your per-minute rate limit", lanes(laneTokens)},
		{"every request is refused for now.", lanes(laneRequests)},
		{"rate limited.", 0},
		{"", 0},
	} {
		t.Run(tt.msg, func(t *testing.T) {
			assert.Equal(t, tt.want, anthropicLimit(tt.msg))
		})
	}
}

// TestParseErrorBodyTooLarge: OpenAI's "Request too large ... on tokens per
// min" asks for more than the whole limit and can never succeed, so
// ParseErrorBody calls it Exhausted (R19, R23); a rate limit reached is not.
func TestParseErrorBodyTooLarge(t *testing.T) {
	for _, tt := range []struct {
		name string
		body string
		want BodyHint
	}{
		{"request too large", openAITooLarge, BodyHint{Exhausted: true}},
		{"in a vertex array", `[` + retryInfo(`"3s"`) + `,` + openAITooLarge + `]`, BodyHint{RetryAfter: 3 * time.Second, Exhausted: true}},
		{"rate limit reached on tokens", openAIRate, BodyHint{}},
		{"rate limit reached on requests", openAIRequests, BodyHint{}},
		{"azure token rate limit", azureTokens, BodyHint{}},
		{"too large outside the envelope", `{"message":"Request too large for m on tokens per min","type":"tokens"}`, BodyHint{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ParseErrorBody([]byte(tt.body)))
		})
	}
}

// TestTooLargeThroughTheTransport: OpenAI's "Request too large" 429 is
// handed back at once, whole, even with a Budget (R19, R23: it can never
// succeed, so it is not "busy"); a rate limit reached is retried.
func TestTooLargeThroughTheTransport(t *testing.T) {
	ok := retryhttptest.Reply{Body: "ok"}
	for _, tc := range []struct {
		name      string
		first     retryhttptest.Reply
		budget    bool
		wantWaits []time.Duration
		wantBody  string
	}{
		{"too large: handed back at once", jsonReply(429, openAITooLarge), false, nil, openAITooLarge},
		{"too large with a Budget: handed back, not busy", jsonReply(429, openAITooLarge), true, nil, openAITooLarge},
		{"too large with a Retry-After: handed back all the same", jsonReply(429, openAITooLarge, "Retry-After", "1"), true, nil, openAITooLarge},
		{"rate limit reached: retried when asked", jsonReply(429, openAIRate, "Retry-After", "1"), true, []time.Duration{time.Second}, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk, script, tr := scripted(replies{tc.first, ok})
			ctx := context.Background()
			if tc.budget {
				ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
			}
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, tokensURL, []byte(`{"max_tokens":40000}`)))
			require.NoError(t, err, "handed back, not an error")
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.wantBody, string(body), "every byte of the body")
			assertWaits(t, tc.wantWaits, clk.Waits())
			assert.Equal(t, len(tc.wantWaits)+1, script.Len(), "tries")
		})
	}
}
