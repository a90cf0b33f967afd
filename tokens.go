package retryhttp

import (
	"context"
	"net/http"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/internal/signal"
)

type tokensKey struct{}

// WithTokens returns a copy of ctx that says the call it carries costs n
// tokens against the provider's token limits (R23): what the provider
// counts, such as the prompt's tokens as tiktoken counts them plus the
// output cap (max_tokens), for OpenAI's TPM. A Cooldown that paces the
// call's key by tokens charges n instead of its estimate (EstimateTokens);
// on Anthropic's input-token limit it charges n less the output cap the
// body asks for, and on its output-token limit that cap. n <= 0 returns ctx
// unchanged: the call is estimated.
func WithTokens(ctx context.Context, n int64) context.Context {
	if n <= 0 {
		return ctx
	}
	return context.WithValue(ctx, tokensKey{}, n)
}

// EstimateTokens returns what req is estimated to cost against a
// provider's token limit when the caller does not say (WithTokens):
// ceil(body length ÷ 4), the rule of thumb of OpenAI's own guides (a token
// is about four characters of English), plus the output cap a JSON body
// asks for (max_tokens, max_completion_tokens, max_output_tokens, or
// generationConfig.maxOutputTokens), since providers charge the cap when
// they admit a call. The body is read from a GetBody copy, at most its
// first 64 KiB, never from req.Body; its length is ContentLength when
// that is known. 0 without a body, or with a body that can be had only
// from req.Body (no GetBody) and no ContentLength. It never panics (a
// GetBody or a Read that panics counts what came before it), and never
// holds a call: the copy is read for at most 40 ms of real time, and not
// past req's context; one that takes longer counts as ContentLength.
func EstimateTokens(req *http.Request) int64 {
	in, out := estimate(req)
	return in + out
}

// estimate returns req's input tokens (ceil(length ÷ 4)) and its output
// cap (EstimateTokens).
func estimate(req *http.Request) (in, out int64) {
	if req == nil || req.Body == nil || req.Body == http.NoBody {
		return 0, 0
	}
	n := max(req.ContentLength, 0)
	if req.GetBody != nil {
		if k, ok := readCopy(req, func(b []byte) { out = signal.OutputCap(b) }); ok && req.ContentLength <= 0 {
			n = k
		}
	}
	return ceilDiv4(n), out
}

// ceilDiv4 is ceil(n ÷ 4) for n >= 0, with no overflow: (n + 3) / 4 wraps
// for a ContentLength near the largest int64, and a negative cost would
// credit a token lane instead of charging it.
func ceilDiv4(n int64) int64 {
	q := n / 4
	if n%4 != 0 {
		q++
	}
	return q
}

// costs returns what a call costs on each lane (R23): 1 request; its
// tokens (WithTokens, else EstimateTokens); its input tokens (the tokens
// less the output cap); and its output cap.
func callCosts(req *http.Request) cooldown.Costs {
	in, out := estimate(req)
	total := in + out
	if n, ok := req.Context().Value(tokensKey{}).(int64); ok && n > 0 {
		total, in = n, max(n-out, 0)
		if out > n {
			in = n
		}
	}
	return cooldown.Costs{1, float64(total), float64(in), float64(out)}
}
