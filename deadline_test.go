package retryhttp

import (
	"context"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeadlineOnTheInjectedClock: what a deadline leaves is the deadline less
// the transport's clock's now (R7), however far that clock is from the real
// time. A clock a year ahead sees a deadline set on it, not the year; a clock
// in 1970 (clock.NewMock) sees a real deadline decades away, as WithClock's
// doc warns; a clock a year ahead sees a real deadline long past.
func TestDeadlineOnTheInjectedClock(t *testing.T) {
	const year = 365 * 24 * time.Hour
	for _, tc := range []struct {
		name       string
		at         func() time.Time // the clock's time at the start
		onTheClock bool             // the 10 s deadline is on the clock (Mock.WithTimeout), else real
		retryAfter string
		wantWaits  []time.Duration
		wantStatus int
	}{
		{"a year ahead, 10 s on the clock: a 30 s ask does not fit", func() time.Time { return time.Now().Add(year) }, true,
			"30", nil, 429},
		{"a year ahead, 10 s on the clock: a 5 s ask fits", func() time.Time { return time.Now().Add(year) }, true,
			"5", []time.Duration{5 * time.Second}, 200},
		{"a year behind, 10 s on the clock: a 5 s ask fits", func() time.Time { return time.Now().Add(-year) }, true,
			"5", []time.Duration{5 * time.Second}, 200},
		{"in 1970, 10 s of real time: a 30 s ask fits, decades away", func() time.Time { return time.Unix(0, 0) }, false,
			"30", []time.Duration{30 * time.Second}, 200},
		{"a year ahead, 10 s of real time: long past, nothing fits", func() time.Time { return time.Now().Add(year) }, false,
			"5", nil, 429},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			clk.Set(tc.at())
			var (
				ctx    context.Context
				cancel context.CancelFunc
			)
			if tc.onTheClock {
				ctx, cancel = clk.WithTimeout(context.Background(), 10*time.Second)
			} else {
				ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
			}
			defer cancel()
			script := retryhttptest.NewScript(reply(429, "Retry-After", tc.retryAfter), reply(200)).WithClock(clk)
			tr := New(script, WithClock(clk), WithBackoff(noJitter))

			r := drive(t, tr, clk, newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))
			require.NoError(t, r.err)
			r.resp.Body.Close()
			assert.Equal(t, tc.wantStatus, r.resp.StatusCode)
			assertWaits(t, tc.wantWaits, r.waits)
			assert.Equal(t, 1+len(tc.wantWaits), script.Len(), "tries")
		})
	}
}
