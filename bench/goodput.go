package bench

// Goodput under a provider's rate limit: many workers share a fixed number of
// calls (or a fixed time) to a fake LLM provider (retryhttptest's Provider)
// that admits R requests a second (a token bucket with burst B) and, with a
// token limit, T tokens a second (a bucket of its own), answers the calls
// it admits after a latency, and the rest 429 at once, saying what OpenAI,
// Anthropic, Gemini or a plainer server says. Each client row runs against
// a fresh provider with full buckets and a fresh base transport; cmd/goodput
// runs every row and prints the tables.

import (
	"math"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// GoodputConfig is one run of the goodput scenario.
type GoodputConfig struct {
	Rate    int                   // R: requests a second the provider admits
	Burst   int                   // B: its bucket's size
	Dialect retryhttptest.Dialect // what the provider says about its limits; the zero Dialect is OpenAI's
	Latency time.Duration         // L: how long the provider takes to answer an admitted request; 0 answers at once
	Workers int                   // C: calls in flight at once
	// Replicas (K) deals the workers among K clients, each over its own
	// base transport with its own Transport and Cooldown, as K replicas of
	// a backend are; 0 or 1: one client.
	Replicas int
	Calls    int // N: calls per client row, shared by the workers; unused when Duration > 0
	// Duration, when above 0, bounds the run by time instead of by Calls:
	// each worker makes calls one after another until Duration has passed
	// since the start, and only what ended within it counts. The calls
	// still running then are cut short (their context ends) and counted as
	// Cut, neither ok nor failed.
	Duration time.Duration
	Timeout  time.Duration // each call's context; no Budget

	// TokenRate, when above 0, gives the provider a token limit as well
	// (issue 22): T tokens a second into a bucket of TokenBurst (0 or less:
	// T, a second's worth), each request costing ceil(len(body) ÷ 4). The
	// calls then send prompts of varying sizes (PromptTokens) instead of
	// one small chat request. 0: no token limit.
	TokenRate, TokenBurst int
	Seed                  uint64 // draws the prompts' sizes (PromptTokens): the same seed, the same prompts
}

// DefaultGoodput is the full run of issue 16: R=100/s, B=10, OpenAI's
// dialect, answers at once, C=64, N=1000, 60 s a call, no token limit.
var DefaultGoodput = GoodputConfig{Rate: 100, Burst: 10, Workers: 64, Calls: 1000, Timeout: 60 * time.Second}

// TokenGoodput is issue 22's load: DefaultGoodput with a token limit of T =
// 50,000 tokens a second (a bucket of 50,000) and N=400 calls whose prompts
// run from 100 to 4,000 tokens (mean about 1,500). The tokens bind first:
// 50,000 / 1,500 is 33 calls a second, a third of R.
var TokenGoodput = GoodputConfig{Rate: 100, Burst: 10, Workers: 64, Calls: 400, Timeout: 60 * time.Second,
	TokenRate: 50000, TokenBurst: 50000, Seed: 1}

// TokenBucket is the token bucket's size: TokenBurst, or when that is 0
// or less a second's worth, TokenRate.
func (c GoodputConfig) TokenBucket() int {
	if c.TokenBurst > 0 {
		return c.TokenBurst
	}
	return c.TokenRate
}

// GoodputTargets are the targets for one row of a goodput table: issue 16's
// without a token limit, issue 22's with one. A zero Goodput or TokenShare
// is no target.
type GoodputTargets struct {
	RequestsPerSuccess float64       // at most
	Goodput            float64       // at least (issue 16)
	TokenShare         float64       // at least (issue 22)
	P99                time.Duration // at most
	// and no failed call (calls Cut at the end of a timed run are not failed)
}

// Targets returns the targets for runs of c. Without a token limit, issue
// 16's: at most 1.2 requests per success, goodput at least 0.9 (0.85 when
// the provider gives no hint, where a client can only guess), no failed
// call, and p99 at most 2 × C / R + L: a call that waits its turn behind
// every other worker twice over, then takes its answer's time. With one,
// issue 22's: at most 1.1 requests per success, at least 0.9 of the token
// limit served, no failed call, and p99 at most 2 × C × the mean prompt ÷ T
// + L, a second more where the provider speaks whole seconds only
// (Anthropic, RetryAfter).
func (c GoodputConfig) Targets() GoodputTargets {
	if c.TokenRate > 0 {
		t := GoodputTargets{RequestsPerSuccess: 1.1, TokenShare: 0.9}
		t.P99 = seconds(2*float64(c.Workers)*c.MeanPrompt()/float64(c.TokenRate)) + c.Latency
		if c.Dialect == retryhttptest.AnthropicDialect || c.Dialect == retryhttptest.RetryAfterDialect {
			t.P99 += time.Second
		}
		return t
	}
	t := GoodputTargets{RequestsPerSuccess: 1.2, Goodput: 0.9}
	if c.Dialect == retryhttptest.BareDialect {
		t.Goodput = 0.85
	}
	if c.Rate > 0 {
		t.P99 = seconds(2*float64(c.Workers)/float64(c.Rate)) + c.Latency
	}
	return t
}

// seconds converts s to a Duration, rounded up to the nanosecond.
func seconds(s float64) time.Duration {
	return time.Duration(math.Ceil(max(s, 0) * 1e9))
}

// Missed returns the targets r misses, by name ("requests/success",
// "goodput", "token share", "failed", "p99"), in that order; none when it
// meets them all.
func (t GoodputTargets) Missed(r GoodputReport) []string {
	var missed []string
	if !(r.RequestsPerSuccess() <= t.RequestsPerSuccess) {
		missed = append(missed, "requests/success")
	}
	if t.Goodput > 0 && !(r.Goodput() >= t.Goodput) {
		missed = append(missed, "goodput")
	}
	if t.TokenShare > 0 && !(r.TokenShare() >= t.TokenShare) {
		missed = append(missed, "token share")
	}
	if r.Failed > 0 {
		missed = append(missed, "failed")
	}
	if r.P99 > t.P99 {
		missed = append(missed, "p99")
	}
	return missed
}

// GoodputRows are the clients of the goodput table, in its order. Each is
// set up as in the other scenarios (Shaped backoff, 3 tries) unless its name
// says otherwise; add a Lib here to add a row. The reference
// configuration is RetryHTTPCooldownRetries10.
func GoodputRows() []Lib {
	return []Lib{Bare, RetryHTTP, RetryHTTPRetries10, RetryHTTPCooldown, RetryHTTPCooldownRetries10, Retryablehttp, Failsafe}
}

// GoodputReport is one client row.
type GoodputReport struct {
	Client string
	Config GoodputConfig

	Calls    int    // calls made: Config.Calls, or as many as the workers began within Duration
	OK       int    // calls that got a 200 (within Duration, when it is set)
	Failed   int    // calls that ended otherwise (within Duration, when it is set)
	Cut      int    // calls still running when Duration was up, ended by the run; 0 without Duration
	Got429   int    // failed calls handed a 429 response
	GotOther int    // failed calls handed another status
	Errors   int    // failed calls handed an error
	FirstErr string // the text of one such error
	TokensOK int64  // the tokens (ceil(len(body) ÷ 4)) of the calls that got a 200

	Provider ProviderStats

	Wall      time.Duration   // first call sent to last call ended, cut calls included
	IdealOK   int             // the most calls that could have ended ok in Span (GoodputConfig.IdealOK)
	Latencies []time.Duration // of every call ok or failed, from Do to the end of the body; not of cut calls
	P50, P99  time.Duration   // of Latencies
	Max       time.Duration
}

// Span is the time the run is judged over: Config.Duration when it is set,
// else Wall.
func (r GoodputReport) Span() time.Duration {
	if r.Config.Duration > 0 {
		return r.Config.Duration
	}
	return r.Wall
}

// RequestsPerSuccess is requests the provider received per call that got a
// 200; +Inf when none did. A timed run leaves out the requests admitted but
// not yet answered when it ended (Provider.Abandoned): they are not waste,
// their calls were cut short on their way to a success.
func (r GoodputReport) RequestsPerSuccess() float64 {
	if r.OK == 0 {
		return math.Inf(1)
	}
	n := r.Provider.Requests
	if r.Config.Duration > 0 {
		n -= r.Provider.Abandoned
	}
	return float64(n) / float64(r.OK)
}

// Goodput is the calls that ended ok within Span over the most that could
// have (IdealOK): 1 is as good as any client can do against this provider
// with these workers, whether the bucket or the workers are what limits (C /
// L below R). A run that is slower than the ideal lowers it, since the ideal
// client would have ended more calls in the same time. It can pass 1 by a
// hair: the provider's bucket starts refilling as it starts, just before
// the first call. 0 when IdealOK is 0.
func (r GoodputReport) Goodput() float64 {
	if r.IdealOK <= 0 {
		return 0
	}
	return float64(r.OK) / float64(r.IdealOK)
}

// TokenShare is the share of the token limit the run was served (issue
// 22): the tokens of the calls that ended ok within Span, over what the
// limit gives in that time, its bucket plus T × (Span − L) (the last
// answers come L after their admission). 1 is all of it; the last calls'
// sizes keep it a little below. 0 without a token limit.
func (r GoodputReport) TokenShare() float64 {
	c := r.Config
	if c.TokenRate <= 0 {
		return 0
	}
	limit := float64(c.TokenBucket()) + float64(c.TokenRate)*max(0, (r.Span()-c.Latency).Seconds())
	return float64(r.TokensOK) / limit
}

// percentile is the nearest-rank p-quantile of sorted (0 when empty).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
