package retryhttp

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/stretchr/testify/require"
)

// mostTokens is where an output cap saturates (signal.OutputCap): a cap
// past 2^62 tokens means "a cap no limit holds".
const mostTokens = 1 << 62

// FuzzEstimateTokens: whatever the body, EstimateTokens of the request
// http.NewRequest makes of it never panics, is at least ceil(len ÷ 4), and
// is exactly that plus signal.OutputCap of its first 64 KiB (fuzzed on its
// own: internal/signal's FuzzOutputCap); without GetBody it is
// ceil(len ÷ 4) alone, the body never read.
func FuzzEstimateTokens(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","max_tokens":100}`, `{"generationConfig":{"maxOutputTokens":400}}`, `{"max_tokens":4611686018427387909}`,
		`{"max_tokens":99999999999999999999}`, "\xff{", "",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := http.NewRequest(http.MethodPost, tokensURL, bytes.NewReader(body))
		require.NoError(t, err)
		in := (int64(len(body)) + 3) / 4
		outCap := signal.OutputCap(body[:min(len(body), maxDrain)])
		got := EstimateTokens(req)
		require.GreaterOrEqual(t, got, in, "EstimateTokens(%q): at least ceil(len/4)", body)
		require.Equal(t, in+outCap, got, "EstimateTokens(%q): ceil(len/4) + OutputCap", body)

		req.ContentLength = -1 // unknown: the bytes read
		require.Equal(t, got, EstimateTokens(req), "EstimateTokens(%q), length unknown", body)
		req.Body, req.ContentLength, req.GetBody = untouchable{t}, int64(len(body)), nil
		require.Equal(t, in, EstimateTokens(req), "EstimateTokens(%q) without GetBody: ContentLength alone", body)
	})
}
