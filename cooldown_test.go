package retryhttp

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/retryhttptest"
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
	s := cd.stateOf(origin).Lane(laneRequests)
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
		"wait_ms": int64(20000), "wait_from": "cooldown", "method": "GET", "url": origin + "/v1/chat",
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
