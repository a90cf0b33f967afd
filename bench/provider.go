package bench

// The fake provider of the goodput scenario (goodput.go): retryhttptest's
// Provider (token buckets of requests and tokens, five dialects) on a
// loopback server that counts its TCP connections.

import (
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// chatRequest is the body every call POSTs when the provider has no token
// limit (GoodputConfig.Body).
var chatRequest = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`)

// A Provider is a fake LLM API on loopback: retryhttptest's Provider with
// the limits of a GoodputConfig, one set of buckets for all its clients. A
// request that has room for its cost when it arrives is answered 200 after
// the Latency, as a model takes its time to answer; the others are answered
// 429 at once, as real providers refuse at once. What the answers say about
// the limits is the Dialect's.
type Provider struct {
	URL   string    // where to POST: the server's /v1/chat/completions
	Start time.Time // just before the buckets were filled

	kit *retryhttptest.Provider
	srv *server
}

// NewProvider starts a provider with the limits, dialect and latency of c,
// its buckets full. Close it when done.
func NewProvider(c GoodputConfig) *Provider {
	p := &Provider{Start: time.Now()}
	p.kit = retryhttptest.NewProvider(c.providerConfig())
	p.srv = newServer(func(_ *server, w http.ResponseWriter, r *http.Request) { p.kit.ServeHTTP(w, r) })
	p.URL = p.srv.URL + "/v1/chat/completions"
	return p
}

// providerConfig is the kit's provider for c, on the real clock: R
// requests a second into a bucket of B, and, when c has a token limit, T
// tokens a second into a bucket of its own. Every success answers
// CompletionBody, in every dialect.
func (c GoodputConfig) providerConfig() retryhttptest.ProviderConfig {
	cfg := retryhttptest.ProviderConfig{Dialect: c.Dialect, Latency: c.Latency, Body: CompletionBody,
		Requests: retryhttptest.Limit{Rate: float64(c.Rate), Size: int64(c.Burst)}}
	if c.TokenRate > 0 {
		cfg.Tokens = retryhttptest.Limit{Rate: float64(c.TokenRate), Size: int64(c.TokenBurst)}
	}
	return cfg
}

// ProviderStats is what a provider counted: the kit's counts, and the
// loopback server's.
type ProviderStats struct {
	retryhttptest.ProviderStats
	Conns     int64         // TCP connections accepted
	AdmitSpan time.Duration // from Start to the latest admission; 0 when none
}

// Stats returns the provider's counts so far.
func (p *Provider) Stats() ProviderStats {
	s := ProviderStats{ProviderStats: p.kit.Stats(), Conns: p.srv.conns.Load()}
	if !s.LastAdmitted.IsZero() {
		s.AdmitSpan = s.LastAdmitted.Sub(p.Start)
	}
	return s
}

// Close closes every connection and stops the server.
func (p *Provider) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}
