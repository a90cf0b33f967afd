package retryhttp

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const origin = "https://api.example.com"

// armed returns a Cooldown on clk whose origin cools for d from now.
func armed(clk interface{ Now() time.Time }, d time.Duration) *Cooldown {
	cd := NewCooldown(nil)
	now := clk.Now()
	cd.settle(origin, nil, now, signal{until: now.Add(d)}, nil)
	return cd
}

func TestCooldownKeys(t *testing.T) {
	cd := NewCooldown(nil)
	for _, tc := range []struct{ url, want string }{
		{"https://API.Example.com/v1/chat?key=x", "https://api.example.com"},
		{"HTTP://api.example.com:8080/v1", "http://api.example.com:8080"},
		{"https://user:pw@api.example.com/v1", "https://api.example.com"},
		{"/relative", ""},
	} {
		req, err := http.NewRequest("GET", tc.url, nil)
		require.NoError(t, err)
		assert.Equal(t, tc.want, cd.keyOf(req), tc.url)
	}
	byModel := NewCooldown(func(r *http.Request) string { return r.URL.Host + "/" + r.Header.Get("X-Model") })
	req, _ := http.NewRequest("GET", "https://api.example.com/v1", nil)
	req.Header.Set("X-Model", "gpt-4o")
	assert.Equal(t, "api.example.com/gpt-4o", byModel.keyOf(req))
}

// TestCooldownArming checks R17's arming: forward only, Until zero when not
// cooling, and the state after it ends.
func TestCooldownArming(t *testing.T) {
	now := epoch
	cd := NewCooldown(nil)
	assert.True(t, cd.Until(origin).IsZero(), "never armed")
	cd.bind(mockAt(now))

	cd.settle(origin, nil, now, signal{until: now.Add(20 * time.Second)}, nil)
	assert.Equal(t, now.Add(20*time.Second), cd.Until(origin))
	cd.settle(origin, nil, now, signal{until: now.Add(5 * time.Second)}, nil)
	assert.Equal(t, now.Add(20*time.Second), cd.Until(origin), "a shorter signal never shortens it")
	cd.settle(origin, nil, now, signal{until: now.Add(30 * time.Second)}, nil)
	assert.Equal(t, now.Add(30*time.Second), cd.Until(origin), "a longer one extends it")
	cd.settle(origin, nil, now, signal{until: now.Add(-time.Second)}, nil)
	assert.Equal(t, now.Add(30*time.Second), cd.Until(origin), "a signal in the past arms nothing")
	assert.True(t, cd.Until("https://other.example.com").IsZero(), "another key")

	cd.bind(nil) // the first clock stays
	later := NewCooldown(nil)
	later.bind(mockAt(now.Add(time.Minute)))
	later.settle(origin, nil, now, signal{until: now.Add(30 * time.Second)}, nil)
	assert.True(t, later.Until(origin).IsZero(), "over on its clock: not cooling")
}

// mockAt is a mock clock stopped at t.
func mockAt(t time.Time) *clock.Mock {
	m := clock.NewMock()
	m.Set(t)
	return m
}

// TestCooldownRelease walks the gate that spreads the calls released when a
// cooldown ends (R17): one probe first, then as many as the provider says
// remain, and free flow when it has room for every call in progress.
func TestCooldownRelease(t *testing.T) {
	now := epoch
	cd := armed(mockAt(now), time.Second)
	end := now.Add(time.Second)
	calls := make([]member, 5) // five calls in progress on the key

	assert.Equal(t, time.Second, cd.admit(origin, now, &calls[0]).hold, "cooling: hold the rest")

	probe := cd.admit(origin, end, &calls[0])
	require.NotNil(t, probe.entry, "the first call after the end is the probe")
	for i := 1; i <= 3; i++ {
		a := cd.admit(origin, end, &calls[i])
		require.NotNil(t, a.wake, "the others wait for the probe's answer")
		assert.Equal(t, probeGrace, a.grace)
		defer func() {
			select {
			case <-a.wake:
			default:
				t.Error("a waiting call was not woken")
			}
		}()
	}
	cd.settle(origin, nil, now, signal{until: now.Add(time.Second / 2)}, &calls[4]) // the fifth got a 429 asking less: a member, the end unchanged
	assert.Equal(t, 5, cd.m[origin].members)

	// The probe's answer: the provider says 2 remain. Two go, not three.
	cd.settle(origin, probe.entry, end, signal{ok: true, remaining: 2, counted: true}, &calls[0])
	for range 3 {
		cd.unwait(origin)
	}
	first, second, third := cd.admit(origin, end, &calls[1]), cd.admit(origin, end, &calls[2]), cd.admit(origin, end, &calls[3])
	assert.NotNil(t, first.entry)
	assert.NotNil(t, second.entry)
	require.NotNil(t, third.wake, "the third waits: the provider had room for two")

	// An answer says 0 remain, reset in 1s: everyone holds again, and when
	// that ends one probe goes first again.
	cd.settle(origin, first.entry, end, signal{ok: true, remaining: 0, counted: true, until: end.Add(time.Second)}, &calls[1])
	cd.unwait(origin)
	assert.Equal(t, time.Second, cd.admit(origin, end, &calls[3]).hold)
	later := end.Add(time.Second)
	again := cd.admit(origin, later, &calls[3])
	require.NotNil(t, again.entry)
	assert.NotNil(t, cd.admit(origin, later, &calls[4]).wake)
	cd.unwait(origin)

	// Any answer is the provider's word about now, one from a send of an
	// earlier round too: room for 4, one send still out, 5 calls in
	// progress: still gated. Then two calls end, and room for 4 covers the
	// 3 left: the key is free.
	cd.settle(origin, second.entry, later, signal{ok: true, remaining: 4, counted: true}, &calls[2])
	assert.EqualValues(t, 1, cd.active.Load(), "room for 3 (4, less the send out) for 5 calls: still gated")
	cd.leave(&calls[0])
	cd.leave(&calls[1])
	cd.settle(origin, again.entry, later, signal{ok: true, remaining: 4, counted: true}, &calls[3])
	assert.Zero(t, cd.active.Load(), "room for every call in progress: free again")
	assert.Equal(t, admission{}, cd.admit(origin, later, &calls[4]))
}

func TestCooldownReleaseWithoutCounts(t *testing.T) {
	now := epoch
	for _, tc := range []struct {
		name     string
		answer   signal
		wantFree bool
	}{
		{"a success with no count frees the key", signal{ok: true}, true},
		{"a 429 with no ask keeps the gate", signal{}, false},
		{"a transport error keeps the gate", signal{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd := armed(mockAt(now), time.Second)
			end := now.Add(time.Second)
			probe := cd.admit(origin, end, nil)
			cd.settle(origin, probe.entry, end, tc.answer, nil)
			assert.Equal(t, tc.wantFree, cd.active.Load() == 0)
			if !tc.wantFree {
				assert.NotNil(t, cd.admit(origin, end, nil).wake, "nothing more goes until the grace")
				cd.unwait(origin)
				late := cd.admit(origin, end.Add(probeGrace), nil)
				assert.NotNil(t, late.entry, "after the grace one more goes")
			}
		})
	}
}

// TestCooldownMemoryBounded: whatever the number of keys, a Cooldown keeps
// at most maxCoolingKeys, and entries whose cooldown is over go.
func TestCooldownMemoryBounded(t *testing.T) {
	now := epoch
	cd := NewCooldown(nil)
	for i := range 3 * maxCoolingKeys {
		cd.settle(fmt.Sprintf("https://h%d.example.com", i), nil, now, signal{until: now.Add(time.Hour)}, nil)
	}
	assert.Equal(t, maxCoolingKeys, len(cd.m))
	assert.EqualValues(t, maxCoolingKeys, cd.active.Load())

	// An hour later every one of them is over: new keys sweep them out.
	later := now.Add(2 * time.Hour)
	for i := range 100 {
		cd.settle(fmt.Sprintf("https://new%d.example.com", i), nil, later, signal{until: later.Add(time.Minute)}, nil)
	}
	assert.Equal(t, 100, len(cd.m))
	assert.EqualValues(t, 100, cd.active.Load())
}

// newCdEnv is a Transport on the kit's Clock with a fresh Cooldown, and a
// count of what it logged.
func newCdEnv(t *testing.T, replies []retryhttptest.Reply, opts ...Option) (*retryhttptest.Clock, *Cooldown, *retryhttptest.Script, *Transport, func(string) int) {
	t.Helper()
	clk := retryhttptest.NewClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(replies...).WithClock(clk)
	log, logs := logSink()
	tr := New(script, append([]Option{WithClock(clk), WithCooldown(cd), WithBackoff(noJitter), WithLogger(log)}, opts...)...)
	count := func(msg string) int { return logs.FilterMessage(msg).Len() }
	return clk, cd, script, tr, count
}

// TestCooldownThroughTheTransport checks R17 end to end on the kit's Clock:
// exact holds, the log, Attempt.Held, the Budget, and what ends a call.
func TestCooldownThroughTheTransport(t *testing.T) {
	get := func(ctx context.Context) *http.Request {
		r, _ := http.NewRequestWithContext(ctx, "GET", origin+"/v1/chat", nil)
		return r
	}
	ok := retryhttptest.Reply{Body: "ok"}

	t.Run("a 429 with Retry-After holds the next call before its first try", func(t *testing.T) {
		clk, cd, script, tr, logged := newCdEnv(t, []retryhttptest.Reply{retryhttptest.Status(429, "Retry-After", "20"), ok, ok}, WithMaxRetries(0))
		resp, err := tr.RoundTrip(get(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 429, resp.StatusCode, "no retries: the 429 is handed back")
		assert.Equal(t, clk.Now().Add(20*time.Second), cd.Until(origin))

		var held []time.Duration
		other := New(script, WithClock(clk), WithCooldown(cd), WithObserver(func(_ context.Context, a Attempt) { held = append(held, a.Held) }))
		resp, err = other.RoundTrip(get(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, []time.Duration{20 * time.Second}, clk.Waits(), "another Transport sharing the Cooldown held 20s")
		assert.Equal(t, []time.Duration{20 * time.Second}, held, "Attempt.Held")
		reqs := script.Requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, 20*time.Second, reqs[1].At.Sub(reqs[0].At), "the second call's first try came 20s after the 429")
		assert.Zero(t, logged(msgHolding), "the other Transport has no logger")
		assert.Zero(t, cd.active.Load(), "the probe's success freed the key")
	})

	t.Run("the hold is logged", func(t *testing.T) {
		clk := retryhttptest.NewClock()
		cd := NewCooldown(nil)
		log, logs := logSink()
		tr := New(retryhttptest.NewScript(ok).WithClock(clk), WithClock(clk), WithCooldown(cd), WithLogger(log))
		cd.settle(origin, nil, clk.Now(), signal{until: clk.Now().Add(3 * time.Second)}, nil)
		req := get(context.Background())
		req.URL.RawQuery = "key=secret"
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		entries := logs.FilterMessage(msgHolding).All()
		require.Len(t, entries, 1)
		assert.Equal(t, map[string]any{
			"wait_ms": int64(3000), "wait_from": "cooldown", "method": "GET", "url": origin + "/v1/chat",
		}, entries[0].ContextMap(), "R14: the fields, and no query")
	})

	t.Run("a retry waits the largest of backoff, ask and cooldown", func(t *testing.T) {
		clk := retryhttptest.NewClock()
		cd := NewCooldown(nil)
		var attempts []Attempt
		tries := 0
		// While this call's first try is out, another call to the origin is
		// told to wait 5s: this call's retry waits for that, not its own 1s.
		base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
			if tries++; tries == 1 {
				cd.settle(origin, nil, clk.Now(), signal{until: clk.Now().Add(5 * time.Second)}, nil)
				return respond(503, "", "Retry-After", "1"), nil
			}
			return respond(200, "ok"), nil
		})
		tr := New(base, WithClock(clk), WithCooldown(cd), WithBackoff(noJitter),
			WithObserver(func(_ context.Context, a Attempt) { attempts = append(attempts, a) }))
		resp, err := tr.RoundTrip(get(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, attempts, 2)
		assert.Equal(t, 5*time.Second, attempts[0].Wait)
		assert.Equal(t, FromCooldown, attempts[0].From)
		assert.Equal(t, []time.Duration{5 * time.Second}, clk.Waits(), "the retry waited for the cooldown, and no hold followed")
	})

	t.Run("a hold that does not fit sends nothing: busy, with or without a Budget", func(t *testing.T) {
		for _, withBudget := range []bool{false, true} {
			clk, cd, script, tr, _ := newCdEnv(t, []retryhttptest.Reply{ok})
			cd.settle(origin, nil, clk.Now(), signal{until: clk.Now().Add(30 * time.Second)}, nil)
			ctx, cancel := clk.WithTimeout(context.Background(), 10*time.Second)
			var budget *Budget
			if withBudget {
				budget = NewBudget(PublicTierMaxWait)
				ctx = WithBudget(context.Background(), budget)
			}
			resp, err := tr.RoundTrip(get(ctx))
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
	})

	t.Run("a hold is charged to the Budget", func(t *testing.T) {
		clk, cd, _, tr, _ := newCdEnv(t, []retryhttptest.Reply{ok})
		cd.settle(origin, nil, clk.Now(), signal{until: clk.Now().Add(4 * time.Second)}, nil)
		budget := NewBudget(PublicTierMaxWait)
		resp, err := tr.RoundTrip(get(WithBudget(context.Background(), budget)))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 4*time.Second, budget.Waited())
		assert.NoError(t, budget.Err())
	})

	t.Run("canceled during a hold", func(t *testing.T) {
		clk, cd, script, tr, _ := newCdEnv(t, []retryhttptest.Reply{ok})
		cd.settle(origin, nil, clk.Now(), signal{until: clk.Now().Add(4 * time.Second)}, nil)
		budget := NewBudget(PublicTierMaxWait)
		ctx, cancel := context.WithCancel(WithBudget(context.Background(), budget))
		defer cancel()
		clk.AfterFunc(time.Second, cancel)
		resp, err := tr.RoundTrip(get(ctx))
		require.Nil(t, resp)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, Canceled, e.Reason)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, time.Second, e.Waited)
		assert.Equal(t, time.Second, budget.Waited(), "3s given back")
		assert.Zero(t, script.Len())
	})

	t.Run("rate-limit headers on a success arm it", func(t *testing.T) {
		clk, cd, _, tr, _ := newCdEnv(t, []retryhttptest.Reply{
			retryhttptest.Status(200, "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "2s"), ok,
		})
		for range 2 {
			resp, err := tr.RoundTrip(get(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Equal(t, []time.Duration{2 * time.Second}, clk.Waits(), "the second call held until the reset")
		assert.Zero(t, cd.active.Load(), "and its success freed the key")
	})

	t.Run("a key function that returns empty leaves the request out", func(t *testing.T) {
		clk := retryhttptest.NewClock()
		cd := NewCooldown(func(r *http.Request) string {
			if r.Header.Get("X-Model") == "" {
				return ""
			}
			return r.URL.Host + "/" + r.Header.Get("X-Model")
		})
		script := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "20"), ok, ok).WithClock(clk)
		tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
		send := func(model string) int {
			r := get(context.Background())
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
	})
}

// TestCooldownOneProbeFirst: calls held by one cooldown do not all send when
// it ends: one goes, the others wait for its answer, and the provider's
// count of what remains sets how many go next (R17).
func TestCooldownOneProbeFirst(t *testing.T) {
	clk := newFakeClock()
	cd := NewCooldown(nil)
	var sent atomic.Int32
	release := make(chan struct{})
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if sent.Add(1) == 1 {
			<-release // the probe answers once every other call is waiting
		}
		return respond(200, "ok", "X-Ratelimit-Remaining-Requests", "100"), nil
	})
	tr := New(base, WithClock(clk), WithCooldown(cd))
	cd.settle(origin, nil, clk.Now(), signal{until: clk.Now().Add(time.Second)}, nil)
	clk.Add(time.Second) // the cooldown is over: the calls meet the gate

	const calls = 8
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := http.NewRequest("GET", origin+"/v1", nil)
			resp, err := tr.RoundTrip(r)
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}()
	}
	require.Eventually(t, func() bool {
		cd.mu.Lock()
		defer cd.mu.Unlock()
		e := cd.m[origin]
		return e != nil && e.waiters == calls-1
	}, 5*time.Second, time.Millisecond, "seven calls wait for the probe")
	assert.EqualValues(t, 1, sent.Load(), "only the probe was sent")
	close(release) // room for 100: the others go
	wg.Wait()
	assert.EqualValues(t, calls, sent.Load())
	assert.Zero(t, cd.active.Load(), "the key is free")
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
	} {
		t.Run(strings.Join(h, " "), func(t *testing.T) {
			clk := retryhttptest.NewClock()
			cd := NewCooldown(nil)
			script := retryhttptest.NewScript(retryhttptest.Status(429, h...)).WithClock(clk)
			tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
			r, _ := http.NewRequest("GET", origin, nil)
			resp, err := tr.RoundTrip(r)
			require.NoError(t, err)
			resp.Body.Close()
			until := cd.Until(origin)
			assert.True(t, until.IsZero() || until.After(clk.Now()), "never in the past")
		})
	}
}
