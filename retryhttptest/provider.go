package retryhttptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// A Limit is one of a Provider's rate limits: a token bucket that holds at
// most Size, starts full, and refills continuously at Rate a second. The
// zero Limit is no limit.
type Limit struct {
	Rate float64 // added a second; 0 or less: no limit, whatever Size
	Size int64   // the bucket, and what it holds at the start; 0 or less with a Rate: one second's worth, ceil(Rate)
}

// PerMinute returns the limit a provider states as n a minute: a bucket of
// n that refills over a minute, as OpenAI's and Anthropic's limits do. A
// n of 0 or less is no limit.
func PerMinute(n int64) Limit {
	if n <= 0 {
		return Limit{}
	}
	return Limit{Rate: float64(n) / 60, Size: n}
}

// A Cost is what one request takes from each of a Provider's limits. A
// cost of 0 or less takes nothing from its limit and always has room.
type Cost struct {
	Requests     int64 // from ProviderConfig.Requests
	Tokens       int64 // from ProviderConfig.Tokens
	InputTokens  int64 // from ProviderConfig.InputTokens
	OutputTokens int64 // from ProviderConfig.OutputTokens
}

// DefaultCost is what a request with this body costs when
// ProviderConfig.Cost is nil: 1 request; ceil(len(body) ÷ 4) tokens and as
// many input tokens; and as output tokens the output cap a JSON body asks
// for (max_tokens, max_completion_tokens, max_output_tokens or
// generationConfig.maxOutputTokens, the largest of those it has; 0 when it
// has none or is not JSON). An empty body costs 1 request and nothing else.
func DefaultCost(body []byte) Cost {
	prompt := (int64(len(body)) + 3) / 4
	return Cost{Requests: 1, Tokens: prompt, InputTokens: prompt, OutputTokens: readChat(body).outputCap()}
}

// chatBody is what the provider reads of a JSON request body: the model,
// for its error messages, and the output caps, for DefaultCost. A field of
// the wrong type is left at zero (json.Unmarshal skips it).
type chatBody struct {
	Model               string `json:"model"`
	MaxTokens           int64  `json:"max_tokens"`
	MaxCompletionTokens int64  `json:"max_completion_tokens"`
	MaxOutputTokens     int64  `json:"max_output_tokens"`
	GenerationConfig    struct {
		MaxOutputTokens int64 `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

func readChat(body []byte) chatBody {
	var b chatBody
	if len(body) > 0 {
		_ = json.Unmarshal(body, &b)
	}
	return b
}

func (b chatBody) outputCap() int64 {
	return max(0, b.MaxTokens, b.MaxCompletionTokens, b.MaxOutputTokens, b.GenerationConfig.MaxOutputTokens)
}

// ProviderConfig is what NewProvider makes a Provider of. The zero
// ProviderConfig is a provider in the OpenAI dialect with no limit, that
// answers every request at once.
type ProviderConfig struct {
	Dialect Dialect // what the answers say about the limits; the zero Dialect is OpenAIDialect

	Requests Limit // each request costs Cost.Requests of it (1 by default); the zero Limit is none
	Tokens   Limit // each request costs Cost.Tokens of it (ceil(len(body) ÷ 4) by default); none when zero
	// InputTokens and OutputTokens are Anthropic's input- and output-token
	// limits, by default ceil(len(body) ÷ 4) and the output cap the body
	// asks for. Only AnthropicDialect has them: NewProvider panics when
	// either is set in another dialect. None when zero.
	InputTokens, OutputTokens Limit

	// Models gives each model named its own limits, in place of the four
	// above (ModelLimits): buckets of its own, which no other model's
	// requests are charged to. A request's model is what RequestModel finds
	// in its path or body; a request of a model not in Models, or with no
	// model found, is charged to the four above, which all such requests
	// share. Nil: every request shares them. NewProvider panics on the
	// model "".
	Models map[string]ModelLimits

	// Cost, when set, says what a request costs instead of DefaultCost.
	// It gets the request and its body, read whole; it may be called from
	// many goroutines at once. Nil: DefaultCost(body).
	Cost func(req *http.Request, body []byte) Cost

	Latency time.Duration // how long a success takes to answer, on Clock; a 429 answers at once; 0 or less: at once
	Body    []byte        // the body of a success; nil: a small completion in the dialect's shape
	Clock   clock.Clock   // time is read, and Latency waited, on it; nil: the real clock (the bubble's in testing/synctest)
}

// Provider is a fake LLM API with rate limits, for tests of what a client
// does under them (a Cooldown above all): each limit is a token bucket
// (Limit); a request is admitted only when every limit has room for what it
// costs, and then charged to all of them; else it is answered 429 at once,
// charging nothing, in the words of the Dialect: which limit refused, and
// how long until it has room, where the dialect says so. An admitted
// request is answered 200 after the Latency. Every request counts when it
// arrives, as real providers count, however long its answer then takes.
// As OpenAI's and Anthropic's, the limits can be per model
// (ProviderConfig.Models): a model with limits of its own is charged to,
// refused by and told of its own buckets only.
//
// A request that costs more than a whole bucket never has room: in the
// OpenAI dialect it is refused ("Request too large", with no wait to ask),
// as OpenAI does; in the others it is admitted alone when that bucket is
// full, which then goes into debt and refills from below zero.
//
// A Provider works as an http.Handler (give it to httptest.NewServer) and
// as an http.RoundTripper (the base of a retryhttp.Transport, with no
// network at all), on any clock.Clock (ProviderConfig.Clock): a *Clock, on
// which its Latency is a wait like the transport's; a clock.Mock, on which
// the Latency waits until the mock is moved; or the real clock, which in a
// testing/synctest bubble is the bubble's (there only the RoundTripper
// works: see the package doc). Given a clock, it is deterministic: what it
// answers depends only on the clock's time and the order the requests
// arrive in.
//
// A Provider is made with NewProvider; the zero Provider is not usable. It
// is safe for concurrent use by multiple goroutines.
type Provider struct {
	cfg ProviderConfig
	clk clock.Clock

	mu      sync.Mutex
	limits  [numLimits]bucket             // the Provider's: of every model not in models
	models  map[string]*[numLimits]bucket // each of ProviderConfig.Models's own
	down    time.Time                     // no request is admitted before it (Outage)
	stats   ProviderStats
	byModel map[string]*ProviderStats // by RequestModel's model ("" for none)
}

// NewProvider returns a provider whose buckets, the models' too, are full
// at the clock's now. It panics on a Dialect that is not one of Dialects,
// on InputTokens or OutputTokens set (in the config or a model's limits) in
// a dialect other than AnthropicDialect, and on the model "" in Models.
func NewProvider(cfg ProviderConfig) *Provider {
	if int(cfg.Dialect) >= len(dialectNames) {
		panic("retryhttptest: NewProvider: unknown " + cfg.Dialect.String())
	}
	mustSpeak(cfg.Dialect, "", cfg.InputTokens, cfg.OutputTokens)
	p := &Provider{cfg: cfg, clk: cfg.Clock, models: make(map[string]*[numLimits]bucket, len(cfg.Models)), byModel: make(map[string]*ProviderStats)}
	if p.clk == nil {
		p.clk = clock.New()
	}
	now := p.clk.Now()
	fill := func(b *[numLimits]bucket, limits []Limit) {
		for k, l := range limits {
			b[k] = newBucket(l, now)
		}
	}
	fill(&p.limits, []Limit{cfg.Requests, cfg.Tokens, cfg.InputTokens, cfg.OutputTokens})
	for model, m := range cfg.Models {
		if model == "" {
			panic("retryhttptest: NewProvider: Models has the model \"\": a request with no model found has the Provider's limits")
		}
		mustSpeak(cfg.Dialect, model, m.InputTokens, m.OutputTokens)
		p.models[model] = new([numLimits]bucket)
		fill(p.models[model], m.limits())
	}
	return p
}

// mustSpeak panics when input or output, a limit of model ("" for the
// Provider's own), is set in a dialect that has no words for it.
func mustSpeak(d Dialect, model string, input, output Limit) {
	if d == AnthropicDialect || !(input.Rate > 0) && !(output.Rate > 0) {
		return
	}
	of := ""
	if model != "" {
		of = " of model " + strconv.Quote(model)
	}
	panic("retryhttptest: NewProvider: InputTokens and OutputTokens" + of + " are Anthropic's; the " + d.String() + " dialect has no words for them")
}

// ProviderStats is what a Provider counted.
type ProviderStats struct {
	Requests  int64 // received: admitted or refused (a RoundTrip whose context had ended is not sent, and not counted)
	Admitted  int64 // charged, and answered 200 unless the client left first
	Abandoned int64 // of Admitted, those whose client left during the Latency: nobody read the answer

	Refused             int64 // answered 429: the sum of the five below
	RefusedRequests     int64 // by the Requests limit
	RefusedTokens       int64 // by the Tokens limit
	RefusedInputTokens  int64 // by the InputTokens limit
	RefusedOutputTokens int64 // by the OutputTokens limit
	RefusedOutage       int64 // during an Outage
	TooLarge            int64 // of the refused by a limit, those that cost more than its whole bucket (OpenAI dialect: never admitted)

	Tokens, InputTokens, OutputTokens int64 // the costs of the admitted requests (counted with or without the limit; 0 or less counts 0)

	LastAdmitted time.Time // when the latest admitted request arrived, on the provider's clock; zero when none
}

// Stats returns what the provider counted so far, of every model
// (ModelStats counts each).
func (p *Provider) Stats() ProviderStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Outage makes the provider refuse every request until until, on its
// clock: a 429 in its dialect, asking for the time left of the outage where
// the dialect asks, charging nothing. It tests what a client does when a
// provider comes back. A zero or past until ends an outage at once; a later
// Outage replaces an earlier one.
func (p *Provider) Outage(until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = until
}

// ServeHTTP answers one request: the handler of an httptest.Server. It
// reads the body whole, and answers a success after the Latency, or nothing
// when the request's context ends first (the client left, or the server is
// closing).
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a := p.answer(r, body)
	if a.status == http.StatusOK && !p.await(r.Context(), a.model) {
		return
	}
	h := w.Header()
	for k, v := range a.header {
		h[k] = v
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// RoundTrip answers req as the provider would over the network, with no
// network: the base of a retryhttp.Transport. A request whose context has
// already ended is not sent, as in net/http: it fails with the context's
// cause and is not counted. The body is read whole and closed. A success
// comes after the Latency; when the request's context ends during it, the
// try fails with the context's cause, as net/http's does.
func (p *Provider) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("retryhttptest: nil Request")
	}
	if ctx := req.Context(); ctx.Err() != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, context.Cause(ctx)
	}
	body, err := readBody(req)
	if err != nil {
		return nil, fmt.Errorf("retryhttptest: reading the request body: %w", err)
	}
	a := p.answer(req, body)
	if a.status == http.StatusOK && !p.await(req.Context(), a.model) {
		return nil, context.Cause(req.Context())
	}
	r := Reply{Status: a.status, Header: a.header, Body: string(a.body)}
	return r.response(req, time.Time{}, nil), nil
}

// await waits the Latency before a success; false when ctx ended first (the
// request of model is then counted Abandoned).
func (p *Provider) await(ctx context.Context, model string) bool {
	if p.cfg.Latency <= 0 {
		return true
	}
	t := p.clk.Timer(p.cfg.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		p.mu.Lock()
		p.stats.Abandoned++
		p.modelStats(model).Abandoned++
		p.mu.Unlock()
		return false
	}
}

// An answer is what the provider says to one request, before any latency.
type answer struct {
	status int
	header http.Header
	body   []byte
	model  string // RequestModel's
}

// answer admits or refuses one request, counts it, and says so in the
// dialect.
func (p *Provider) answer(req *http.Request, body []byte) answer {
	var cost Cost
	if p.cfg.Cost != nil {
		cost = p.cfg.Cost(req, body)
	} else {
		cost = DefaultCost(body)
	}
	model := RequestModel(req, body)
	v := p.decide(model, cost)
	a := answer{status: http.StatusOK, header: make(http.Header), model: model}
	d := p.cfg.Dialect
	d.writeCounts(a.header, &v)
	if v.admitted() {
		a.header.Set("Content-Type", "application/json")
		a.body = p.cfg.Body
		if a.body == nil {
			a.body = d.success()
		}
		return a
	}
	a.status = http.StatusTooManyRequests
	if model == "" {
		model = readChat(body).Model
	}
	if model == "" {
		model = "m"
	}
	a.body = d.writeRefusal(a.header, &v, model)
	return a
}
