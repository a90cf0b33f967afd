package retryhttptest

// Tests of the Provider's pure helpers: how each dialect writes a time, and
// the bucket's edges.

import (
	"math"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFormatReset(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{time.Nanosecond, "1ms"},
		{20 * time.Millisecond, "20ms"},
		{20*time.Millisecond + 1, "21ms"},
		{999*time.Millisecond + 1, "1s"},
		{time.Second, "1s"},
		{1500 * time.Millisecond, "1.5s"},
		{1234567 * time.Microsecond, "1.235s"},
		{6 * time.Minute, "6m0s"},
		{90*time.Second + 500*time.Millisecond, "1m30.5s"},
	}
	for _, tt := range tests {
		got := formatReset(tt.d)
		assert.Equal(t, tt.want, got, "%v", tt.d)
		back, err := time.ParseDuration(got)
		if assert.NoError(t, err) {
			assert.GreaterOrEqual(t, back, tt.d, "%q reads back earlier than the reset", got)
		}
	}
}

func TestFormatResetTime(t *testing.T) {
	parse := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return v
	}
	tests := []struct {
		t    string
		want string
	}{
		{"2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z"},
		{"2026-01-02T03:04:05.000000001Z", "2026-01-02T03:04:06Z"},
		{"2026-01-02T03:04:05.999Z", "2026-01-02T03:04:06Z"},
		{"2026-01-02T04:04:05.5+01:00", "2026-01-02T03:04:06Z"},
		{"2026-12-31T23:59:59.1Z", "2027-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		got := formatResetTime(parse(tt.t))
		assert.Equal(t, tt.want, got, tt.t)
		assert.False(t, parse(got).Before(parse(tt.t)), "%s is earlier than %s", got, tt.t)
	}
}

func TestFormatProtoDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{13 * time.Second, "13s"},
		{13 * time.Millisecond, "0.013s"},
		{13*time.Millisecond + 1, "0.013000001s"},
		{1500 * time.Microsecond, "0.001500s"},
		{time.Nanosecond, "0.000000001s"},
		{45*time.Second + 837906927, "45.837906927s"},
		{90 * time.Second, "90s"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, formatProtoDuration(tt.d), "%v", tt.d)
		if tt.d > 0 { // what Gemini sends, retryhttp reads back exactly
			v := &verdict{refused: true, by: requestsLimit, wait: tt.d}
			assert.Equal(t, retryhttp.BodyHint{RetryAfter: tt.d}, retryhttp.ParseErrorBody(geminiBody(v, "m")), "%v", tt.d)
		}
	}
}

func TestCeilUnits(t *testing.T) {
	tests := []struct {
		d, unit time.Duration
		want    int64
	}{
		{-time.Second, time.Second, 1},
		{0, time.Millisecond, 1},
		{time.Nanosecond, time.Millisecond, 1},
		{time.Millisecond, time.Millisecond, 1},
		{time.Millisecond + 1, time.Millisecond, 2},
		{10 * time.Millisecond, time.Second, 1},
		{2*time.Second + 1, time.Second, 3},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ceilUnits(tt.d, tt.unit), "ceilUnits(%v, %v)", tt.d, tt.unit)
	}
}

func TestCommas(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 50000: "50,000", 3000000: "3,000,000", -1234: "-1,234"} {
		assert.Equal(t, want, commas(n), "%d", n)
	}
}

func TestSeconds(t *testing.T) {
	assert.Equal(t, time.Duration(0), seconds(-1))
	assert.Equal(t, time.Duration(0), seconds(0))
	assert.Equal(t, time.Nanosecond, seconds(1e-10), "rounded up")
	assert.Equal(t, 1500*time.Millisecond, seconds(1.5))
	assert.Equal(t, time.Duration(math.MaxInt64), seconds(1e300), "saturates")
}

// TestNewBucketEdges: a rate that is not a positive finite number is no
// limit; a Size of 0 or less is a second's worth, at least 1.
func TestNewBucketEdges(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		assert.False(t, newBucket(Limit{Rate: rate, Size: 10}, now).on, "rate %v", rate)
	}
	assert.Equal(t, 1.0, newBucket(Limit{Rate: 0.1}, now).size)
	assert.Equal(t, 3.0, newBucket(Limit{Rate: 2.5, Size: -4}, now).size)
	b := newBucket(Limit{Rate: 10, Size: 1}, now)
	b.level = 0
	b.refill(now.Add(-time.Hour))
	assert.Equal(t, 0.0, b.level, "an earlier now adds nothing")
	b.refill(now.Add(time.Hour))
	assert.Equal(t, 1.0, b.level, "never more than the size")
}
