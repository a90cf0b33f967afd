package bench

// The clients of the outage scenario (issue 30), each as its library ships
// it unless its name says otherwise: not the Shaped set-up of the other
// scenarios (Lib), since what a user meets in an outage is the defaults.

import (
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/retryhttp/retryhttp"
)

// A BlackoutRow is one client of the outage table: Replicas replicas, each
// a Wrap of a base transport of its own, the calls dealt among them round
// robin. Each call of Wrap builds a fresh replica (its own Quota, Cooldown
// or breaker).
type BlackoutRow struct {
	Name     string
	Replicas int // 0 or 1: one
	Wrap     func(base http.RoundTripper) http.RoundTripper
	Targets  BlackoutTargets // issue 30's, for the circuit rows; zero for the others
}

// breakerCircuit is the circuit of the breaker rows, retryhttp's and
// failsafe-go's alike: 5 failures open it, for 1 s.
var breakerCircuit = retryhttp.Circuit{Failures: 5, Open: time.Second}

// BlackoutRows are the rows of the outage table, in its order. The last,
// 8 replicas whose Cooldowns share f's Redis, is there only when f is not
// nil.
func BlackoutRows(f *Fleet) []BlackoutRow {
	circuit := func(base http.RoundTripper) http.RoundTripper {
		return retryhttp.New(base, retryhttp.WithCooldown(retryhttp.NewCooldown(nil, retryhttp.WithCircuit(breakerCircuit))))
	}
	one := BlackoutTargets{PerCall: 0.012, RefusedP50: 100 * time.Microsecond,
		FirstOK: breakerCircuit.Open + 150*time.Millisecond, AfterShare: 0.97}
	rows := []BlackoutRow{
		{Name: "retryhttp (defaults)", Wrap: func(base http.RoundTripper) http.RoundTripper { return retryhttp.New(base) }},
		{Name: "retryhttp+quota", Wrap: func(base http.RoundTripper) http.RoundTripper {
			return retryhttp.New(base, retryhttp.WithQuota(retryhttp.NewQuota(10, 0.1)))
		}},
		{Name: "go-retryablehttp (defaults)", Wrap: retryablehttpDefaults},
		{Name: "failsafehttp retry", Wrap: func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().Build())
		}},
		{Name: "failsafehttp retry+breaker", Wrap: failsafeBreaker},
		{Name: "failsafehttp retry+breaker, K=8", Replicas: 8, Wrap: failsafeBreaker},
		{Name: "retryhttp+circuit, K=1", Wrap: circuit, Targets: one},
	}
	if f != nil {
		rows = append(rows, BlackoutRow{Name: "retryhttp+circuit+redis, K=8", Replicas: 8,
			Wrap: func(base http.RoundTripper) http.RoundTripper {
				return retryhttp.New(base, retryhttp.WithCooldown(f.Cooldown(retryhttp.WithCircuit(breakerCircuit))))
			},
			Targets: BlackoutTargets{PerCall: 0.015, FirstOK: breakerCircuit.Open + 250*time.Millisecond, AfterShare: 0.95}})
	}
	return rows
}

// retryablehttpDefaults is go-retryablehttp's RoundTripper with the
// Client's defaults (4 retries, 1 s doubling to 30 s, Retry-After
// honoured) but its logger, which writes a line to stderr per request.
func retryablehttpDefaults(base http.RoundTripper) http.RoundTripper {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: base}
	c.Logger = nil
	return &retryablehttp.RoundTripper{Client: c}
}

// failsafeBreaker is failsafehttp's retry policy (2 retries, no delay but
// a Retry-After) around a circuit breaker that 5 failures in a row open
// for 1 s. A failure is what the retry policy retries but a 429: an error,
// or a 5xx but 501. The retry is outside, as failsafe-go composes them
// (failsafe.With(retryPolicy, circuitBreaker)): each try meets the breaker,
// and a try it refuses (circuitbreaker.ErrOpen) is retried at once, and
// refused again.
func failsafeBreaker(base http.RoundTripper) http.RoundTripper {
	cb := circuitbreaker.NewBuilder[*http.Response]().
		HandleIf(func(resp *http.Response, err error) bool {
			return err != nil || resp != nil && resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented
		}).
		WithFailureThreshold(uint(breakerCircuit.Failures)).
		WithDelay(breakerCircuit.Open).
		Build()
	return failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().Build(), cb)
}
