package retryhttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The pacing simulator: the whole Transport and Cooldown, in a
// testing/synctest bubble (virtual time, real goroutines), against a
// provider that is a request bucket and a token bucket and says what it
// says in one dialect, with workers that make calls back to back. It is the
// model of bench/'s goodput runs without the network; bench/ measures the
// real thing (RESULTS.md).

// simDialect is what the simulated provider says.
type simDialect int

const (
	simOpenAI     simDialect = iota // counts on every answer; a 429 with retry-after-ms and Retry-After; the limit named in the body
	simAnthropic                    // counts with resets to the second; a 429 with Retry-After in whole seconds; the limit named
	simRetryAfter                   // a 429 with Retry-After in whole seconds, the limit named in Azure's words; no counts
	simGemini                       // a 429 with RetryInfo (exact) and QuotaFailure naming the limit; no counts
	simBare                         // a 429, nothing else
)

var simDialectNames = [...]string{"openai", "anthropic", "retry-after", "gemini", "bare"}

func (d simDialect) String() string { return simDialectNames[d] }

// simBucket is a token bucket that starts full.
type simBucket struct {
	rate, size, level float64
}

func (b *simBucket) refill(dt time.Duration) {
	b.level = math.Min(b.size, b.level+dt.Seconds()*b.rate)
}

// until is how long until the bucket holds cost.
func (b *simBucket) until(cost float64) time.Duration {
	return time.Duration(math.Ceil((math.Min(cost, b.size) - b.level) / b.rate * 1e9))
}

// full is how long until the bucket is full.
func (b *simBucket) full() time.Duration {
	return time.Duration(math.Ceil((b.size - b.level) / b.rate * 1e9))
}

// simProvider is the provider: requests and, when tokens.rate > 0, tokens
// (a request costs ceil(len(body)/4)). It answers a 429 at once and a
// success after latency; until down, it refuses everything.
type simProvider struct {
	dialect  simDialect
	latency  time.Duration
	down     time.Time // refuses every request before it (an outage)
	mu       sync.Mutex
	req, tok simBucket
	last     time.Time
	// counted
	requests, oks int
	okTokens      float64
}

func (p *simProvider) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	cost := math.Ceil(float64(len(body)) / 4)
	now := time.Now()
	p.mu.Lock()
	dt := now.Sub(p.last)
	p.last = now
	p.req.refill(dt)
	if p.tok.rate > 0 {
		p.tok.refill(dt)
	}
	p.requests++
	h := http.Header{}
	var refused string // the limit that refused it
	var next time.Duration
	switch {
	case now.Before(p.down):
		refused, next = "requests", p.down.Sub(now)
	case p.req.level < 1:
		refused, next = "requests", p.req.until(1)
	case p.tok.rate > 0 && p.tok.level < math.Min(cost, p.tok.size):
		refused, next = "tokens", p.tok.until(cost)
	default:
		p.req.level--
		if p.tok.rate > 0 {
			p.tok.level -= cost
		}
		p.oks++
		p.okTokens += cost
	}
	p.counts(h, now)
	p.mu.Unlock()
	if refused == "" {
		time.Sleep(p.latency)
		return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	}
	return &http.Response{StatusCode: 429, Header: h, Body: io.NopCloser(strings.NewReader(p.refusal(h, refused, next))), Request: r}, nil
}

// counts writes the dialect's counts of each bucket on h. p.mu is held.
func (p *simProvider) counts(h http.Header, now time.Time) {
	write := func(b *simBucket, name string) {
		switch p.dialect {
		case simOpenAI:
			h.Set("X-Ratelimit-Limit-"+name, strconv.Itoa(int(b.size)))
			h.Set("X-Ratelimit-Remaining-"+name, strconv.Itoa(int(math.Floor(math.Max(b.level, 0)))))
			ms := (b.full() + time.Millisecond - 1) / time.Millisecond * time.Millisecond
			h.Set("X-Ratelimit-Reset-"+name, ms.String())
		case simAnthropic:
			h.Set("Anthropic-Ratelimit-"+name+"-Limit", strconv.Itoa(int(b.size)))
			h.Set("Anthropic-Ratelimit-"+name+"-Remaining", strconv.Itoa(int(math.Floor(math.Max(b.level, 0)))))
			at := now.Add(b.full())
			if s := at.Truncate(time.Second); s.Before(at) {
				at = s.Add(time.Second)
			}
			h.Set("Anthropic-Ratelimit-"+name+"-Reset", at.UTC().Format(time.RFC3339))
		}
	}
	write(&p.req, "Requests")
	if p.tok.rate > 0 {
		write(&p.tok, "Tokens")
	}
}

// refusal writes a 429's ask on h and returns its body.
func (p *simProvider) refusal(h http.Header, limit string, next time.Duration) string {
	secs := strconv.FormatInt(max(1, int64((next+time.Second-1)/time.Second)), 10)
	h.Set("Content-Type", "application/json")
	switch p.dialect {
	case simOpenAI:
		h.Set("Retry-After-Ms", strconv.FormatInt(max(1, int64((next+time.Millisecond-1)/time.Millisecond)), 10))
		h.Set("Retry-After", secs)
		return `{"error":{"message":"Rate limit reached","type":"` + limit + `","code":"rate_limit_exceeded"}}`
	case simAnthropic:
		h.Set("Retry-After", secs)
		return `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your rate limit of ` + limit + ` per minute."}}`
	case simRetryAfter:
		h.Set("Retry-After", secs)
		what := "call"
		if limit == "tokens" {
			what = "token"
		}
		return `{"error":{"code":"429","message":"Requests have exceeded ` + what + ` rate limit of your current pricing tier."}}`
	case simGemini:
		id := "GenerateRequestsPerMinutePerProjectPerModel"
		if limit == "tokens" {
			id = "GenerateContentInputTokensPerModelPerMinute"
		}
		return fmt.Sprintf(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[`+
			`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":%q}]},`+
			`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"%.9fs"}]}}`, id, next.Seconds())
	}
	h.Del("Content-Type")
	return "Too Many Requests"
}

// simRun is one run: workers making calls back to back through tr.
type simRun struct {
	workers, calls int
	span           time.Duration   // run for this long instead of calls (the outage scenario)
	prompt         func(i int) int // the i-th call's body length in bytes; nil: a small chat request
	cooldown       bool
	base           http.RoundTripper // wraps p, for a test that looks on; nil: p
}

// cdHook, when a test sets it, gets each run's Cooldown.
var cdHook func(*Cooldown)

// simResult is what a run saw.
type simResult struct {
	ok, failed, requests int
	okTokens             float64
	wall                 time.Duration
	lat                  []time.Duration
}

func (r simResult) perOK() float64 { return float64(r.requests) / float64(max(r.ok, 1)) }

func (r simResult) p99() time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	l := slices.Sorted(slices.Values(r.lat))
	return l[int(math.Ceil(0.99*float64(len(l))))-1]
}

// run runs sr against p in a bubble of its own.
func (sr simRun) run(t *testing.T, p *simProvider) (res simResult) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p.last = start
		opts := []Option{WithMaxRetries(10)}
		if sr.cooldown {
			cd := NewCooldown(nil)
			if cdHook != nil {
				cdHook(cd)
			}
			opts = append(opts, WithCooldown(cd))
		}
		var base http.RoundTripper = p
		if sr.base != nil {
			base = sr.base
		}
		tr := New(base, opts...)
		var mu sync.Mutex
		next := 0
		var wg sync.WaitGroup
		for range sr.workers {
			wg.Go(func() {
				for {
					mu.Lock()
					i := next
					next++
					mu.Unlock()
					if sr.span > 0 && time.Since(start) >= sr.span || sr.span == 0 && i >= sr.calls {
						return
					}
					ok, took := sr.call(tr, i)
					mu.Lock()
					if ok {
						res.ok++
					} else {
						res.failed++
					}
					res.lat = append(res.lat, took)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		res.wall = time.Since(start)
	})
	res.requests, res.okTokens = p.requests, p.okTokens
	return res
}

// call makes the i-th call and reports whether it got a 200, and how long
// it took.
func (sr simRun) call(tr http.RoundTripper, i int) (bool, time.Duration) {
	n := 80
	if sr.prompt != nil {
		n = sr.prompt(i)
	}
	body := bytes.Repeat([]byte("x"), n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "https://llm.example/v1/chat", bytes.NewReader(body))
	t0 := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return false, time.Since(t0)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == 200, time.Since(t0)
}

// prompts gives prompts of 100 to 4,000 tokens, mean about 1,500 (issue
// 22's load), the same for every run.
func prompts(seed uint64) func(int) int {
	rng := rand.New(rand.NewPCG(22, seed))
	sizes := make([]int, 4096)
	for i := range sizes {
		// Log-uniform over [100, 4000] has mean 1,057; a mix with a
		// uniform draw brings it to about 1,500.
		tokens := 100 * math.Pow(40, rng.Float64())
		if rng.IntN(2) == 0 {
			tokens = 100 + 3900*rng.Float64()
		}
		sizes[i] = int(tokens) * 4
	}
	return func(i int) int { return sizes[i%len(sizes)] }
}
