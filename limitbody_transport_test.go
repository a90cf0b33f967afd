package retryhttp

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openAITooLarge is OpenAI's 429 for a call that asks for more than the
// whole token limit.
const openAITooLarge = `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 40000. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`

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
