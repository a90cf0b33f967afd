package retryhttptest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// What a Provider says about its limits, in the words of the APIs a
// retryhttp user calls. Each dialect tells a client a different amount, so
// each tests a different path of it: the exact wait (retry-after-ms, a
// retryDelay), a coarse one (whole seconds), the provider's counts, or
// nothing but its own backoff.

// A Dialect is what a Provider says about its limits: the headers on every
// answer, and what a 429 carries. The zero Dialect is OpenAIDialect.
type Dialect uint8

const (
	// OpenAIDialect sends x-ratelimit-{limit,remaining,reset}-requests for
	// the Requests limit and x-ratelimit-{limit,remaining,reset}-tokens for
	// the Tokens limit on every answer (limit: the bucket's size; remaining:
	// after this request; reset: until the bucket is full, as OpenAI writes
	// it: "20ms", "1.5s", "6m0s", rounded up to the millisecond). A 429 has
	// retry-after-ms (until the limit that refused has room for the
	// request, rounded up, at least 1), Retry-After (the same in whole
	// seconds, rounded up, at least 1) and OpenAI's error body, "Rate limit
	// reached for m in organization org-fake on tokens per min (TPM): Limit
	// 50000, Used 49000, Requested 1500. Please try again in 1.2s. ..."
	// (type "tokens" or "requests", code "rate_limit_exceeded"). A request
	// larger than a whole bucket is refused with "Request too large for m
	// ... The input or output tokens must be reduced in order to run
	// successfully." and no wait: it can never succeed.
	OpenAIDialect Dialect = iota
	// AnthropicDialect sends anthropic-ratelimit-{requests,tokens,
	// input-tokens,output-tokens}-{limit,remaining,reset} for each limit that
	// is set, on every answer; the reset is when the bucket is full again,
	// an RFC 3339 time at whole seconds, rounded up. A 429 has Retry-After
	// (whole seconds, rounded up, at least 1) and Anthropic's error body
	// (type rate_limit_error), "This request would exceed your
	// organization's rate limit of 3,000 input tokens per minute. ...",
	// naming the limit that refused. No retry-after-ms.
	AnthropicDialect
	// RetryAfterDialect sends no counts; a 429 has Retry-After alone (whole
	// seconds, rounded up, at least 1), as gateways do, and Azure OpenAI's
	// error body: "Requests to the ChatCompletions_Create Operation under
	// Azure OpenAI API version 2024-10-21 have exceeded token rate limit of
	// your current OpenAI S0 pricing tier. Please retry after 2 seconds.
	// ..." ("call rate limit" for the Requests limit).
	RetryAfterDialect
	// GeminiDialect sends no header about its limits; a 429 has Google's
	// error body (code 429, status RESOURCE_EXHAUSTED) whose details are a
	// google.rpc.QuotaFailure naming the limit in its violation's
	// quotaMetric and quotaId (GenerateContentInputTokensPerModelPerMinute
	// for tokens, GenerateRequestsPerMinutePerProjectPerModel for requests)
	// and a google.rpc.RetryInfo whose retryDelay is the exact time until
	// room, as protobuf's JSON writes a duration ("0.013000001s").
	GeminiDialect
	// BareDialect says nothing: a 429 with no hint at all, and a text/plain
	// body. A client has only its own backoff to go by.
	BareDialect
)

var dialectNames = [...]string{"openai", "anthropic", "retry-after", "gemini", "bare"}

// String returns the dialect's name, fit for a subtest: "openai",
// "anthropic", "retry-after", "gemini" or "bare".
func (d Dialect) String() string {
	if int(d) < len(dialectNames) {
		return dialectNames[d]
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// Dialects returns every dialect, in the order of their constants, for a
// table that runs a case through each.
func Dialects() []Dialect {
	return []Dialect{OpenAIDialect, AnthropicDialect, RetryAfterDialect, GeminiDialect, BareDialect}
}

// The words each dialect has for each limit.
var (
	openAINames    = [numLimits]string{"Requests", "Tokens"}
	anthropicNames = [numLimits]string{"Requests", "Tokens", "Input-Tokens", "Output-Tokens"}
	limitWords     = [...]string{"requests", "tokens", "input tokens", "output tokens", "requests"}
)

// writeCounts sets on h the dialect's counts of every limit it names.
func (d Dialect) writeCounts(h http.Header, v *verdict) {
	for k, s := range v.states {
		switch {
		case !s.on:
		case d == OpenAIDialect && openAINames[k] != "":
			h.Set("X-Ratelimit-Limit-"+openAINames[k], strconv.FormatInt(s.size, 10))
			h.Set("X-Ratelimit-Remaining-"+openAINames[k], strconv.FormatInt(s.remaining, 10))
			h.Set("X-Ratelimit-Reset-"+openAINames[k], formatReset(s.reset))
		case d == AnthropicDialect:
			h.Set("Anthropic-Ratelimit-"+anthropicNames[k]+"-Limit", strconv.FormatInt(s.size, 10))
			h.Set("Anthropic-Ratelimit-"+anthropicNames[k]+"-Remaining", strconv.FormatInt(s.remaining, 10))
			h.Set("Anthropic-Ratelimit-"+anthropicNames[k]+"-Reset", formatResetTime(v.now.Add(s.reset)))
		}
	}
}

// writeRefusal sets on h what a 429 of the dialect carries for v, and
// returns its body.
func (d Dialect) writeRefusal(h http.Header, v *verdict, model string) []byte {
	secs := ceilUnits(v.wait, time.Second)
	if d != BareDialect && d != GeminiDialect && !v.never {
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	switch d {
	case OpenAIDialect:
		if !v.never {
			h.Set("Retry-After-Ms", strconv.FormatInt(ceilUnits(v.wait, time.Millisecond), 10))
		}
		h.Set("Content-Type", "application/json")
		return openAIBody(v, model)
	case AnthropicDialect:
		h.Set("Content-Type", "application/json")
		return anthropicBody(v)
	case RetryAfterDialect:
		h.Set("Content-Type", "application/json")
		return azureBody(v, secs)
	case GeminiDialect:
		h.Set("Content-Type", "application/json")
		return geminiBody(v, model)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	return []byte("Too Many Requests\n")
}

// mustJSON encodes v, which is always encodable, without HTML escaping (a
// provider writes "&" as itself).
func mustJSON(v any) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("retryhttptest: " + err.Error())
	}
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

func openAIBody(v *verdict, model string) []byte {
	type e struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	}
	on, typ := "requests per min (RPM)", "requests"
	if v.by == tokensLimit {
		on, typ = "tokens per min (TPM)", "tokens"
	}
	var msg string
	switch s := v.state(); {
	case v.by == outageKind:
		msg = fmt.Sprintf("Rate limit reached for %s in organization org-fake on %s: every request is refused for now. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.", model, on, formatReset(v.wait))
	case v.never:
		msg = fmt.Sprintf("Request too large for %s in organization org-fake on %s: Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.", model, on, s.size, v.cost())
	default:
		msg = fmt.Sprintf("Rate limit reached for %s in organization org-fake on %s: Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.", model, on, s.size, s.size-s.remaining, v.cost(), formatReset(v.wait))
	}
	return mustJSON(map[string]e{"error": {Message: msg, Type: typ, Code: "rate_limit_exceeded"}})
}

func anthropicBody(v *verdict) []byte {
	msg := "This request would exceed your organization's rate limit: every request is refused for now. Please try again later."
	if v.by != outageKind {
		advice := "Please reduce the prompt length or the maximum tokens requested, or try again later."
		if v.by == requestsLimit {
			advice = "Please try again later."
		}
		msg = fmt.Sprintf("This request would exceed your organization's rate limit of %s %s per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. %s",
			commas(v.state().perMinute), limitWords[v.by], advice)
	}
	type e struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	return mustJSON(struct {
		Type  string `json:"type"`
		Error e      `json:"error"`
	}{"error", e{"rate_limit_error", msg}})
}

func azureBody(v *verdict, seconds int64) []byte {
	limit, unit := "call", "seconds"
	if v.by == tokensLimit {
		limit = "token"
	}
	if seconds == 1 {
		unit = "second"
	}
	msg := fmt.Sprintf("Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded %s rate limit of your current OpenAI S0 pricing tier. Please retry after %d %s. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit.", limit, seconds, unit)
	type e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	return mustJSON(map[string]e{"error": {"429", msg}})
}

func geminiBody(v *verdict, model string) []byte {
	metric, id := "generativelanguage.googleapis.com/generate_requests_per_model", "GenerateRequestsPerMinutePerProjectPerModel"
	if v.by == tokensLimit {
		metric, id = "generativelanguage.googleapis.com/generate_content_input_token_count", "GenerateContentInputTokensPerModelPerMinute"
	}
	delay := formatProtoDuration(v.wait)
	type violation struct {
		QuotaMetric     string            `json:"quotaMetric"`
		QuotaID         string            `json:"quotaId"`
		QuotaDimensions map[string]string `json:"quotaDimensions"`
		QuotaValue      string            `json:"quotaValue,omitempty"`
	}
	type detail struct {
		Type       string      `json:"@type"`
		Violations []violation `json:"violations,omitempty"`
		RetryDelay string      `json:"retryDelay,omitempty"`
	}
	viol := violation{QuotaMetric: metric, QuotaID: id, QuotaDimensions: map[string]string{"location": "global", "model": model}}
	if v.by != outageKind {
		viol.QuotaValue = strconv.FormatInt(v.state().perMinute, 10)
	}
	type e struct {
		Code    int      `json:"code"`
		Message string   `json:"message"`
		Status  string   `json:"status"`
		Details []detail `json:"details"`
	}
	return mustJSON(map[string]e{"error": {429,
		"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. Please retry in " + delay + ".",
		"RESOURCE_EXHAUSTED",
		[]detail{
			{Type: "type.googleapis.com/google.rpc.QuotaFailure", Violations: []violation{viol}},
			{Type: "type.googleapis.com/google.rpc.RetryInfo", RetryDelay: delay},
		}}})
}

// state is the refusing limit's state; the zero limitState for an outage.
func (v *verdict) state() limitState {
	if v.by < numLimits {
		return v.states[v.by]
	}
	return limitState{}
}

// cost is what the request asked of the limit that refused it.
func (v *verdict) cost() int64 {
	if v.by < numLimits {
		return v.costs[v.by]
	}
	return 0
}

// The bodies of a success, in each API's shape.
var (
	openAISuccess    = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1764500000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`)
	anthropicSuccess = []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}`)
	geminiSuccess    = []byte(`{"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1,"totalTokenCount":10},"modelVersion":"m"}`)
)

func (d Dialect) success() []byte {
	switch d {
	case AnthropicDialect:
		return anthropicSuccess
	case GeminiDialect:
		return geminiSuccess
	}
	return openAISuccess
}

// formatReset writes d as OpenAI writes x-ratelimit-reset-*: Go's duration
// syntax at millisecond resolution ("20ms", "1.5s", "6m0s"), rounded up so
// that the reset is never earlier than the bucket's; "0s" when d <= 0.
func formatReset(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	if d < time.Second {
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return d.String()
}

// formatResetTime writes t as Anthropic writes its reset times: RFC 3339 in
// UTC at whole seconds, rounded up so that it is never earlier than t.
func formatResetTime(t time.Time) string {
	return ceilSecond(t).UTC().Format(time.RFC3339)
}

// formatProtoDuration writes d as protobuf's JSON writes a
// google.protobuf.Duration: seconds with 0, 3, 6 or 9 fractional digits and
// an "s" ("13s", "0.013s", "0.013000001s"). A negative d is written as 0.
func formatProtoDuration(d time.Duration) string {
	d = max(d, 0)
	s, ns := int64(d/time.Second), int64(d%time.Second)
	switch {
	case ns == 0:
		return fmt.Sprintf("%ds", s)
	case ns%1e6 == 0:
		return fmt.Sprintf("%d.%03ds", s, ns/1e6)
	case ns%1e3 == 0:
		return fmt.Sprintf("%d.%06ds", s, ns/1e3)
	}
	return fmt.Sprintf("%d.%09ds", s, ns)
}

// ceilUnits is d in whole units, rounded up, at least 1.
func ceilUnits(d, unit time.Duration) int64 {
	n := int64(d / unit)
	if d%unit > 0 {
		n++
	}
	return max(1, n)
}

// commas writes n with a comma between each three digits: 50,000.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
