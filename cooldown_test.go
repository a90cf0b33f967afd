package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const origin = "https://api.example.com"

// holdFor arms key on cd as a 429 asking for d (to the nanosecond) would.
func holdFor(cd *Cooldown, key string, now time.Time, d time.Duration) {
	now = cd.on(now)
	k := cd.watch(key, now)
	if k == nil {
		return // full
	}
	cd.eng.HearAnswer(context.Background(), k, now, &cooldown.Answer{Limited: true, HasAsk: true, Ask: d}, cooldown.Costs{1})
}

// find returns the watched state of req's key, as a call finds it
// (keyState), nil when it is not watched or is "".
func (c *Cooldown) find(req *http.Request) *cooldown.KeyState {
	ws := c.eng.Watched()
	switch {
	case ws == nil || ws.Len() == 0:
		return nil
	case c.key == nil:
		return findOrigin(ws, req)
	case c.byModel && !hasOrigin(ws, req):
		return nil
	}
	return ws.Find(c.userKey(req, nil))
}

// setRates arms key on cd with the request lane's rates r, as answers that
// said so would have.
func setRates(cd *Cooldown, key string, now time.Time, r pace.Rates) {
	k := cd.watch(key, cd.on(now))
	cd.apply(k, store.Op{Kind: store.OpRates, Lane: laneRequests, Version: k.State().Lane(laneRequests).Version,
		Per: r.Per(), Burst: r.Burst(), Rates: r.Encode()}, store.Op{Kind: store.OpLimited, Lane: laneRequests})
}

// paceAt arms origin on cd with an exact rate of one send per interval, as a
// 429 with OpenAI's counts at millisecond resolution would.
func paceAt(cd *Cooldown, now time.Time, interval time.Duration) {
	setRates(cd, origin, now, pace.Rates{Stated: float64(interval)})
}

// originLane is the request lane of origin on cd as the Cooldown knows it.
func originLane(cd *Cooldown) (store.Lane, pace.Rates) {
	s := cd.stateOf().Lane(laneRequests)
	return s, pace.DecodeRates(s.Rates)
}

func getReq(ctx context.Context) *http.Request {
	r, _ := http.NewRequestWithContext(ctx, "GET", origin+"/v1/chat", nil)
	return r
}

func TestCooldownKeys(t *testing.T) {
	cd := NewCooldown(nil)
	for _, tc := range []struct{ url, want string }{
		{"https://API.Example.com/v1/chat?key=x", "https://api.example.com"},
		{"HTTP://api.example.com:8080/v1", "http://api.example.com:8080"},
		{"https://user:pw@api.example.com/v1", "https://api.example.com"},
		{"https://A.Z.EXAMPLE.com/v1", "https://a.z.example.com"}, // both ends of A to Z
		{"/relative", ""},
	} {
		req, err := http.NewRequest("GET", tc.url, nil)
		require.NoError(t, err)
		assert.Equal(t, tc.want, cd.keyOf(req, nil), tc.url)
	}
	byModel := NewCooldown(func(r *http.Request) string { return r.URL.Host + "/" + r.Header.Get("X-Model") })
	req, _ := http.NewRequest("GET", "https://api.example.com/v1", nil)
	req.Header.Set("X-Model", "gpt-4o")
	assert.Equal(t, "api.example.com/gpt-4o", byModel.keyOf(req, nil))

	// find builds the default key on the stack: it finds what keyOf named.
	holdFor(cd, "https://api.example.com", epoch, time.Second)
	for _, u := range []string{"https://API.example.COM/x?y=z", "https://api.example.com"} {
		r, _ := http.NewRequest("GET", u, nil)
		assert.NotNil(t, cd.find(r), u)
	}
	for _, u := range []string{"http://api.example.com", "https://api.example.com:443", "/relative", "https://api.exampl3.com"} {
		r, _ := http.NewRequest("GET", u, nil)
		assert.Nil(t, cd.find(r), u)
	}
	// The length filter: every watched key is found, in any case, whatever
	// else is watched; a length no watched key has is not watched.
	for _, k := range []string{"https://b.example", "https://api.openai.com", "https://" + strings.Repeat("h", 64-len("https://")+len("https://api.example.com"))} {
		holdFor(cd, k, epoch, time.Second)
	}
	for _, k := range cd.eng.Watched().Keys() {
		r, _ := http.NewRequest("GET", strings.ToUpper(k)+"/v1", nil)
		assert.NotNil(t, cd.find(r), k)
	}
	r, _ := http.NewRequest("GET", "https://c.example/v1", nil) // as long as b.example
	assert.Nil(t, cd.find(r))
}

// TestCooldownArming checks R17's arming through the transport: which
// answers hold, for how long, and which only pace.
func TestCooldownArming(t *testing.T) {
	anthropicReset := newClock().Now().Add(time.Hour).Truncate(time.Second) // the clock of each row starts there too
	for _, tc := range []struct {
		name    string
		reply   retryhttptest.Reply
		hold    time.Duration // Until - now after the answer; 0: not held
		paced   bool
		silent  bool // the key is not watched at all
		observe bool // off the happy path: the transport has an Observer
	}{
		{"Retry-After: 20 holds every call all of it", retryhttptest.Status(429, "Retry-After", "20"), 20 * time.Second, true, false, false},
		{"retry-after-ms: 20 holds every call 20 ms", retryhttptest.Status(429, "Retry-After-Ms", "20"), 20 * time.Millisecond, true, false, false},
		{"Retry-After: 1 holds only its own call; the others are paced", retryhttptest.Status(429, "Retry-After", "1"), 0, true, false, false},
		{"a decimal Retry-After: 0.5 is good to the millisecond", retryhttptest.Status(429, "Retry-After", "0.5"), 500 * time.Millisecond, true, false, false},
		{"a 503 with Retry-After: 3 holds", retryhttptest.Status(503, "Retry-After", "3"), 3 * time.Second, true, false, false},
		{"a bare 429 paces", retryhttptest.Status(429), 0, true, false, false},
		{"a Gemini retryDelay in the body holds exactly", retryhttptest.Reply{Status: 429,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2.5s"}]}}`},
			2500 * time.Millisecond, true, false, false},
		{"an exhausted OpenAI limit on a 429 holds until it may be back", retryhttptest.Status(429,
			"X-Ratelimit-Limit-Requests", "10", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6s"), 6*time.Second - time.Millisecond, true, false, false},
		{"an exhausted Anthropic limit an hour off: held the longest hold, refusing", retryhttptest.Status(429,
			"Anthropic-Ratelimit-Requests-Limit", "10", "Anthropic-Ratelimit-Requests-Remaining", "0",
			"Anthropic-Ratelimit-Requests-Reset", anthropicReset.Format(time.RFC3339)), pace.MaxHold, true, false, false},
		{"an exhausted limit with no bucket stated holds until a resolution before its reset", retryhttptest.Status(429,
			"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6s"), 6*time.Second - time.Millisecond, true, false, false},
		{"an ask past the longest hold holds that long, refusing", retryhttptest.Status(429, "Retry-After", "1000000000"), pace.MaxHold, true, false, false},
		{"a 500 without an ask is not about the rate", retryhttptest.Status(500), 0, false, true, false},
		{"a success in free flow is not read", retryhttptest.Status(200,
			"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6s"), 0, false, true, false},
		{"a success off the happy path is not read either", retryhttptest.Status(200,
			"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6s"), 0, false, true, true},
		{"an exhausted limit on a 400 holds (a reset on any answer) but does not pace", retryhttptest.Status(400,
			"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6s"), 6*time.Second - time.Millisecond, false, false, false},
		{"a 503 asking for no wait arms nothing", retryhttptest.Status(503, "Retry-After", "0"), 0, false, true, false},
		{"a 500 whose exhausted limit is back already arms nothing", retryhttptest.Status(500,
			"X-Ratelimit-Limit-Requests", "10", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "0s"), 0, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			cd := NewCooldown(nil)
			opts := []Option{WithClock(clk), WithCooldown(cd), WithMaxRetries(0)}
			if tc.observe {
				opts = append(opts, WithObserver(func(context.Context, Attempt) {}))
			}
			tr := New(retryhttptest.NewScript(tc.reply), opts...)
			resp, err := tr.RoundTrip(getReq(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
			if tc.silent {
				assert.Zero(t, cd.size(), "not watched")
				return
			}
			if tc.hold > 0 {
				assert.Equal(t, clk.Now().Add(tc.hold), cd.Until(origin))
			} else {
				assert.True(t, cd.Until(origin).IsZero(), "nobody else held")
			}
			require.NotNil(t, cd.find(getReq(context.Background())))
			s, _ := originLane(cd)
			assert.Equal(t, tc.paced, s.Per > 0, "paced")
		})
	}

	t.Run("forward only", func(t *testing.T) {
		cd := NewCooldown(nil)
		cd.bind(mockAt(epoch), nil)
		holdFor(cd, origin, epoch, 20*time.Second)
		holdFor(cd, origin, epoch, 5*time.Second)
		assert.Equal(t, epoch.Add(20*time.Second), cd.Until(origin), "a shorter signal never shortens it")
		holdFor(cd, origin, epoch, 30*time.Second)
		assert.Equal(t, epoch.Add(30*time.Second), cd.Until(origin), "a longer one extends it")
		assert.True(t, cd.Until("https://other.example.com").IsZero(), "another key")
	})
}

// okReply is a success with a body.
var okReply = retryhttptest.Reply{Body: "ok"}

// TestCooldownThroughTheTransport checks the rest of R17 end to end on the
// kit's Clock: the log, Attempt.Held, a retry's wait, and a key function.
func TestCooldownThroughTheTransport(t *testing.T) {
	t.Run("a 429 with Retry-After holds another Transport's next call; logged, in Attempt.Held", heldAcrossTransportsLoggedAndReported)
	t.Run("a short pace is reported in Attempt.Held but not logged; a pace of a second is", shortPaceReportedNotLogged)
	t.Run("a retry waits the largest of backoff, ask and hold", retryWaitsTheLargest)
	t.Run("a key function that returns empty leaves the request out", emptyKeyLeftOut)
}

// heldAcrossTransportsLoggedAndReported is a subtest of TestCooldownThroughTheTransport:
// a 429 with Retry-After holds another Transport's next call; logged, in Attempt.Held.
func heldAcrossTransportsLoggedAndReported(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "20"), okReply).WithClock(clk)
	first := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	resp, err := first.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 429, resp.StatusCode, "no retries: the 429 is handed back")

	var held []time.Duration
	log, logs := logSink()
	other := New(script, WithClock(clk), WithCooldown(cd), WithLogger(log),
		WithObserver(func(_ context.Context, a Attempt) { held = append(held, a.Held) }))
	req := getReq(context.Background())
	req.URL.RawQuery = "key=secret"
	resp, err = other.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, []time.Duration{20 * time.Second}, clk.Waits())
	assert.Equal(t, []time.Duration{20 * time.Second}, held, "Attempt.Held")
	entries := logs.FilterMessage(msgHolding).All()
	require.Len(t, entries, 1)
	assert.Equal(t, map[string]any{
		"wait_ms": int64(20000), "wait_from": "cooldown", "priority": "normal", "method": "GET", "url": origin + "/v1/chat",
	}, entries[0].ContextMap(), "R14: the fields, and no query")
}

// shortPaceReportedNotLogged is a subtest of TestCooldownThroughTheTransport:
// a short pace is reported in Attempt.Held but not logged; a pace of a
// second is.
func shortPaceReportedNotLogged(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	log, logs := logSink()
	var held []time.Duration
	tr := New(retryhttptest.NewScript(okReply), WithClock(clk), WithCooldown(cd), WithLogger(log),
		WithObserver(func(_ context.Context, a Attempt) { held = append(held, a.Held) }))
	paceAt(cd, clk.Now(), 50*time.Millisecond)
	for range 3 {
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
	}
	// Each call waits for its slot; the clock moves with the waits.
	assert.Equal(t, []time.Duration{0, 50 * time.Millisecond, 50 * time.Millisecond}, held)
	assert.Zero(t, logs.FilterMessage(msgHolding).Len())

	// A pace of a second or more is logged, as a hold is. (Once the last
	// slot is over: a rate cut while a send waits stretches its wait.)
	clk.Add(50 * time.Millisecond)
	paceAt(cd, clk.Now(), time.Second)
	for range 2 {
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
	}
	entries := logs.FilterMessage(msgHolding).All()
	require.Len(t, entries, 1, "the second call's slot, a second on")
	assert.Equal(t, int64(1000), entries[0].ContextMap()["wait_ms"])
}

// retryWaitsTheLargest is a subtest of TestCooldownThroughTheTransport:
// a retry waits the largest of backoff, ask and hold.
func retryWaitsTheLargest(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	var attempts []Attempt
	tries := 0
	// While this call's first try is out, another call to the origin is
	// told to wait 5 s: this call's retry waits for that, not its own 1 s.
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		if tries++; tries == 1 {
			holdFor(cd, origin, clk.Now(), 5*time.Second)
			return respond(503, "", "Retry-After", "1"), nil
		}
		return respond(200, "ok"), nil
	})
	tr := New(base, WithClock(clk), WithCooldown(cd), WithBackoff(noJitter),
		WithObserver(func(_ context.Context, a Attempt) { attempts = append(attempts, a) }))
	resp, err := tr.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, attempts, 2)
	assert.Equal(t, 5*time.Second, attempts[0].Wait)
	assert.Equal(t, FromCooldown, attempts[0].From)
	assert.Equal(t, 5*time.Second, clk.Waits()[0], "the retry waited for the hold")
}

// emptyKeyLeftOut is a subtest of TestCooldownThroughTheTransport:
// a key function that returns empty leaves the request out.
func emptyKeyLeftOut(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(func(r *http.Request) string {
		if r.Header.Get("X-Model") == "" {
			return ""
		}
		return r.URL.Host + "/" + r.Header.Get("X-Model")
	})
	script := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "20"), okReply, okReply).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	send := func(model string) int {
		r := getReq(context.Background())
		if model != "" {
			r.Header.Set("X-Model", model)
		}
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, 429, send("gpt-4o"))
	assert.Equal(t, 200, send(""), "no key: not held")
	assert.Equal(t, 200, send("gpt-4o-mini"), "another model: not held")
	assert.Empty(t, clk.Waits())
	assert.False(t, cd.Until("api.example.com/gpt-4o").IsZero())
}

// mockAt is a mock clock stopped at t.
func mockAt(t time.Time) *clock.Mock {
	m := clock.NewMock()
	m.Set(t)
	return m
}

// TestCooldownLiterals pins the constants a user may rely on: they are the
// policy the package doc states.
func TestCooldownLiterals(t *testing.T) {
	assert.Equal(t, 4096, maxCoolingKeys)
	assert.Equal(t, 5*time.Second, pace.IdleAfter)
	assert.Equal(t, time.Second, sweepEvery)
	assert.Equal(t, 5*time.Millisecond, pace.FirstInterval)
	assert.InDelta(t, 0.85, 1/pace.CutBy, 1e-9)
}

// TestCooldownBadInput: huge, negative and past values arm nothing or
// saturate; nothing panics, hangs or leaks.
func TestCooldownBadInput(t *testing.T) {
	for _, h := range [][]string{
		{"Retry-After", "99999999999999999999999"},
		{"Retry-After", "-5"},
		{"Retry-After", "Mon, 01 Jan 1990 00:00:00 GMT"},
		{"Retry-After", "soon"},
		{"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "-1s"},
		{"X-Ratelimit-Remaining-Requests", "-1", "X-Ratelimit-Reset-Requests", "5s"},
		{"X-Ratelimit-Limit-Requests", "0", "X-Ratelimit-Remaining-Requests", "5", "X-Ratelimit-Reset-Requests", "5s"},
		{"X-Ratelimit-Limit-Requests", "99999999999999999999", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1ns"},
		{"Anthropic-Ratelimit-Requests-Limit", "10", "Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", "not a time"},
	} {
		t.Run(strings.Join(h, " "), func(t *testing.T) {
			clk := newClock()
			cd := NewCooldown(nil)
			script := retryhttptest.NewScript(retryhttptest.Status(429, h...)).WithClock(clk)
			tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
			for range 3 {
				ctx, cancel := clk.WithTimeout(context.Background(), time.Minute)
				resp, err := tr.RoundTrip(getReq(ctx))
				cancel()
				if err == nil {
					resp.Body.Close()
				} else {
					assert.ErrorIs(t, err, ErrRateLimited, "only a hold that does not fit fails")
				}
			}
			until := cd.Until(origin)
			assert.True(t, until.IsZero() || until.After(clk.Now()), "never in the past")
			if s, _ := originLane(cd); s.Per > 0 {
				assert.GreaterOrEqual(t, s.Per, float64(pace.MinInterval))
			}
		})
	}
}

// TestCooldownWaitsFitAndAreCharged: every wait a Cooldown imposes, a hold
// or a slot, fits the deadline and the Budget or fails at once with
// ErrRateLimited, sending nothing; what is waited is charged.
func TestCooldownWaitsFitAndAreCharged(t *testing.T) {
	t.Run("slots: a queue longer than the Budget fails the calls it cannot serve, at once", slotsPastTheBudgetFailAtOnce)
	t.Run("a hold that does not fit the deadline sends nothing, with or without a Budget", holdPastTheDeadlineSendsNothing)
	t.Run("a hold equal to what is left does not fit", holdEqualToWhatIsLeftDoesNotFit)
	t.Run("a hold is charged, and canceled during it, refunded", holdChargedAndRefunded)
	t.Run("a slot free now is sent with nothing left to wait", slotFreeNowNeedsNoRoom)
	t.Run("a hold armed while a call waits must fit as well", laterHoldMustFit)
}

// laterHoldMustFit is a subtest of TestCooldownWaitsFitAndAreCharged: a
// call waiting for its slot when another call's 429 holds the key must fit
// the rest too; exactly what its deadline leaves does not fit (R7), and the
// call fails at once with ErrRateLimited, sending nothing.
func laterHoldMustFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		start := time.Now()
		var sent sync.WaitGroup
		sent.Add(1)
		limited := New(roundTripperFunc(func(*http.Request) (*http.Response, error) {
			sent.Done()
			time.Sleep(50 * time.Millisecond)
			return respond(429, "", "Retry-After-Ms", "300"), nil // at 50 ms: every call held to 350 ms
		}), WithCooldown(cd), WithMaxRetries(0))
		var tries int
		waiting := New(roundTripperFunc(func(*http.Request) (*http.Response, error) {
			tries++
			return respond(200, "ok"), nil
		}), WithCooldown(cd))
		paceAt(cd, start, 100*time.Millisecond)
		go func() {
			resp, err := limited.RoundTrip(getReq(context.Background()))
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}()
		sent.Wait() // The first slot is taken: the next is at 100 ms
		// At 100 ms the call must wait 300 ms more: all its deadline leaves.
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(400*time.Millisecond))
		defer cancel()
		resp, err := waiting.RoundTrip(getReq(ctx))
		require.Nil(t, resp)
		assert.ErrorIs(t, err, ErrRateLimited)
		assert.Equal(t, 100*time.Millisecond, time.Since(start), "it failed as it found the hold, without waiting it out")
		assert.Zero(t, tries, "nothing was sent")
	})
}

// slotFreeNowNeedsNoRoom is a subtest of TestCooldownWaitsFitAndAreCharged:
// a call on a paced key whose slot is free now waits nothing, so it is sent
// though its Budget has no room left (R7 fits waits, and this is none).
func slotFreeNowNeedsNoRoom(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(retryhttptest.Status(200)).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd))
	paceAt(cd, clk.Now(), time.Second)
	resp, err := tr.RoundTrip(getReq(WithBudget(context.Background(), NewBudget(0))))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 1, script.Len())
}

// slotsPastTheBudgetFailAtOnce is a subtest of TestCooldownWaitsFitAndAreCharged:
// slots: a queue longer than the Budget fails the calls it cannot serve, at once.
func slotsPastTheBudgetFailAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		script := retryhttptest.NewScript(retryhttptest.Status(200))
		tr := New(script, WithCooldown(cd))
		start := time.Now()
		paceAt(cd, start, time.Second)
		budget := NewBudget(3500 * time.Millisecond) // shared by the six calls: room for slots at 0, 1 and 2 s
		ctx := WithBudget(context.Background(), budget)
		type result struct {
			err   error
			after time.Duration
		}
		results := make([]result, 6)
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * time.Millisecond)
				resp, err := tr.RoundTrip(getReq(ctx))
				if err == nil {
					resp.Body.Close()
				}
				results[i] = result{err, time.Since(start) - time.Duration(i)*time.Millisecond}
			}()
		}
		wg.Wait()
		ok := 0
		for i, r := range results {
			if r.err == nil {
				ok++
				continue
			}
			var e *Error
			require.ErrorAs(t, r.err, &e, "call %d", i)
			assert.ErrorIs(t, r.err, ErrRateLimited)
			assert.Equal(t, OutOfTime, e.Reason)
			assert.Zero(t, r.after, "call %d failed at once, without waiting", i)
		}
		assert.Equal(t, 3, ok, "the slots at 0, 1 and 2 s fit (1 + 2 = 3 s charged)")
		assert.Equal(t, 3, script.Len(), "the others sent nothing")
		assert.Equal(t, 3*time.Second-3*time.Millisecond, budget.Waited(), "exactly what was waited")
		assert.Error(t, budget.Err())
	})
}

// holdPastTheDeadlineSendsNothing is a subtest of TestCooldownWaitsFitAndAreCharged:
// a hold that does not fit the deadline sends nothing, with or without a Budget.
func holdPastTheDeadlineSendsNothing(t *testing.T) {
	for _, withBudget := range []bool{false, true} {
		clk := newClock()
		cd := NewCooldown(nil)
		script := retryhttptest.NewScript(retryhttptest.Status(200)).WithClock(clk)
		tr := New(script, WithClock(clk), WithCooldown(cd))
		holdFor(cd, origin, clk.Now(), 30*time.Second)
		ctx, cancel := clk.WithTimeout(context.Background(), 10*time.Second)
		var budget *Budget
		if withBudget {
			budget = NewBudget(PublicTierMaxWait)
			ctx = WithBudget(ctx, budget)
		}
		resp, err := tr.RoundTrip(getReq(ctx))
		cancel()
		require.Nil(t, resp)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.ErrorIs(t, err, ErrRateLimited)
		assert.Equal(t, OutOfTime, e.Reason)
		assert.Equal(t, 30*time.Second, e.RetryAfter)
		assert.Zero(t, e.Tries)
		assert.Zero(t, script.Len(), "nothing was sent")
		assert.Empty(t, clk.Waits(), "nothing was slept")
		if withBudget {
			assert.Zero(t, budget.Waited())
			assert.Same(t, e, budget.Err(), "R20: the Budget remembers")
		}
	}
}

// holdEqualToWhatIsLeftDoesNotFit is a subtest of TestCooldownWaitsFitAndAreCharged:
// a hold equal to what is left does not fit.
func holdEqualToWhatIsLeftDoesNotFit(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	tr := New(retryhttptest.NewScript(retryhttptest.Status(200)), WithClock(clk), WithCooldown(cd))
	holdFor(cd, origin, clk.Now(), 10*time.Second)
	ctx, cancel := clk.WithTimeout(context.Background(), 10*time.Second)
	_, err := tr.RoundTrip(getReq(ctx))
	cancel() // (a deadline left pending on the kit's Clock would cut the next wait)
	assert.ErrorIs(t, err, ErrRateLimited)
	ctx2, cancel2 := clk.WithTimeout(context.Background(), 10*time.Second+time.Nanosecond)
	defer cancel2()
	resp, err := tr.RoundTrip(getReq(ctx2))
	require.NoError(t, err, "a nanosecond more fits")
	resp.Body.Close()
}

// holdChargedAndRefunded is a subtest of TestCooldownWaitsFitAndAreCharged:
// a hold is charged, and canceled during it, refunded.
func holdChargedAndRefunded(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(retryhttptest.Status(200)).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd))
	holdFor(cd, origin, clk.Now(), 4*time.Second)
	budget := NewBudget(PublicTierMaxWait)
	resp, err := tr.RoundTrip(getReq(WithBudget(context.Background(), budget)))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 4*time.Second, budget.Waited())

	holdFor(cd, origin, clk.Now(), 4*time.Second)
	budget = NewBudget(PublicTierMaxWait)
	ctx, cancel := context.WithCancel(WithBudget(context.Background(), budget))
	defer cancel()
	clk.AfterFunc(time.Second, cancel)
	resp, err = tr.RoundTrip(getReq(ctx))
	require.Nil(t, resp)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Canceled, e.Reason)
	assert.Equal(t, time.Second, e.Waited)
	assert.Equal(t, time.Second, budget.Waited(), "3 s given back")
	assert.Equal(t, 1, script.Len(), "the canceled call sent nothing")
}

// TestCooldownNeverHangsOnTheKitClock: a watched key whose tries fail in
// every way ends on the kit's Clock (the old Cooldown waited on a grace
// timer nothing moved when a call's own probe failed).
func TestCooldownNeverHangsOnTheKitClock(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(retryhttptest.Status(429), retryhttptest.Fail(errors.New("connection reset")),
		retryhttptest.Status(429), retryhttptest.Status(200)).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(5))
	done := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(getReq(context.Background()))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the call hangs")
	}
	assert.Equal(t, 4, script.Len())
}

// TestCooldownBasePanics: a base that panics leaves the Cooldown as it was:
// the next calls are paced as before (the old Cooldown leaked the send it
// counted in flight, and held its key for good).
func TestCooldownBasePanics(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	calls := 0
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		if calls++; calls == 1 {
			panic("base bug")
		}
		return respond(200, "ok"), nil
	})
	tr := New(base, WithClock(clk), WithCooldown(cd))
	paceAt(cd, clk.Now(), 100*time.Millisecond)
	require.Panics(t, func() { _, _ = tr.RoundTrip(getReq(context.Background())) })
	for range 3 {
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}, clk.Waits(), "a slot each, no more")
}

// TestCooldownQuietKeysGo: a key nobody calls again goes once it has
// nothing left to say, without anyone calling it; the other keys then pay
// one atomic load (the old Cooldown kept every key on its slow path for
// good; cost_test.go counts the cost while a key is watched).
func TestCooldownQuietKeysGo(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	New(retryhttptest.NewScript(), WithClock(clk), WithCooldown(cd)) // binds the clock
	holdFor(cd, origin, clk.Now(), 2*time.Second)
	assert.Equal(t, 1, cd.size())
	clk.Add(pace.IdleAfter - time.Second)
	time.Sleep(sweepEvery + 100*time.Millisecond) // a sweep, in real time
	assert.Equal(t, 1, cd.size(), "not yet quiet")
	clk.Add(2 * time.Second)
	require.Eventually(t, func() bool { return cd.eng.Watched() == nil }, 3*sweepEvery, 10*time.Millisecond,
		"gone without anyone calling it")
}

// TestCooldownMemoryBounded: at most 4096 keys are watched; a key that
// cannot be is simply not shared; keys gone quiet make room.
func TestCooldownMemoryBounded(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	cd.bind(clk, nil)
	for i := range 3 * maxCoolingKeys {
		holdFor(cd, fmt.Sprintf("https://h%d.example.com", i), clk.Now(), time.Hour)
	}
	assert.Equal(t, maxCoolingKeys, cd.size())
	clk.Add(2 * time.Hour) // every hold is over and quiet: the next key makes room
	require.NotNil(t, cd.watch("https://one-more.example.com", cd.now()))
	assert.Equal(t, 1, cd.size())

	// Full, a new key looks for room at most once a second: a second after
	// it last looked, it looks again.
	for i := range maxCoolingKeys - 1 {
		require.NotNil(t, cd.watch(fmt.Sprintf("https://k%d.example.com", i), cd.now()))
	}
	armed := clk.Now()
	clk.Add(pace.IdleAfter - time.Second/2)
	assert.Nil(t, cd.watch("https://late.example.com", cd.now()), "full, none quiet yet")
	clk.Add(sweepEvery - time.Nanosecond) // every key quiet now, but looked less than a second ago
	require.True(t, clk.Now().Sub(armed) >= pace.IdleAfter)
	assert.Nil(t, cd.watch("https://late.example.com", cd.now()), "looked over less than a second ago")
	clk.Add(time.Nanosecond)
	assert.NotNil(t, cd.watch("https://late.example.com", cd.now()), "a second on, it looks again and finds room")
	cd.Reset()
	for i := range 100 {
		require.NotNil(t, cd.watch(fmt.Sprintf("https://new%d.example.com", i), cd.now()))
	}
	assert.Equal(t, 100, cd.size())
}

// The Cooldown under a hostile provider.

// TestCooldownAfterAnOutage: a provider that answers only 429s for a while,
// then takes everything. In the next 10 minutes the workers with a Cooldown
// must get at least 0.8 of the successes the same workers get without one
// (40–63 against 96,000 after a 10-minute outage, before the
// learned rate had a floor and grew fast again when quiet).
func TestCooldownAfterAnOutage(t *testing.T) {
	for _, outage := range []time.Duration{30 * time.Second, 10 * time.Minute} {
		t.Run(outage.String(), func(t *testing.T) {
			without := outageRun(t, outage, false)
			with := outageRun(t, outage, true)
			ratio := float64(with) / float64(without)
			t.Logf("after a %v outage, 10 minutes: %d successes with a Cooldown, %d without: %.3f", outage, with, without, ratio)
			assert.GreaterOrEqual(t, ratio, 0.8)
		})
	}
}

// outageRun is 8 workers calling a provider (answers in 200 ms) that is out
// for outage, then takes everything; it returns the successes in the 10
// minutes after it came back.
func outageRun(t *testing.T, outage time.Duration, cooldown bool) (ok int) {
	// Answers in 200 ms: 8 workers make 24,000 calls in 10 minutes without
	// a Cooldown (the 50 ms made 96,000: the same ratio, four times
	// the run time).
	synctest.Test(t, func(t *testing.T) {
		p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Dialect: retryhttptest.BareDialect, Latency: 200 * time.Millisecond})
		start := time.Now()
		back, end := start.Add(outage), start.Add(outage+10*time.Minute)
		p.Outage(back)
		opts := []Option{WithMaxRetries(10)}
		if cooldown {
			opts = append(opts, WithCooldown(NewCooldown(nil)))
		}
		tr := New(p, opts...)
		var n atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for time.Now().Before(end) {
					ctx, cancel := context.WithDeadline(context.Background(), end)
					resp, err := tr.RoundTrip(getReq(ctx))
					if err == nil {
						if resp.StatusCode == 200 && !time.Now().Before(back) {
							n.Add(1)
						}
						resp.Body.Close()
					}
					cancel()
				}
			})
		}
		wg.Wait()
		ok = int(n.Load())
	})
	return ok
}

// TestCooldownSlowAnswerAfterTheSweep: a try sent while its key was
// watched answers 429 Retry-After: 30 after 10 s, when the sweep has long
// dropped the quiet key: the hold goes to the key as it is now, Until says
// so, and the next call waits for it (it went into the dropped
// entry, and the next call was sent at once).
func TestCooldownSlowAnswerAfterTheSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cd := NewCooldown(nil)
		var sends []time.Duration
		var mu sync.Mutex
		start := time.Now()
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sends = append(sends, time.Since(start))
			mu.Unlock()
			if r.Header.Get("X-Call") == "slow" {
				time.Sleep(10 * time.Second) // a long answer
				return respond(429, "", "Retry-After", "30"), nil
			}
			return respond(200, "ok"), nil
		})
		tr := New(base, WithCooldown(cd), WithMaxRetries(0))
		paceAt(cd, start, 10*time.Millisecond)
		req := getReq(context.Background())
		req.Header.Set("X-Call", "slow")
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, time.Now().Add(30*time.Second), cd.Until(origin), "the hold, though the key was swept while the try was out")
		resp, err = tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []time.Duration{0, 40 * time.Second}, sends, "the next call waits for the hold")
	})
}

// TestCooldownCountsAreBounded: one answer saying "2 a 999999h" (not even
// spent) paced a key one send per 116 years, and every call failed at once
// ever after. A count's rate is bounded (the whole limit in a
// minute at most), and a later sane count corrects it.
func TestCooldownCountsAreBounded(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	absurd := retryhttptest.Status(200, "X-Ratelimit-Limit-Requests", "2", "X-Ratelimit-Remaining-Requests", "1", "X-Ratelimit-Reset-Requests", "999999h")
	sane := retryhttptest.Status(200, "X-Ratelimit-Limit-Requests", "100", "X-Ratelimit-Remaining-Requests", "90", "X-Ratelimit-Reset-Requests", "100ms")
	script := retryhttptest.NewScript(absurd, sane, sane).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd))
	paceAt(cd, clk.Now(), 10*time.Millisecond)
	for i := range 3 {
		ctx, cancel := clk.WithTimeout(context.Background(), time.Minute)
		resp, err := tr.RoundTrip(getReq(ctx))
		cancel()
		require.NoError(t, err, "call %d: every call goes", i)
		resp.Body.Close()
	}
	s, r := originLane(cd)
	assert.LessOrEqual(t, time.Duration(r.Stated), 31*time.Second, "the absurd count's rate was bounded")
	assert.InDelta(t, float64(10*time.Millisecond)*pace.ExactSlack, s.Per, float64(100*time.Microsecond), "the sane count since set the rate")
	for _, w := range clk.Waits() {
		assert.LessOrEqual(t, w, 31*time.Second, "no wait past the bound")
	}
}

// TestCooldownCountsThatLie: a provider that admits 10 requests a second
// while its counts claim 100: the 429s its counts do not explain slow the
// provider's word (an exact rate was deaf to them, 2.8 requests
// per success; 1.09 without the counts).
func TestCooldownCountsThatLie(t *testing.T) {
	// A run in a bubble is one draw of the goroutines' order: over 15 runs,
	// 1.24 to 1.33 a success without the counts, 1.19 to 1.30 with them.
	per := map[bool]float64{}
	for _, counts := range []bool{false, true} {
		requests, oks := lyingRun(t, counts)
		per[counts] = float64(requests) / float64(oks)
		t.Logf("counts %v: %d requests for %d successes: %.2f a success", counts, requests, oks, per[counts])
		assert.LessOrEqual(t, per[counts], 1.5, "counts %v", counts)
	}
	assert.LessOrEqual(t, per[true], per[false]+0.15, "the lying counts cost little more than none")
}

// lyingRun is 16 workers making 300 calls to a provider of 10 requests a
// second (burst 1) whose answers claim 100 a second when counts is set.
func lyingRun(t *testing.T, counts bool) (requests, oks int) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		level, last := 1.0, time.Now()
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			level, last = min(1, level+now.Sub(last).Seconds()*10), now
			requests++
			var h []string
			if counts {
				h = []string{"X-Ratelimit-Limit-Requests", "100", "X-Ratelimit-Remaining-Requests", "99", "X-Ratelimit-Reset-Requests", "10ms"}
			}
			if level < 1 {
				return respond(429, "", h...), nil
			}
			level--
			oks++
			return respond(200, "ok", h...), nil
		})
		tr := New(base, WithCooldown(NewCooldown(nil)), WithMaxRetries(10))
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for next.Add(1) <= 300 {
					if resp, err := tr.RoundTrip(getReq(context.Background())); err == nil {
						resp.Body.Close()
					}
				}
			})
		}
		wg.Wait()
	})
	return requests, oks
}

// TestCooldownKeyPanics: a key function that panics has the try's response
// closed before the panic goes on up, as an Observer's, and the
// caller's body closed when it panics before the first try.
func TestCooldownKeyPanics(t *testing.T) {
	clk := newClock()
	var panicking atomic.Bool
	cd := NewCooldown(func(*http.Request) string {
		if panicking.Load() {
			panic("key")
		}
		return "k"
	})
	var bodies []*trackedBody
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		b := &trackedBody{r: strings.NewReader("slow down")}
		bodies = append(bodies, b)
		return &http.Response{StatusCode: 429, Header: http.Header{}, Body: b}, nil
	})
	tr := New(base, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	panicking.Store(true)
	assert.Panics(t, func() { _, _ = tr.RoundTrip(getReq(context.Background())) })
	require.Len(t, bodies, 1)
	assert.Positive(t, bodies[0].closed.Load(), "the 429's body, closed before the panic went on")

	panicking.Store(false)
	resp, err := tr.RoundTrip(getReq(context.Background())) // arms "k"
	require.NoError(t, err)
	resp.Body.Close()
	panicking.Store(true)
	body := &trackedBody{r: strings.NewReader("prompt")}
	req, _ := http.NewRequest("POST", origin+"/v1", body)
	assert.Panics(t, func() { _, _ = tr.RoundTrip(req) })
	assert.Positive(t, body.closed.Load(), "the caller's body, closed before the panic went on (R1)")
}

// TestCooldownKeysAreBounded: a key is kept by its SHA-256 once longer than
// 256 bytes, so that 4096 keys of 64 KiB cost what short ones do (once
// 288 MiB), and it is found again by the same long key.
func TestCooldownKeysAreBounded(t *testing.T) {
	long := strings.Repeat("k", 64<<10)
	cd := NewCooldown(func(*http.Request) string { return long })
	clk := newClock()
	tr := New(retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "20"), okReply).WithClock(clk), WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	resp, err := tr.RoundTrip(getReq(context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	ws := cd.eng.Watched()
	require.NotNil(t, ws)
	for _, k := range ws.Keys() {
		assert.Len(t, k, hashedLen, "kept by its hash")
	}
	assert.Equal(t, clk.Now().Add(20*time.Second), cd.Until(long), "found by the long key")
}

// TestCooldownReset: a table test sharing one Cooldown starts each row
// clean with Reset (a 30 s ask made the next row "busy" with
// nothing sent).
func TestCooldownReset(t *testing.T) {
	cd := NewCooldown(nil)
	for _, tc := range []struct {
		name  string
		reply retryhttptest.Reply
		want  int
	}{
		{"asks 30 s", retryhttptest.Status(429, "Retry-After", "30"), 429},
		{"answers", okReply, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd.Reset()
			clk := newClock()
			script := retryhttptest.NewScript(tc.reply).WithClock(clk)
			tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
			ctx := WithBudget(context.Background(), NewBudget(PublicTierMaxWait))
			resp, err := tr.RoundTrip(getReq(ctx))
			if tc.want == 429 {
				require.ErrorIs(t, err, ErrRateLimited)
				return
			}
			require.NoError(t, err, "not held by the row before")
			resp.Body.Close()
			assert.Equal(t, 1, script.Len())
		})
	}
}

// Tests of what the transport hears in an answer for a Cooldown (R17, R18,
// R19), through the public API only: Until says what every call is held for.

// TestHearWhatHoldsEveryCall: an ask in a whole-second Retry-After holds
// only the call that got it; a body's retryDelay, exact, holds every call,
// also when a header asks as much (R19: the body's is the ask when no header
// asks for more); a header asking more than the body is the header's.
func TestHearWhatHoldsEveryCall(t *testing.T) {
	const api = "https://generativelanguage.googleapis.com"
	for _, tc := range []struct {
		name     string
		first    retryhttptest.Reply
		wantHold time.Duration // 0: not held
	}{
		{"Retry-After: 1 alone: only its call", reply(429, "Retry-After", "1"), 0},
		{"retryDelay 1s alone: every call", jsonReply(429, retryInfo(`"1s"`)), time.Second},
		{"retryDelay 1s and Retry-After: 1: every call", jsonReply(429, retryInfo(`"1s"`), "Retry-After", "1"), time.Second},
		{"retryDelay 1s and Retry-After: 2: every call, 2 s", jsonReply(429, retryInfo(`"1s"`), "Retry-After", "2"), 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			cd := NewCooldown(nil)
			tr := New(retryhttptest.NewScript(tc.first).WithClock(clk), WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "POST", api+"/v1beta/models/gemini:generateContent", []byte("{}")))
			require.NoError(t, err)
			resp.Body.Close()
			want := time.Time{}
			if tc.wantHold > 0 {
				want = clk.Now().Add(tc.wantHold)
			}
			assert.Equal(t, want, cd.Until(api))
		})
	}
}

// TestHearSuccessOfAWatchedKey: once the provider has limited a key, every
// answer for it is read (R17), a success too: an exhausted limit's reset on a
// 200, an RFC 3339 time, holds every call until a second before it (R18),
// measured from when the 200 came.
func TestHearSuccessOfAWatchedKey(t *testing.T) {
	const api = "https://api.anthropic.com"
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(
		reply(429, "Retry-After", "1"), // limits the key, holds only its own call
		retryhttptest.Status(200).Asks(retryhttptest.AnthropicReset, 10*time.Second),
	).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	for i := range 2 {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "POST", api+"/v1/messages", []byte("{}")))
		require.NoError(t, err, "call %d", i+1)
		resp.Body.Close()
	}
	require.Equal(t, 2, script.Len(), "tries")
	assert.Equal(t, script.Requests()[1].At.Add(9*time.Second), cd.Until(api))
}

// Every instant a clock can give works (STYLE.md): the design card's fake
// clock, github.com/benbjohnson/clock's Mock, starts at the Unix epoch, and
// a user's test may set it before the epoch or centuries ahead.

// instants is where a mock clock starts in these tests.
var instants = []struct {
	name string
	at   time.Time
}{
	{"the Unix epoch (clock.NewMock)", time.Unix(0, 0).UTC()},
	{"before the epoch", time.Date(1901, 3, 4, 5, 6, 7, 8, time.UTC)},
	{"2026", time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)},
	{"the year 2500", time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC)},
}

// TestCooldownAtEveryInstant: a Retry-After: 5 holds the next call, Until
// says when on the mock's own clock, and five failures open the circuit,
// wherever the clock starts, with or without a Store on the same clock.
func TestCooldownAtEveryInstant(t *testing.T) {
	for _, at := range instants {
		for _, shared := range []bool{false, true} {
			t.Run(at.name+map[bool]string{false: "", true: "/store.Local"}[shared], func(t *testing.T) {
				mock := clock.NewMock()
				mock.Set(at.at)
				opts := []CooldownOption{WithCircuit(Circuit{Failures: 5, Open: time.Minute})}
				if shared {
					opts = append(opts, WithStore(store.NewLocal(mock.Now)))
				}
				cd := NewCooldown(nil, opts...)
				defer cd.Close()
				script := retryhttptest.NewScript(reply(429, "Retry-After", "5"), reply(200))
				tr := New(script, WithClock(mock), WithCooldown(cd), WithMaxRetries(0))

				resp, err := tr.RoundTrip(getReq(context.Background()))
				require.NoError(t, err)
				resp.Body.Close()
				assert.WithinDuration(t, at.at.Add(5*time.Second), cd.Until(origin), time.Microsecond, "Until, on the mock's clock")
				mock.Add(time.Millisecond)
				ctx := WithBudget(context.Background(), NewBudget(time.Second))
				_, err = tr.RoundTrip(getReq(ctx))
				assert.ErrorIs(t, err, ErrRateLimited, "held: 4.999 s does not fit a Budget of 1 s")
				assert.Equal(t, 1, script.Len(), "nothing sent 1 ms after Retry-After: 5")

				mock.Add(5 * time.Second)
				down := New(retryhttptest.NewScript(reply(503)), WithClock(mock), WithCooldown(cd), WithMaxRetries(0))
				const downOrigin = "https://down.example.com" // not paced by the 429 above
				for range 5 {
					resp, err := down.RoundTrip(newRequest(t, context.Background(), http.MethodGet, downOrigin, nil))
					if err == nil {
						resp.Body.Close()
					}
				}
				assert.True(t, cd.Down(downOrigin), "five failures in a row open the circuit")
				_, err = down.RoundTrip(newRequest(t, context.Background(), http.MethodGet, downOrigin, nil))
				assert.ErrorIs(t, err, ErrUnavailable)
				mock.Add(time.Minute)
				assert.False(t, cd.Down(downOrigin), "Open has passed: the next try probes")
			})
		}
	}
}
