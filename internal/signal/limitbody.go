package signal

import (
	"strings"

	"github.com/retryhttp/retryhttp/store"
)

// Lanes is a set of lanes: bit l for store.LaneID l.
type Lanes uint8

// bodyLimits is what ErrorBody reads of the limit a provider's
// rate-limit error names, and whether it says the call is too large.
func bodyLimits(body []byte) (hit Lanes, tooLarge bool) {
	h := ErrorBody(body)
	return h.Limits, h.TooLarge
}

// errorLimits reads which limit one error object of a provider's JSON
// error body says a 429 is about (R23: a 429 cuts or holds only the limit
// it hit), in each provider's words:
//
//   - OpenAI: error.type "tokens" or "requests", or its message's "on
//     tokens per min (TPM)" / "on requests per min (RPM)";
//   - Azure OpenAI: "exceeded token rate limit" / "exceeded call rate
//     limit" in error.message;
//   - Anthropic: a rate_limit_error whose message names input tokens,
//     output tokens, tokens or requests;
//   - Google: a google.rpc.QuotaFailure violation whose quotaId or
//     quotaMetric names tokens or requests.
//
// tooLarge is OpenAI's "Request too large ... on tokens per min": a call
// asking for more than the whole limit, which can never succeed.
func errorLimits(e map[string]any) (hit Lanes, tooLarge bool) {
	typ, _ := e["type"].(string)
	msg, _ := e["message"].(string)
	lower := strings.ToLower(msg)
	switch {
	case typ == "rate_limit_error":
		// First: Anthropic's "1,200 input tokens per minute" also holds
		// OpenAI's "tokens per min", and would be read as the tokens limit.
		hit |= anthropicLimit(lower)
	case typ == "tokens" || strings.Contains(lower, "tokens per min"):
		hit |= 1 << store.Tokens
		tooLarge = strings.HasPrefix(lower, "request too large")
	case typ == "requests" || strings.Contains(lower, "requests per min"):
		hit |= 1 << store.Requests
	case strings.Contains(lower, "exceeded token rate limit"):
		hit |= 1 << store.Tokens
	case strings.Contains(lower, "exceeded call rate limit"):
		hit |= 1 << store.Requests
	}
	details, _ := e["details"].([]any)
	for _, d := range details {
		d, _ := d.(map[string]any)
		if t, _ := d["@type"].(string); !strings.HasSuffix(t, "google.rpc.QuotaFailure") {
			continue
		}
		violations, _ := d["violations"].([]any)
		for _, v := range violations {
			v, _ := v.(map[string]any)
			id, _ := v["quotaId"].(string)
			metric, _ := v["quotaMetric"].(string)
			switch q := strings.ToLower(id + " " + metric); {
			case strings.Contains(q, "token"):
				hit |= 1 << store.Tokens
			case strings.Contains(q, "request"):
				hit |= 1 << store.Requests
			}
		}
	}
	return hit, tooLarge
}

// anthropicLimit reads which limit an Anthropic rate_limit_error's message
// (lowercased) names: the rate it states ("of 50 requests per minute"),
// else the first words that name one. The rate comes first because the
// advice after it ("reduce the prompt length or the maximum tokens
// requested") names tokens whatever the limit was.
func anthropicLimit(msg string) Lanes {
	for _, r := range anthropicRates {
		if strings.Contains(msg, r.words) {
			return 1 << r.lane
		}
	}
	switch {
	case strings.Contains(msg, "input tokens"):
		return 1 << store.InputTokens
	case strings.Contains(msg, "output tokens"):
		return 1 << store.OutputTokens
	case strings.Contains(msg, "tokens"):
		return 1 << store.Tokens
	case strings.Contains(msg, "request"):
		return 1 << store.Requests
	}
	return 0
}

// anthropicRates are the rates an Anthropic message states, the longer
// words first ("input tokens per minute" holds "tokens per minute").
var anthropicRates = [...]struct {
	words string
	lane  store.LaneID
}{
	{"input tokens per minute", store.InputTokens},
	{"output tokens per minute", store.OutputTokens},
	{"tokens per minute", store.Tokens},
	{"requests per minute", store.Requests},
}
