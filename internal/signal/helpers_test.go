package signal

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fixtures the readers' tests share: a now, headers, providers' error
// bodies as they send them.

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// maxDrain is how much of a body the transport reads (64 KiB).
const maxDrain = 64 << 10

func headerOf(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// post is a POST of body as http.NewRequest makes it.
func post(t *testing.T, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func itoa(n int) string { return strconv.Itoa(n) }

func pad(n int) string { return strings.Repeat("a", n) }

const (
	geminiPerMinute = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"15"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"45.837906927s"}]}}`
	geminiPerDay    = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"200"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"45.837906927s"}]}}`
	openAIQuota     = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openAIRate      = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-1 on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	google504       = `{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`
)

// retryInfo is a Gemini body whose only detail is a RetryInfo with delay.
func retryInfo(delay string) string {
	return `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":` + delay + `}]}}`
}
