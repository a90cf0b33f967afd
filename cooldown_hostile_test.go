package retryhttp

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Cooldown under a hostile provider (issue 21, items 5 to 10).

// TestCooldownAfterAnOutage: a provider that answers only 429s for a while,
// then takes everything. In the next 10 minutes the workers with a Cooldown
// must get at least 0.8 of the successes the same workers get without one
// (issue 21: 40–63 against 96,000 after a 10-minute outage, before the
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
// so, and the next call waits for it (issue 21: it went into the dropped
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
// ever after (issue 21). A count's rate is bounded (the whole limit in a
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
// provider's word (issue 21: an exact rate was deaf to them, 2.8 requests
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
// closed before the panic goes on up, as an Observer's (issue 21), and the
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
// 256 bytes, so that 4096 keys of 64 KiB cost what short ones do (issue 21:
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
// clean with Reset (issue 21: a 30 s ask made the next row "busy" with
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
