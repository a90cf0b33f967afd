// Package bench measures what retryhttp costs a request, side by side with
// the retrying transports a user would pick instead: hashicorp's
// go-retryablehttp, failsafe-go's failsafehttp, and the bare base transport.
// It is a module of its own so that the library's go.mod stays three
// dependencies long. bench/run runs everything and writes RESULTS.md.
//
// Every library is set up the same way (Lib.Wrap): 2 retries (3 tries), its
// own backoff shaped like retryhttp.DefaultBackoff (400 ms, doubling, 30 s
// cap), no logging, and the caller's base transport underneath.
package bench

import (
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/retryhttp/retryhttp"
)

// Backoff says how long the libraries wait between tries.
type Backoff int

const (
	// Shaped is each library's own backoff set up like
	// retryhttp.DefaultBackoff: 400 ms before the first retry, doubling,
	// capped at 30 s, with ±20% jitter where the library has it.
	Shaped Backoff = iota
	// Zero waits nothing between tries, so an outage runs at full speed.
	Zero
)

// MaxRetries is the same for every library: 3 tries in all.
const MaxRetries = 2

// A Lib is one way of sending requests: a name for the tables and a function
// that puts it over a base transport. Each call of Wrap builds a fresh
// instance (its own Quota or budget, say), shared by every request sent
// through the RoundTripper it returns.
type Lib struct {
	Name    string
	Retries bool // false for the bare transport
	Wrap    func(base http.RoundTripper, b Backoff) http.RoundTripper
}

var (
	// Bare is the base transport alone: the floor.
	Bare = Lib{Name: "bare", Wrap: func(base http.RoundTripper, _ Backoff) http.RoundTripper { return base }}

	// Floor is the least a retrying RoundTripper can do on a first-try
	// success: call the base, look at the status, return. It is the limit
	// R16 measures retryhttp's first try against (at most 2x its cost); it
	// never retries.
	Floor = Lib{Name: "floor", Wrap: func(base http.RoundTripper, _ Backoff) http.RoundTripper { return &floorWrapper{base: base} }}

	// RetryHTTP is this library with its defaults (2 retries,
	// DefaultBackoff, no-op logger).
	RetryHTTP = Lib{Name: "retryhttp", Retries: true, Wrap: func(base http.RoundTripper, b Backoff) http.RoundTripper {
		return retryhttp.New(base, retryhttpOptions(b)...)
	}}

	// RetryHTTPQuota adds a Quota with gRPC's usual values (10 tokens,
	// 0.1 back per success), shared by every request of the RoundTripper.
	RetryHTTPQuota = Lib{Name: "retryhttp+quota", Retries: true, Wrap: func(base http.RoundTripper, b Backoff) http.RoundTripper {
		return retryhttp.New(base, append(retryhttpOptions(b), retryhttp.WithQuota(retryhttp.NewQuota(10, 0.1)))...)
	}}

	// RetryHTTPRetries10 is RetryHTTP with WithMaxRetries(10): 11 tries, for
	// callers who would rather wait out a rate limit than fail.
	RetryHTTPRetries10 = Lib{Name: "retryhttp+retries10", Retries: true, Wrap: func(base http.RoundTripper, b Backoff) http.RoundTripper {
		return retryhttp.New(base, append(retryhttpOptions(b), retryhttp.WithMaxRetries(10))...)
	}}

	// RetryHTTPCooldown adds a Cooldown keyed by scheme://host
	// (NewCooldown(nil)), shared by every request of the RoundTripper (R17).
	RetryHTTPCooldown = Lib{Name: "retryhttp+cooldown", Retries: true, Wrap: func(base http.RoundTripper, b Backoff) http.RoundTripper {
		return retryhttp.New(base, append(retryhttpOptions(b), retryhttp.WithCooldown(retryhttp.NewCooldown(nil)))...)
	}}

	// RetryHTTPCooldownRetries10 is RetryHTTPCooldown with WithMaxRetries(10).
	RetryHTTPCooldownRetries10 = Lib{Name: "retryhttp+cooldown+retries10", Retries: true, Wrap: func(base http.RoundTripper, b Backoff) http.RoundTripper {
		return retryhttp.New(base, append(retryhttpOptions(b), retryhttp.WithCooldown(retryhttp.NewCooldown(nil)), retryhttp.WithMaxRetries(10))...)
	}}

	// Retryablehttp is go-retryablehttp's RoundTripper (what
	// Client.StandardClient installs) over a Client whose HTTPClient sends
	// through base. Its default logger, which writes a DEBUG line to stderr
	// for every request, is turned off.
	Retryablehttp = Lib{Name: "go-retryablehttp", Retries: true, Wrap: func(base http.RoundTripper, b Backoff) http.RoundTripper {
		c := retryablehttp.NewClient()
		c.HTTPClient = &http.Client{Transport: base}
		c.Logger = nil
		c.RetryMax = MaxRetries
		c.RetryWaitMin, c.RetryWaitMax = 400*time.Millisecond, 30*time.Second // DefaultBackoff: min * 2^i, capped
		if b == Zero {
			c.RetryWaitMin, c.RetryWaitMax = 0, 0
		}
		return &retryablehttp.RoundTripper{Client: c}
	}}

	// Failsafe is failsafehttp.NewRoundTripper with the retry policy
	// failsafehttp.NewRetryPolicyBuilder builds (it retries 429 and 5xx but
	// 501, and honours Retry-After on 429 and 503), 2 retries, backoff 400 ms
	// doubling to 30 s, jitter factor 0.2, and ReturnLastFailure so that,
	// like retryhttp, it hands back the last response when retries run out.
	Failsafe = Lib{Name: "failsafe-go", Retries: true, Wrap: func(base http.RoundTripper, b Backoff) http.RoundTripper {
		return failsafehttp.NewRoundTripper(base, failsafePolicy(b, true, false))
	}}

	// FailsafeNoJitter is Failsafe without jitter.
	FailsafeNoJitter = Lib{Name: "failsafe-go (no jitter)", Retries: true, Wrap: func(base http.RoundTripper, b Backoff) http.RoundTripper {
		return failsafehttp.NewRoundTripper(base, failsafePolicy(b, false, false))
	}}

	// FailsafeBudget is Failsafe with failsafe-go's own guard against retry
	// storms, a retry budget (budget.New(): retries may be at most 20% of
	// the executions in flight, and at least 3 at once).
	FailsafeBudget = Lib{Name: "failsafe-go+budget", Retries: true, Wrap: func(base http.RoundTripper, b Backoff) http.RoundTripper {
		return failsafehttp.NewRoundTripper(base, failsafePolicy(b, true, true))
	}}
)

// floorWrapper is Floor's RoundTripper.
type floorWrapper struct{ base http.RoundTripper }

func (f *floorWrapper) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f.base.RoundTrip(r)
	if err == nil && resp.StatusCode < 400 {
		return resp, nil // a retrying wrapper would look at the status here
	}
	return resp, err
}

func retryhttpOptions(b Backoff) []retryhttp.Option {
	opts := []retryhttp.Option{retryhttp.WithMaxRetries(MaxRetries)} // the default, said out loud
	if b == Zero {
		opts = append(opts, retryhttp.WithBackoff(retryhttp.Backoff{}))
	}
	return opts
}

func failsafePolicy(b Backoff, jitter, withBudget bool) retrypolicy.RetryPolicy[*http.Response] {
	p := failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(MaxRetries).ReturnLastFailure()
	if b == Shaped {
		p = p.WithBackoff(400*time.Millisecond, 30*time.Second)
		if jitter {
			p = p.WithJitterFactor(0.2)
		}
	}
	if withBudget {
		p = p.WithBudget(budget.New())
	}
	return p.Build()
}

// Compared are the four columns of every table: the bare transport first, so
// that benchstat's ratios are to it.
func Compared() []Lib { return []Lib{Bare, RetryHTTP, Retryablehttp, Failsafe} }

// LibByName returns the Lib called name, of every Lib this package has.
func LibByName(name string) (Lib, bool) {
	for _, l := range []Lib{Bare, RetryHTTP, RetryHTTPQuota, Retryablehttp, Failsafe, FailsafeNoJitter, FailsafeBudget} {
		if l.Name == name {
			return l, true
		}
	}
	return Lib{}, false
}
