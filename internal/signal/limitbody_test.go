package signal

import (
	"encoding/json"
	"github.com/retryhttp/retryhttp/store"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// lanes is the set of ls.
func lanes(ls ...store.LaneID) Lanes {
	var m Lanes
	for _, l := range ls {
		m |= 1 << l
	}
	return m
}

// GoString names m's lanes, so that a failure reads "tokens|input_tokens".
func (m Lanes) GoString() string {
	var names []string
	for l := range store.LaneID(NumLanes) {
		if m.Has(l) {
			names = append(names, l.String())
		}
	}
	if rest := m &^ (1<<NumLanes - 1); rest != 0 || len(names) == 0 {
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
	hit      Lanes
	tooLarge bool
}

var bodyLimitsTests = []bodyLimitsTest{
	// OpenAI: error.type, or the message alone.
	{"openai tokens", openAIRate, lanes(store.Tokens), false},
	{"openai requests", openAIRequests, lanes(store.Requests), false},
	{"openai tokens, type alone", `{"error":{"type":"tokens"}}`, lanes(store.Tokens), false},
	{"openai requests, type alone", `{"error":{"type":"requests"}}`, lanes(store.Requests), false},
	{"openai tokens, message alone", `{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000."}}`, lanes(store.Tokens), false},
	{"openai requests, message alone", `{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM): Limit 500."}}`, lanes(store.Requests), false},
	{"openai request too large", openAITooLarge, lanes(store.Tokens), true},
	{"openai request too large, message alone", `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 40000."}}`, lanes(store.Tokens), true},
	{"openai request too large, any case", `{"error":{"type":"tokens","message":"REQUEST TOO LARGE for m on tokens per min"}}`, lanes(store.Tokens), true},
	{"openai too large, but not first: not read", `{"error":{"type":"tokens","message":"Rate limit reached on tokens per min: request too large"}}`, lanes(store.Tokens), false},
	{"openai type is the case: Tokens is not tokens", `{"error":{"type":"Tokens"}}`, 0, false},

	{"openai insufficient_quota: spent, not too large", openAIQuota, 0, false},
	{"gemini per day: spent, not too large", geminiPerDay, lanes(store.Requests), false},
	{"vertex array, too large and spent", `[` + openAIQuota + `,` + openAITooLarge + `]`, lanes(store.Tokens), true},

	// Azure OpenAI.
	{"azure token rate limit", azureTokens, lanes(store.Tokens), false},
	{"azure call rate limit", azureCalls, lanes(store.Requests), false},

	// Anthropic.
	{"anthropic input tokens", anthropic429("This request would exceed your organization's rate limit of 1,200 input tokens per minute. Please reduce the prompt length or the maximum tokens requested, or try again later."), lanes(store.InputTokens), false},
	{"anthropic output tokens", anthropic429("This request would exceed your organization's rate limit of 3,000 output tokens per minute. Please reduce the prompt length or the maximum tokens requested, or try again later."), lanes(store.OutputTokens), false},
	{"anthropic input tokens, Anthropic's own words", anthropic429("This request would exceed the rate limit for your organization (org-1) of 40,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."), lanes(store.InputTokens), false},
	{"anthropic tokens", anthropic429("This request would exceed your organization's rate limit of 6,000 tokens per minute."), lanes(store.Tokens), false},
	{"anthropic requests", anthropic429("This request would exceed your organization's rate limit of 50 requests per minute. Please try again later."), lanes(store.Requests), false},
	{"anthropic requests, with advice that names tokens", anthropic429("This request would exceed your organization's rate limit of 50 requests per minute. Please reduce the prompt length or the maximum tokens requested, or try again later."), lanes(store.Requests), false},
	{"anthropic tokens, with advice that names output tokens", anthropic429("This request would exceed your organization's rate limit of 6,000 tokens per minute. Please reduce the output tokens requested."), lanes(store.Tokens), false},
	{"anthropic, the older words", anthropic429("Number of request tokens has exceeded your per-minute rate limit"), lanes(store.Tokens), false},
	{"anthropic outage", anthropic429("This request would exceed your organization's rate limit: every request is refused for now."), lanes(store.Requests), false},
	{"anthropic naming nothing", anthropic429("Rate limited."), 0, false},
	{"anthropic overloaded is not a limit", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 0, false},

	// Google: the QuotaFailure's quotaId or quotaMetric.
	{"gemini tokens", geminiTokens, lanes(store.Tokens), false},
	{"gemini requests", geminiRequests, lanes(store.Requests), false},
	{"gemini free tier requests", geminiPerMinute, lanes(store.Requests), false},
	{"gemini tokens, quotaId alone", quotaFailure(`{"quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier"}`), lanes(store.Tokens), false},
	{"gemini tokens, quotaMetric alone", quotaFailure(`{"quotaMetric":"generativelanguage.googleapis.com/generate_content_input_token_count"}`), lanes(store.Tokens), false},
	{"gemini requests, quotaMetric alone", quotaFailure(`{"quotaMetric":"generativelanguage.googleapis.com/generate_requests_per_model"}`), lanes(store.Requests), false},
	{"gemini both, in two violations", quotaFailure(`{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel"},{"quotaId":"GenerateContentInputTokensPerModelPerMinute"}`), lanes(store.Requests, store.Tokens), false},
	{"gemini naming neither", quotaFailure(`{"quotaId":"SomethingPerMinute","quotaMetric":"x/y"}`), 0, false},
	{"QuotaFailure without its prefix", `{"error":{"details":[{"@type":"google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinute"}]}]}}`, lanes(store.Requests), false},
	{"QuotaFailure by another @type is not read", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailureX","violations":[{"quotaId":"GenerateRequestsPerMinute"}]}]}}`, 0, false},
	{"violations outside a QuotaFailure are not read", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.Help","violations":[{"quotaId":"Tokens"}]}]}}`, 0, false},

	// Vertex AI: an array of envelopes, whose limits combine.
	{"vertex array", `[` + geminiTokens + `]`, lanes(store.Tokens), false},
	{"vertex array of two", `[` + geminiTokens + `,` + geminiRequests + `]`, lanes(store.Tokens, store.Requests), false},
	{"vertex array with junk", `[1,"x",null,[],{},{"error":null},` + geminiRequests + `]`, lanes(store.Requests), false},
	{"vertex array, too large among them", `[` + geminiRequests + `,` + openAITooLarge + `]`, lanes(store.Tokens, store.Requests), true},
	{"nested array is not an envelope", `[[` + geminiTokens + `]]`, 0, false},

	// Bodies that name nothing.
	{"too many requests", `{"error":{"message":"Too Many Requests"}}`, 0, false},
	{"vertex resource exhausted", `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`, 0, false},
	{"a 504", google504, 0, false},
	{"a retryDelay alone", retryInfo(`"3s"`), 0, false},
	{"outside the envelope", `{"type":"tokens","message":"on tokens per min","details":[{"@type":"google.rpc.QuotaFailure","violations":[{"quotaId":"Tokens"}]}]}`, 0, false},
	{"error is a string", `{"error":"Rate limit reached on tokens per min"}`, 0, false},

	// Wrong types leave out only their own field.
	{"type a number", `{"error":{"type":5,"message":"on requests per min"}}`, lanes(store.Requests), false},
	{"message a number", `{"error":{"type":"tokens","message":5}}`, lanes(store.Tokens), false},
	{"message an array", `{"error":{"message":["on tokens per min"]}}`, 0, false},
	{"type an object", `{"error":{"type":{"tokens":true}}}`, 0, false},
	{"details an object", `{"error":{"details":{"@type":"google.rpc.QuotaFailure","violations":[{"quotaId":"Tokens"}]}}}`, 0, false},
	{"wrong types everywhere", `{"error":{"code":429,"type":[],"message":null,"details":[5,null,"x",[],
		{"@type":7,"violations":[{"quotaId":"Tokens"}]},
		{"@type":"google.rpc.QuotaFailure","violations":{"quotaId":"Tokens"}},
		{"@type":"google.rpc.QuotaFailure","violations":[5,null,"Tokens",[],{"quotaId":7,"quotaMetric":["tokens"]},{"quotaId":"GenerateRequestsPerMinute"}]}]}}`, lanes(store.Requests), false},
	{"huge numbers", `{"error":{"code":1e400,"type":"tokens","n":-123456789012345678901234567890}}`, lanes(store.Tokens), false},

	// Not JSON.
	{"empty", ``, 0, false},
	{"plain text", `Too Many Requests`, 0, false},
	{"html", `<html><body>tokens per min</body></html>`, 0, false},
	{"truncated", openAIRate[:len(openAIRate)-2], 0, false},
	{"trailing garbage", openAIRate + "}}garbage", lanes(store.Tokens), false},
}

func TestBodyLimits(t *testing.T) {
	for _, tt := range bodyLimitsTests {
		t.Run(tt.name, func(t *testing.T) {
			hit, tooLarge := bodyLimits([]byte(tt.body))
			assert.Equal(t, tt.hit, hit, "the limit named")
			assert.Equal(t, tt.tooLarge, tooLarge, "too large")
			assert.Equal(t, hit, ErrorBody([]byte(tt.body)).Limits, "parseErrorBody's limits")
		})
	}
}

// TestErrorLimits reads error objects as encoding/json decodes them with
// UseNumber (parseErrorBody's decoder), and as no decoder does.
func TestErrorLimits(t *testing.T) {
	for _, tt := range []struct {
		name     string
		e        map[string]any
		hit      Lanes
		tooLarge bool
	}{
		{"nil", nil, 0, false},
		{"empty", map[string]any{}, 0, false},
		{"type tokens", map[string]any{"type": "tokens"}, lanes(store.Tokens), false},
		{"type a json.Number", map[string]any{"type": json.Number("5"), "message": "on tokens per min"}, lanes(store.Tokens), false},
		{"message too large", map[string]any{"message": "Request too large for m on tokens per min"}, lanes(store.Tokens), true},
		{"details of maps of the wrong kind", map[string]any{"details": []any{map[string]string{"@type": "google.rpc.QuotaFailure"}}}, 0, false},
		{"violations of the wrong kind", map[string]any{"details": []any{map[string]any{"@type": "google.rpc.QuotaFailure", "violations": []map[string]any{{"quotaId": "Tokens"}}}}}, 0, false},
		{"a violation", map[string]any{"details": []any{map[string]any{"@type": "google.rpc.QuotaFailure", "violations": []any{map[string]any{"quotaId": "Tokens"}}}}}, lanes(store.Tokens), false},
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
		want Lanes
	}{
		{"this request would exceed your organization's rate limit of 1,200 input tokens per minute.", lanes(store.InputTokens)},
		{"this request would exceed your organization's rate limit of 3,000 output tokens per minute.", lanes(store.OutputTokens)},
		{"this request would exceed your organization's rate limit of 6,000 tokens per minute.", lanes(store.Tokens)},
		{"this request would exceed your organization's rate limit of 50 requests per minute.", lanes(store.Requests)},
		{"rate limit of 50 requests per minute. please reduce the prompt length or the maximum tokens requested.", lanes(store.Requests)},
		{"rate limit of 1,200 input tokens per minute. please reduce the output tokens.", lanes(store.InputTokens)},
		{"number of request tokens has exceeded your per-minute rate limit", lanes(store.Tokens)},
		{"every request is refused for now.", lanes(store.Requests)},
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
		want Hint
	}{
		{"request too large", openAITooLarge, Hint{Exhausted: true}},
		{"in a vertex array", `[` + retryInfo(`"3s"`) + `,` + openAITooLarge + `]`, Hint{RetryAfter: 3 * time.Second, Exhausted: true}},
		{"rate limit reached on tokens", openAIRate, Hint{}},
		{"rate limit reached on requests", openAIRequests, Hint{}},
		{"azure token rate limit", azureTokens, Hint{}},
		{"too large outside the envelope", `{"message":"Request too large for m on tokens per min","type":"tokens"}`, Hint{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ErrorBody([]byte(tt.body))
			assert.Equal(t, tt.want, Hint{RetryAfter: got.RetryAfter, Exhausted: got.Exhausted})
		})
	}
}
