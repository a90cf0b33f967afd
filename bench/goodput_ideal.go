package bench

// The ideal client of the goodput scenario: the best any client can do
// against the provider, played against the provider itself (the same
// buckets, on retryhttptest's Clock) by a client that always knows the
// exact wait.

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// idealClient plays the best any client can do against the provider: each
// of the Workers sends its next call the moment it is free and the
// provider has room for it, so no request is refused and no room waits
// while a worker could take it; every call then takes Latency. It calls end
// with each call's end, from the start, in order, until end returns false.
//
// Calls go in order (worker i % C takes call i, and no call is admitted
// before the one before it): with one cost a call, greedy in order is the
// best, since the worker free first takes the first room and putting any
// call later delays the ones after it. With Latency 0 and no token limit
// the i-th call (from 0) ends at (i + 1 − B) / R, the burst at once.
//
// It plays against the provider of the run, on a Clock, in Gemini's
// dialect: a 429's retryDelay is the exact time until room, to the
// nanosecond.
func (c GoodputConfig) idealClient(end func(time.Duration) bool) {
	if c.Rate <= 0 || c.Burst <= 0 || c.Workers <= 0 {
		return
	}
	clk := retryhttptest.NewClock()
	t0 := clk.Now()
	cfg := c.providerConfig()
	cfg.Dialect, cfg.Latency, cfg.Clock = retryhttptest.GeminiDialect, 0, clk
	cfg.Cost = func(r *http.Request, _ []byte) retryhttptest.Cost {
		n, _ := strconv.ParseInt(r.Header.Get("Tokens"), 10, 64)
		return retryhttptest.Cost{Requests: 1, Tokens: n}
	}
	p := retryhttptest.NewProvider(cfg)
	free := make([]time.Duration, c.Workers)
	var last time.Duration // when the call before was admitted
	for i := 0; ; i++ {
		w := i % c.Workers
		at := max(free[w], last)
		tokens := strconv.Itoa(c.tokens(i))
		for {
			clk.Add(t0.Add(at).Sub(clk.Now()))
			wait, ok := idealTry(p, tokens)
			if ok {
				break
			}
			at += max(wait, 1)
		}
		last, free[w] = at, at+c.Latency
		if !end(free[w]) {
			return
		}
	}
}

// idealTry sends one call of tokens tokens to p: ok when admitted, else
// the exact wait p asks for.
func idealTry(p *retryhttptest.Provider, tokens string) (time.Duration, bool) {
	req, _ := http.NewRequest(http.MethodPost, "http://ideal/", http.NoBody)
	req.Header.Set("Tokens", tokens)
	resp, err := p.RoundTrip(req)
	if err != nil {
		panic("bench: the ideal client's provider failed: " + err.Error())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return 0, true
	}
	return retryhttp.ParseErrorBody(body).RetryAfter, false
}

// IdealWall is the least time Calls calls can take: the time the ideal
// client (idealClient) ends its Calls-th call. With no Latency and no token
// limit it is (N − B) / R; Latency adds at least one answer's time, and
// more when the workers, not the buckets, are what limits (C / L below R).
// It ignores Duration.
func (c GoodputConfig) IdealWall() time.Duration {
	var wall time.Duration
	n := 0
	c.idealClient(func(end time.Duration) bool {
		wall, n = end, n+1
		return n < c.Calls
	})
	return wall
}

// IdealOK is the most calls that can end ok within span of the start, by
// the ideal client (idealClient): bounded by the buckets (B + R × (span −
// L) requests, and as many prompts as the token bucket and T × (span − L)
// hold) and by the workers (each ends at most span / L calls), and below
// both when they take turns.
func (c GoodputConfig) IdealOK(span time.Duration) int {
	n := 0
	c.idealClient(func(end time.Duration) bool {
		if end > span {
			return false
		}
		n++
		return true
	})
	return n
}
