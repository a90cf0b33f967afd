package retryhttp

import (
	"context"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
