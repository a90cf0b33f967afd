package retryhttp

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
