package bench

// The dialects of the goodput tables: what the fake provider says about its
// limits, in the words of the APIs a retryhttp user calls. Each is
// retryhttptest's (provider_dialect.go there); here are only their names
// on the command line and their descriptions in the tables.

import (
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// DialectByName returns the dialect whose String is name ("openai",
// "anthropic", "retry-after", "gemini", "bare").
func DialectByName(name string) (retryhttptest.Dialect, bool) {
	for _, d := range retryhttptest.Dialects() {
		if d.String() == name {
			return d, true
		}
	}
	return 0, false
}

// Describe says in a line of markdown what the dialect sends, for the
// tables; tokens says whether the provider has a token limit, whose counts
// the dialects that send counts send too.
func Describe(d retryhttptest.Dialect, tokens bool) string {
	switch d {
	case retryhttptest.OpenAIDialect:
		if tokens {
			return "429 with `retry-after-ms` (exact, ms), `Retry-After` (whole seconds, at least 1) and OpenAI's body naming the limit; `x-ratelimit-{limit,remaining,reset}-requests` and `-tokens` on every response (limit = the bucket)"
		}
		return "429 with `retry-after-ms` (exact, ms), `Retry-After` (whole seconds, at least 1); `x-ratelimit-{limit,remaining,reset}-requests` on every response (limit = B)"
	case retryhttptest.AnthropicDialect:
		if tokens {
			return "429 with `Retry-After` (whole seconds, at least 1) and Anthropic's body naming the limit; `anthropic-ratelimit-requests-{limit,remaining,reset}` and `anthropic-ratelimit-tokens-*` on every response (limit = the bucket, reset an RFC 3339 time rounded up to the second)"
		}
		return "429 with `Retry-After` (whole seconds, at least 1); `anthropic-ratelimit-requests-{limit,remaining,reset}` on every response (limit = B, reset an RFC 3339 time rounded up to the second)"
	case retryhttptest.RetryAfterDialect:
		return "429 with `Retry-After` alone (whole seconds, at least 1) and Azure's body naming the limit; no counts"
	case retryhttptest.GeminiDialect:
		return "429 with no rate-limit header and Google's JSON error: a `QuotaFailure` naming the limit, `RetryInfo.retryDelay` exact (\"0.013000001s\"); no counts"
	case retryhttptest.BareDialect:
		return "429 with no hint at all; no counts"
	}
	return d.String()
}
