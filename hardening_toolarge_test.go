package retryhttp

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 29, item 5: OpenAI's "Request too large ... on tokens per min" is
// the caller's mistake (a call asking for more than the whole limit), not
// the provider's word on its limit: it is handed back (R23), and it neither
// arms a key, nor cuts, holds or limits a lane.

// tooLargeBody is OpenAI's answer to a call of 40,000 tokens on a limit of
// 30,000 a minute.
const tooLargeBody = `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 40000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`

func tooLarge429() retryhttptest.Reply {
	return retryhttptest.Reply{Status: 429, Header: http.Header{"Content-Type": {"application/json"}}, Body: tooLargeBody}
}

// laneState is what a test compares of a lane before and after an answer:
// its rates, hold and limit.
type laneState struct {
	per     float64
	rates   pace.Rates
	until   time.Time
	limited time.Time
}

func laneNow(cd *Cooldown, l laneID) (laneState, bool) {
	if cd.entry(origin) == nil {
		return laneState{}, false
	}
	s := cd.stateOf(origin).Lane(l)
	return laneState{per: s.Per, rates: pace.DecodeRates(s.Rates), until: s.Until, limited: s.Limited}, true
}

// TestHardeningTooLargeSaysNothingOfTheLimit: a "Request too large" 429 on
// a key nobody watches arms nothing; on a key whose token lane is paced
// (learned from a 429 that named it, ramping), sent behind another send so
// that a 429 to it would cut, it leaves the lane as it was: no cut (the
// issue: the learned rate halved), no pause (157 ms), no limit remembered.
// Over one process and over a Store shared with another replica, which
// hears nothing either.
func TestHardeningTooLargeSaysNothingOfTheLimit(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "one process", true: "a fleet on a store.Local"}[shared]
		t.Run(name+": a key not watched", func(t *testing.T) {
			clk := newClock()
			cd, other := tooLargeCooldowns(clk, shared)
			tr := New(retryhttptest.NewScript(tooLarge429()).WithClock(clk), WithClock(clk), WithCooldown(cd))
			resp, err := tr.RoundTrip(postOf(context.Background(), 160000))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 429, resp.StatusCode, "handed back")
			assert.Zero(t, cd.size(), "nothing armed")
			assert.Zero(t, other.size(), "nothing heard by the other replica")
		})
		t.Run(name+": a token lane paced", func(t *testing.T) {
			clk := newClock()
			cd, other := tooLargeCooldowns(clk, shared)
			arm := New(retryhttptest.NewScript(tokens429("tokens"), okReply).WithClock(clk), WithClock(clk), WithCooldown(cd))
			resp, err := arm.RoundTrip(postOf(context.Background(), 4000))
			require.NoError(t, err)
			resp.Body.Close()
			before, ok := laneNow(cd, laneTokens)
			require.True(t, ok)
			require.Positive(t, before.per, "the token lane is paced")
			require.True(t, before.rates.Ramping, "ramping: a cut would halve it")

			// Another send's slot of 100,000 tokens (2 s at the learned
			// rate) is ahead of the too-large call: it waits behind it, so
			// that a 429 to it is one that would cut.
			res := cd.eng.Take(context.Background(), cd.entry(origin), cd.now(), cooldown.Costs{1, 100000, 100000}, time.Hour)
			require.True(t, res.Took)
			script := retryhttptest.NewScript(tooLarge429()).WithClock(clk)
			var held time.Duration
			tr := New(script, WithClock(clk), WithCooldown(cd), WithObserver(func(_ context.Context, a Attempt) { held = a.Held }))
			resp, err = tr.RoundTrip(postOf(context.Background(), 160000)) // 40,000 tokens
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, tooLargeBody, string(body), "handed back whole")
			assert.Equal(t, 1, script.Len(), "never retried")
			require.Greater(t, held, time.Second, "it waited behind the other send")

			after, _ := laneNow(cd, laneTokens)
			assert.Equal(t, before.per, after.per, "no cut")
			assert.Equal(t, before.rates.Generation, after.rates.Generation, "no cut")
			assert.False(t, after.until.After(clk.Now()), "no hold, no pause")
			assert.Equal(t, before.limited, after.limited, "no limit remembered")
			if shared {
				got, err := other.store().Apply(context.Background(), origin, nil)
				require.NoError(t, err)
				assert.Equal(t, before.per, got.Lane(laneTokens).Per, "the fleet's rate is not cut")
				assert.False(t, got.Lane(laneTokens).Until.After(got.Now), "the fleet is not held")
			}
		})
	}
}

// tooLargeCooldowns is a Cooldown on clk and another replica's: over one
// store.Local when shared, else each its own.
func tooLargeCooldowns(clk *retryhttptest.Clock, shared bool) (cd, other *Cooldown) {
	if !shared {
		return NewCooldown(nil), NewCooldown(nil)
	}
	local := store.NewLocal(clk.Now)
	cd, other = NewCooldown(nil, WithStore(local)), NewCooldown(nil, WithStore(local))
	New(nil, WithClock(clk), WithCooldown(other)) // binds other's clock
	return cd, other
}
