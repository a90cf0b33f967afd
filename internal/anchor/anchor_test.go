package anchor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestOnEveryInstant(t *testing.T) {
	today := time.Date(2026, 12, 4, 20, 0, 0, 123456789, time.UTC)
	cases := []struct {
		name  string
		start time.Time
		moved bool
	}{
		{"today", today, false},
		{"a synctest bubble", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"the Unix epoch (clock.NewMock)", time.Unix(0, 0).UTC(), true},
		{"a second after it", time.Unix(1, 0).UTC(), true},
		{"before it", time.Date(1900, 6, 1, 0, 0, 0, 0, time.UTC), true},
		{"the zero Time", time.Time{}, true},
		{"far ahead", time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"the year 9999", time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.start
			c := New(func() time.Time { return now })
			first := c.Now()
			assert.Equal(t, !tc.moved, first.Equal(tc.start), "moved only out of range: %v", first)
			assert.True(t, first.Unix() >= lo && first.Unix() < hi, "in range: %v", first)
			assert.Equal(t, tc.start.Nanosecond(), first.Nanosecond(), "by whole seconds")
			now = now.Add(90 * time.Minute)
			assert.Equal(t, 90*time.Minute, c.Now().Sub(first), "it keeps the clock's pace")
			assert.True(t, c.Off(c.Now()).Equal(now), "and Off is its inverse")
			assert.True(t, c.Off(time.Time{}).IsZero())
		})
	}
}

func TestOnStepped(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(func() time.Time { return now })
	assert.True(t, c.Now().Equal(now))
	now = time.Unix(0, 0) // a mock Set back to the epoch after the start
	got := c.Now()
	assert.Equal(t, at, got.Unix(), "re-anchored")
	now = now.Add(time.Second)
	assert.Equal(t, time.Second, c.Now().Sub(got))
	assert.True(t, c.Off(got).Equal(time.Unix(0, 0)))
}

func TestZeroClockReadsTimeNow(t *testing.T) {
	var c Clock
	assert.WithinDuration(t, time.Now(), c.Now(), time.Minute)
}
