package retryhttp

import (
	"bytes"
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// TestCooldownSeedRule: the call that got an ask never retries before it
// ends, even when the ask holds nobody else (whole seconds: Retry-After: 1).
func TestCooldownSeedRule(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "1"), retryhttptest.Status(200), retryhttptest.Status(200)).WithClock(clk)
	var attempts []Attempt
	tr := New(script, WithClock(clk), WithCooldown(cd), WithBackoff(Backoff{Base: time.Millisecond, Factor: 1, Max: time.Millisecond}),
		WithObserver(func(_ context.Context, a Attempt) { attempts = append(attempts, a) }))
	resp, err := tr.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, attempts, 2)
	assert.Equal(t, time.Second, attempts[0].Wait, "its own ask, not its 1 ms backoff")
	assert.Equal(t, FromRetryAfter, attempts[0].From)
	reqs := script.Requests()
	require.Len(t, reqs, 2)
	assert.GreaterOrEqual(t, reqs[1].At.Sub(reqs[0].At), time.Second)
}

// TestCooldownPacesByRateNotAnswers: once the provider limits a key, its
// calls go one slot apart, first come first served, whatever the answers'
// latency: with answers that take 10 s, twenty calls are all sent within
// two seconds (the old Cooldown let one go, then waited for its answer).
func TestCooldownPacesByRateNotAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		var (
			mu    sync.Mutex
			sends []time.Duration
		)
		start := time.Now()
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sends = append(sends, time.Since(start))
			mu.Unlock()
			time.Sleep(10 * time.Second) // a slow model
			return respond(200, "ok"), nil
		})
		tr := New(base, WithCooldown(cd))
		paceAt(cd, start, 100*time.Millisecond)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * time.Millisecond) // arrive in order
				resp, err := tr.RoundTrip(getReq(context.Background()))
				if assert.NoError(t, err) {
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		want := make([]time.Duration, 20)
		for i := range want {
			want[i] = time.Duration(i) * 100 * time.Millisecond
		}
		assert.Equal(t, want, sends, "one slot apart, in the order they came, none waiting for an answer")
	})
}

// paceLearned arms origin on cd with a learned rate of one send per
// interval, out of its ramp.
func paceLearned(cd *Cooldown, now time.Time, interval time.Duration) {
	setRates(cd, origin, now, pace.Rates{Learned: float64(interval), Generation: 1})
}

// sendLog is what a fake provider saw: which call sent, and when.
type sendLog struct {
	mu    sync.Mutex
	start time.Time
	calls []string
	at    []time.Duration
}

func (s *sendLog) add(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, r.Header.Get("X-Call"))
	s.at = append(s.at, time.Since(s.start))
}

// callsInOrder makes n calls through tr, one a millisecond (so that they
// take their slots in order), each naming itself in X-Call, and waits for
// them all.
func callsInOrder(t *testing.T, tr http.RoundTripper, n int) {
	t.Helper()
	starts := make([]time.Duration, n)
	for i := range starts {
		starts[i] = time.Duration(i) * time.Millisecond
	}
	callsAt(t, tr, starts...)
}

// callsAt makes call i at starts[i] of real time, named i in X-Call, and
// waits for them all.
func callsAt(t *testing.T, tr http.RoundTripper, starts ...time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	for i, at := range starts {
		wg.Go(func() {
			time.Sleep(at)
			req := getReq(context.Background())
			req.Header.Set("X-Call", strconv.Itoa(i))
			resp, err := tr.RoundTrip(req)
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

// TestCooldownRetriesGoFirst: at a learned rate too, a retry takes the first
// slot of the schedule when its wait ends, and the calls waiting for theirs
// go one slot later each: the provider sees the same spacing, and the call
// refused earliest is not sent to the back (the first cut queued it
// there: 500 ms more here, a second more in the goodput benchmark).
func TestCooldownRetriesGoFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		log := &sendLog{start: time.Now()}
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			log.add(r)
			if r.Header.Get("X-Call") == "0" && ResendCount(r.Context()) == 0 {
				return respond(503, ""), nil // no ask: holds nobody, cuts nothing
			}
			return respond(200, "ok"), nil
		})
		tr := New(base, WithCooldown(cd), WithBackoff(Backoff{Base: 950 * time.Millisecond, Factor: 1}))
		paceLearned(cd, log.start, 100*time.Millisecond)
		callsInOrder(t, tr, 15)
		require.Len(t, log.at, 16)
		for i := 1; i < len(log.at); i++ {
			// A learned rate grows 0.05% a success, and the retry's slot is
			// read off the schedule at the rate of the moment: the slots
			// drift by a few percent at most, never to two sends at once.
			assert.GreaterOrEqual(t, log.at[i]-log.at[i-1], 95*time.Millisecond, "send %d: a slot apart throughout, no send more", i)
		}
		assert.Less(t, log.at[10], 1010*time.Millisecond, "the retry goes in the first slot after its wait")
		assert.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "0", "10", "11", "12", "13", "14"}, log.calls,
			"call 0's retry, due at 950 ms, takes the next slot; calls 10 to 14 go one slot later")
	})
}

// TestCooldownHoldKeepsTheQueueSpaced: a hold armed while calls wait for
// their slots moves them on in their order and spacing. the first
// cut let each of them go the instant the hold ended: a burst the provider
// answered with 429s and a hold more (26 to 43 429s in a quarter
// second in the goodput benchmark).
func TestCooldownHoldKeepsTheQueueSpaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		log := &sendLog{start: time.Now()}
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			log.add(r)
			if r.Header.Get("X-Call") == "3" && ResendCount(r.Context()) == 0 {
				return respond(429, "", "Retry-After", "2"), nil // past its resolution: holds every call 2 s
			}
			return respond(200, "ok"), nil
		})
		tr := New(base, WithCooldown(cd))
		paceAt(cd, log.start, 100*time.Millisecond)
		callsInOrder(t, tr, 10)
		require.Equal(t, []string{"0", "1", "2", "3", "3", "4", "5", "6", "7", "8", "9"}, log.calls, "the retry first, then the queue in order")
		s, ms := time.Second, time.Millisecond
		assert.Equal(t, []time.Duration{0, 100 * ms, 200 * ms, 300 * ms}, log.at[:4])
		assert.GreaterOrEqual(t, log.at[4], 2*s+300*ms, "nobody before the hold ends")
		for i := 5; i < len(log.at); i++ {
			// The 429 also slows the provider's word (its counts did not
			// explain it): the sends waiting keep at least their spacing.
			assert.GreaterOrEqual(t, log.at[i]-log.at[i-1], 100*ms, "send %d: a slot apart, no burst when the hold ends", i)
		}
		// Moved on by the hold and the retry's slot, and stretched to the
		// slowed rate (117.6 ms a send), no more.
		assert.Less(t, log.at[10], 3*s+500*ms)
	})
}

// TestCooldownResetRunsFromTheSend: an exhausted limit's reset on an answer
// that took 800 ms is 800 ms old (a provider counts a request as it admits
// it): it holds nobody once it has passed. Read as new, it held every call
// 99 ms more after each such answer (goodput 0.73 at 800 ms
// answers, 0.97 since).
func TestCooldownResetRunsFromTheSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		log := &sendLog{start: time.Now()}
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			log.add(r)
			time.Sleep(800 * time.Millisecond) // a model writing its answer
			return respond(200, "ok", "X-Ratelimit-Limit-Requests", "10", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "100ms"), nil
		})
		tr := New(base, WithCooldown(cd))
		paceAt(cd, log.start, 10*time.Millisecond)
		for range 2 {
			resp, err := tr.RoundTrip(getReq(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
			assert.True(t, cd.Until(origin).IsZero(), "the reset ran out 700 ms ago: no hold")
		}
		assert.Equal(t, []time.Duration{0, 800 * time.Millisecond}, log.at, "the second call goes as the first returns")
	})
}

// TestCooldownLogsAHoldOverWaitingCalls: calls waiting for their slots when
// another call's 429 asks for 300 ms are moved on by it, and each logs that
// wait as a hold, the provider's word (R14, R17), though it is short.
func TestCooldownLogsAHoldOverWaitingCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		log := &sendLog{start: time.Now()}
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			log.add(r)
			if r.Header.Get("X-Call") == "1" && ResendCount(r.Context()) == 0 {
				return respond(429, "", "Retry-After-Ms", "300"), nil
			}
			return respond(200, "ok"), nil
		})
		logger, logs := logSink()
		tr := New(base, WithCooldown(cd), WithLogger(logger), WithBackoff(Backoff{Base: time.Millisecond, Factor: 1}))
		paceAt(cd, log.start, 100*time.Millisecond)
		callsInOrder(t, tr, 4)
		ms := time.Millisecond
		require.Equal(t, []string{"0", "1", "1", "2", "3"}, log.calls, "call 1's retry before calls 2 and 3")
		assert.Equal(t, []time.Duration{0, 100 * ms}, log.at[:2])
		assert.GreaterOrEqual(t, log.at[2], 400*ms, "the retry waits its ask")
		for i := 3; i < len(log.at); i++ {
			// The 429 slows the provider's word 15% (its counts did not
			// explain it); the retry takes its slot on the schedule's grid.
			assert.GreaterOrEqual(t, log.at[i]-log.at[i-1], 100*ms, "send %d: a slot apart", i)
		}
		// Calls 2 and 3 moved on by the hold and the retry's slot, and
		// stretched to the slowed rate, no more.
		assert.Less(t, log.at[4], time.Second)
		holds := logs.FilterMessage(msgHolding).All()
		require.Len(t, holds, 1, "calls 2 and 3 held in the same second: one entry (sampled)")
		assert.Equal(t, zap.InfoLevel, holds[0].Level, "a hold by the provider's word is Info: the Cooldown at work")
		assert.GreaterOrEqual(t, holds[0].ContextMap()["wait_ms"], int64(300), "the hold, and the queue stretched to the slower rate")
	})
}

// TestCooldownPacesTheCallThatArmedIt: a call whose first try went in free
// flow, and whose 429 armed the key, takes a slot for its retry like any
// other call: the key is watched from then on, for it too.
func TestCooldownPacesTheCallThatArmedIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		log := &sendLog{start: time.Now()}
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			log.add(r)
			if r.Header.Get("X-Call") == "0" && ResendCount(r.Context()) == 0 {
				// The provider's counts: none of 10 left, full in 1 s: one
				// send per 100 ms.
				return respond(429, "", "X-Ratelimit-Limit-Requests", "10", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1s"), nil
			}
			return respond(200, "ok"), nil
		})
		tr := New(base, WithCooldown(cd), WithBackoff(Backoff{Base: time.Millisecond, Factor: 1}))
		callsAt(t, tr, 0, 500*time.Microsecond)
		// The exhausted limit holds every call until a millisecond before
		// its reset (a request lane is paced one send after the other, its
		// bucket left to the provider: RULES.md R17); then call 1, which
		// was waiting, and call 0's retry a slot after it.
		require.Equal(t, []string{"0", "1", "0"}, log.calls)
		assert.GreaterOrEqual(t, log.at[1], time.Second-time.Millisecond, "the hold")
		assert.GreaterOrEqual(t, log.at[2]-log.at[1], 100*time.Millisecond, "call 0's retry a slot after call 1")
	})
}

// TestCooldownLearnsFromSuccessesOnly: at a learned rate, a success (below
// 400) makes the next sends a little faster; a refusal that is not about
// the rate (a 400) changes nothing.
func TestCooldownLearnsFromSuccessesOnly(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(retryhttptest.Status(400), retryhttptest.Status(200)).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd))
	paceLearned(cd, clk.Now(), 100*time.Millisecond)
	interval := func() time.Duration {
		s, _ := originLane(cd)
		return time.Duration(s.Per)
	}
	for _, want := range []time.Duration{100 * time.Millisecond, time.Duration(float64(100*time.Millisecond) * pace.SteadyGrow)} {
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, interval(), "after a %d", resp.StatusCode)
	}
}

// The pacing simulator: the whole Transport and Cooldown, in a
// testing/synctest bubble (virtual time, real goroutines), against the
// kit's Provider (a request bucket and a token bucket, saying what it says
// in one dialect) as the base, with workers that make calls back to back.
// It is the model of bench/'s goodput runs without the network; bench/
// measures the real thing (RESULTS.md).

// simRun is one run: workers making calls back to back through tr.
type simRun struct {
	workers, calls int
	span           time.Duration   // run for this long instead of calls (the outage scenario)
	prompt         func(i int) int // the i-th call's body length in bytes; nil: a small chat request
	cooldown       bool
	wrap           func(http.RoundTripper) http.RoundTripper // wraps the provider, for a test that looks on
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

// run runs sr against a Provider of cfg in a bubble of its own.
func (sr simRun) run(t *testing.T, cfg retryhttptest.ProviderConfig) (res simResult) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := retryhttptest.NewProvider(cfg)
		defer func() { st := p.Stats(); res.requests, res.okTokens = int(st.Requests), float64(st.Tokens) }()
		opts := []Option{WithMaxRetries(10), WithBackoff(Backoff{Base: 400 * time.Millisecond, Factor: 2, Max: 30 * time.Second})} // no jitter: a run is repeatable
		if sr.cooldown {
			cd := NewCooldown(nil)
			if cdHook != nil {
				cdHook(cd)
			}
			opts = append(opts, WithCooldown(cd))
		}
		var base http.RoundTripper = p
		if sr.wrap != nil {
			base = sr.wrap(p)
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
	req, _ := http.NewRequestWithContext(ctx, "POST", "https://llm.example/v1/chat/completions", bytes.NewReader(body))
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

// TestSimRequests: the load (100 requests a second, burst 10, 64
// workers, 1000 calls) in each dialect; the bounds are the model's numbers
// with a little room, so that they catch a policy that got worse.
func TestSimRequests(t *testing.T) {
	for _, d := range retryhttptest.Dialects() {
		t.Run(d.String(), func(t *testing.T) {
			cfg := retryhttptest.ProviderConfig{Dialect: d, Requests: retryhttptest.Limit{Rate: 100, Size: 10}}
			r := simRun{workers: 64, calls: 1000, cooldown: true}.run(t, cfg)
			ideal := 100*r.wall.Seconds() + 10
			t.Logf("%s: %d ok, %d failed, %.3f requests/success, goodput %.3f, p99 %v", d, r.ok, r.failed, r.perOK(), float64(r.ok)/ideal, r.p99())
			assert.Equal(t, 1000, r.ok)
			assert.LessOrEqual(t, r.perOK(), 1.2)
			assert.GreaterOrEqual(t, float64(r.ok)/ideal, 0.85)
			assert.LessOrEqual(t, r.p99(), 2500*time.Millisecond)
		})
	}
}

// TestSimTokens: the load (100 requests a second, 50,000 tokens a
// second in a bucket of 50,000; prompts of 100 to 4,000 tokens, mean about
// 1,500; 64 workers; 400 calls) in each dialect that names the limit, six
// prompt draws each. The targets (at most 1.1 requests per success, at
// least 0.9 of the token limit served, no failed call, a p99 of at most
// 2 × workers × mean cost ÷ token rate, +1 s where the provider speaks
// whole seconds) are bench/'s to measure on the real thing (RESULTS.md).
// Here the bounds catch a policy that got worse, and never a draw of the
// goroutines' order: a run in a bubble is one such draw, and the runs of
// one draw of prompts vary. Over 840 runs of each dialect (240 of them
// with -race), no call failed, and one run reached 1.00 to 1.56 requests a
// success and a p99 of at most 2.3 × its target; in the dialects that
// state no counts, the learned rate sometimes settles low (23 of 600
// Retry-After runs served 0.52 to 0.70 of the limit, the rest 0.70 to
// 1.00; one such run, traced: a 429 while ramping halved a first guess
// that was right, 47,500 tokens a second, and the rate then grew back to
// only 37,700 in 14 s), so the share of one run says little. The mean of
// six: at most 1.20 requests a success, at least 0.80 of the limit.
// Without a Cooldown every run is 1.95 to 2.09 requests a success, 0.45
// to 0.50 of the limit, and a p99 of 25 s (about 5 × its target). So each
// run's p99 is bounded, and the mean of six well outside its spread and
// well inside no Cooldown's.
func TestSimTokens(t *testing.T) {
	const draws = 6
	for _, d := range retryhttptest.Dialects()[:4] {
		t.Run(d.String(), func(t *testing.T) {
			var perOK, share float64
			for seed := uint64(1); seed <= draws; seed++ {
				r, sh, target := simTokenRun(t, d, seed)
				t.Logf("%s, draw %d: %d ok, %d failed, %.3f requests/success, token share %.3f, p99 %v (target %v)",
					d, seed, r.ok, r.failed, r.perOK(), sh, r.p99(), target)
				assert.Equal(t, 400, r.ok)
				assert.LessOrEqual(t, r.p99(), 4*target)
				perOK, share = perOK+r.perOK()/draws, share+sh/draws
			}
			assert.LessOrEqual(t, perOK, 1.3, "requests per success, the mean of six")
			assert.GreaterOrEqual(t, share, 0.7, "the share of the token limit served, the mean of six")
		})
	}
}

// simTokenRun is one run of the load, its share of the token limit
// served and its p99 target.
func simTokenRun(t *testing.T, d retryhttptest.Dialect, seed uint64) (simResult, float64, time.Duration) {
	return simTokenRunW(t, d, seed, nil)
}

// simTokenRunW is simTokenRun with the provider wrapped by wrap (nil: not).
func simTokenRunW(t *testing.T, d retryhttptest.Dialect, seed uint64, wrap func(http.RoundTripper) http.RoundTripper) (simResult, float64, time.Duration) {
	cfg := retryhttptest.ProviderConfig{Dialect: d, Requests: retryhttptest.Limit{Rate: 100, Size: 100},
		Tokens: retryhttptest.Limit{Rate: 50000, Size: 50000}}
	sizes := prompts(seed)
	r := simRun{workers: 64, calls: 400, prompt: sizes, cooldown: true, wrap: wrap}.run(t, cfg)
	var mean float64
	for i := range 400 {
		mean += math.Ceil(float64(sizes(i)) / 4)
	}
	mean /= 400
	target := time.Duration(2 * 64 * mean / 50000 * float64(time.Second))
	if d == retryhttptest.AnthropicDialect || d == retryhttptest.RetryAfterDialect {
		target += time.Second
	}
	return r, r.okTokens / (50000 + 50000*r.wall.Seconds()), target
}
