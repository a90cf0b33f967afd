package retryhttptest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Limits per model, as OpenAI and Anthropic enforce them: each model named
// in ProviderConfig.Models has buckets of its own, and every other model
// shares the Provider's.

// ModelLimits are one model's own limits (ProviderConfig.Models): token
// buckets of its own, that only that model's requests are charged to and
// refused by. They replace the Provider's limits for that model, each of
// them: a zero Limit here is no limit for the model, not the Provider's.
// The zero ModelLimits is a model with no limit at all.
type ModelLimits struct {
	Requests Limit // each request costs Cost.Requests of it; none when zero
	Tokens   Limit // each request costs Cost.Tokens of it; none when zero
	// InputTokens and OutputTokens are Anthropic's, as in ProviderConfig:
	// NewProvider panics when either is set in another dialect. None when
	// zero.
	InputTokens, OutputTokens Limit
}

func (m ModelLimits) limits() []Limit {
	return []Limit{m.Requests, m.Tokens, m.InputTokens, m.OutputTokens}
}

// maxModelBody is the most of a body RequestModel reads a model from: a
// longer body has none, as if it were not JSON.
const maxModelBody = 64 << 10

// RequestModel returns the model a request with this body asks for, as a
// provider finds it: in Gemini's path, the {model} of a last segment
// models/{model}:{method} (/v1beta/models/{model}:generateContent,
// :streamGenerateContent, and Vertex AI's
// .../publishers/google/models/{model}:...); else the top-level "model"
// string of a JSON body (OpenAI, Anthropic), matched exactly (not "Model",
// not a nested one). It returns "" when neither has one, and for a body of
// more than 64 KiB or that is not a JSON object. It only reads body, and
// req's URL; req may be nil.
func RequestModel(req *http.Request, body []byte) string {
	if req != nil && req.URL != nil {
		if m := pathModel(req.URL.Path); m != "" {
			return m
		}
	}
	if len(body) == 0 || len(body) > maxModelBody {
		return ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return ""
	}
	var m string
	if json.Unmarshal(fields["model"], &m) != nil {
		return ""
	}
	return m
}

// pathModel is the {model} of a path whose last segment is
// models/{model}:{method}, or "". The kit reads the model on its own, as a
// provider would, not through the library's readers that its Provider
// tests (KeyByModel's is the same rule; internal/signal's tests import
// this package).
func pathModel(path string) string {
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return ""
	}
	model, method, ok := strings.Cut(path[i+len("/models/"):], ":")
	if !ok || model == "" || method == "" || strings.Contains(model, "/") || strings.Contains(method, "/") {
		return ""
	}
	return model
}

// ModelStats returns what the provider counted so far of the requests for
// model, as RequestModel finds it, whether the model has limits of its own
// (ProviderConfig.Models) or shares the Provider's; "" counts the requests
// with no model found. A model no request asked for has the zero
// ProviderStats. Stats is the sum over every model.
func (p *Provider) ModelStats(model string) ProviderStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.byModel[model]; s != nil {
		return *s
	}
	return ProviderStats{}
}

// modelStats is model's counters, made on its first request. The caller
// holds p.mu.
func (p *Provider) modelStats(model string) *ProviderStats {
	s := p.byModel[model]
	if s == nil {
		s = new(ProviderStats)
		p.byModel[model] = s
	}
	return s
}

// buckets is the limits a request for model is charged to: the model's
// own, or the Provider's.
func (p *Provider) buckets(model string) *[numLimits]bucket {
	if own := p.models[model]; own != nil {
		return own
	}
	return &p.limits
}
