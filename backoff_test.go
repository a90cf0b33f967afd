package retryhttp

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBackoffDelay(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		b      Backoff
		retry  int
		random float64
		want   time.Duration
	}{
		{"default first retry is the base", DefaultBackoff, 1, 0.5, 400 * ms},
		{"default second retry doubles", DefaultBackoff, 2, 0.5, 800 * ms},
		{"default third retry", DefaultBackoff, 3, 0.5, 1600 * ms},
		{"jitter low end", DefaultBackoff, 1, 0, 320 * ms},
		{"jitter high end approaches d*(1+J)", DefaultBackoff, 1, 0.999999999, 479999999},
		{"cap at Max", DefaultBackoff, 10, 0.5, 30 * time.Second},
		{"jitter applies after the cap", DefaultBackoff, 10, 0, 24 * time.Second},
		{"no jitter", noJitter, 2, 0.9, 800 * ms},
		{"retry below 1 counts as 1", noJitter, 0, 0.5, 400 * ms},
		{"negative retry counts as 1", noJitter, -5, 0.5, 400 * ms},
		{"factor below 1 counts as 1", Backoff{Base: time.Second, Factor: 0.5}, 5, 0.5, time.Second},
		{"factor NaN counts as 1", Backoff{Base: time.Second, Factor: math.NaN()}, 5, 0.5, time.Second},
		{"zero backoff", Backoff{}, 3, 0.7, 0},
		{"negative base", Backoff{Base: -time.Second, Factor: 2}, 3, 0.7, 0},
		{"max <= 0 is no cap", Backoff{Base: time.Second, Factor: 10, Max: -1}, 4, 0.5, 1000 * time.Second},
		{"saturates, never overflows", Backoff{Base: time.Hour, Factor: 1e6}, 50, 0.5, maxDuration},
		{"saturates with full jitter", Backoff{Base: time.Hour, Factor: math.Inf(1), Jitter: 1}, 3, 0.999, maxDuration},
		{"infinite factor, low jitter draw, stays finite", Backoff{Base: time.Hour, Factor: math.Inf(1), Jitter: 0.5}, 3, 0, 1 << 62}, // half of 2^63, as float64 holds it
		{"jitter above 1 clamps to 1", Backoff{Base: time.Second, Factor: 1, Jitter: 5}, 1, 0, 0},
		{"negative jitter is none", Backoff{Base: time.Second, Factor: 1, Jitter: -1}, 1, 0, time.Second},
		{"random below 0 clamps to 0", DefaultBackoff, 1, -3, 320 * ms},
		{"random NaN clamps to 0", DefaultBackoff, 1, math.NaN(), 320 * ms},
		{"random 1 stays below the top", Backoff{Base: time.Second, Factor: 1, Jitter: 1}, 1, 1, 2*time.Second - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.b.Delay(tt.retry, tt.random), "%+v.Delay(%d, %v)", tt.b, tt.retry, tt.random)
		})
	}
}

// TestBackoffDelayHalfIsExact checks R4's promise that Delay(n, 0.5) is d
// exactly, for every retry and several jitters, not just the default's.
func TestBackoffDelayHalfIsExact(t *testing.T) {
	for _, jitter := range []float64{0, 0.1, 0.2, 0.3, 0.7, 1} {
		b := Backoff{Base: 123456789 * time.Nanosecond, Factor: 1.7, Max: time.Hour, Jitter: jitter}
		for n := 1; n <= 40; n++ {
			d := Backoff{Base: b.Base, Factor: b.Factor, Max: b.Max}.Delay(n, 0)
			assert.Equal(t, d, b.Delay(n, 0.5), "jitter %v: Delay(%d, 0.5), want d", jitter, n)
		}
	}
}

// TestBackoffDelayBounds sweeps retries and draws: the delay stays within
// [d*(1-J), d*(1+J)] and never goes negative.
func TestBackoffDelayBounds(t *testing.T) {
	b := DefaultBackoff
	for n := 1; n <= 64; n++ {
		d := math.Min(float64(b.Base)*math.Pow(b.Factor, float64(n-1)), float64(b.Max))
		for r := 0.0; r < 1; r += 0.0625 {
			lo, hi := time.Duration(d*(1-b.Jitter))-1, time.Duration(d*(1+b.Jitter))+1
			got := b.Delay(n, r)
			require.True(t, lo <= got && got <= hi, "Delay(%d, %v) = %v, want within [%v, %v]", n, r, got, lo, hi)
		}
	}
}
