package retryhttp

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseRetryAfter(t *testing.T) {
	now := epoch
	future := now.Add(90 * time.Second)
	past := now.Add(-time.Hour)
	tests := []struct {
		name   string
		header []string // name, value pairs
		want   time.Duration
		wantOK bool
	}{
		{"absent", nil, 0, false},
		{"seconds", []string{"Retry-After", "2"}, 2 * time.Second, true},
		{"zero seconds", []string{"Retry-After", "0"}, 0, true},
		{"decimal seconds", []string{"Retry-After", "1.5"}, 1500 * time.Millisecond, true},
		{"nanosecond fraction", []string{"Retry-After", "0.000000001"}, 1, true},
		{"fraction below a nanosecond is dropped", []string{"Retry-After", "0.0000000009"}, 0, true},
		{"leading zeros", []string{"Retry-After", "007"}, 7 * time.Second, true},
		{"spaces and tabs around", []string{"Retry-After", " \t3\t "}, 3 * time.Second, true},
		{"IMF-fixdate", []string{"Retry-After", future.Format(http.TimeFormat)}, 90 * time.Second, true},
		{"RFC 850", []string{"Retry-After", future.Format(time.RFC850)}, 90 * time.Second, true},
		{"ANSI C asctime", []string{"Retry-After", future.Format(time.ANSIC)}, 90 * time.Second, true},
		{"date in the past is 0", []string{"Retry-After", past.Format(http.TimeFormat)}, 0, true},
		{"date now is 0", []string{"Retry-After", now.Format(http.TimeFormat)}, 0, true},
		{"retry-after-ms", []string{"Retry-After-Ms", "1500"}, 1500 * time.Millisecond, true},
		{"retry-after-ms fraction", []string{"Retry-After-Ms", "0.5"}, 500 * time.Microsecond, true},
		{"retry-after-ms wins", []string{"Retry-After-Ms", "250", "Retry-After", "30"}, 250 * time.Millisecond, true},
		{"retry-after-ms wins even when smaller than a date", []string{"Retry-After-Ms", "1", "Retry-After", future.Format(http.TimeFormat)}, time.Millisecond, true},
		{"invalid retry-after-ms falls back", []string{"Retry-After-Ms", "soon", "Retry-After", "4"}, 4 * time.Second, true},
		{"negative retry-after-ms falls back", []string{"Retry-After-Ms", "-100", "Retry-After", "4"}, 4 * time.Second, true},
		{"empty retry-after-ms falls back", []string{"Retry-After-Ms", "", "Retry-After", "4"}, 4 * time.Second, true},
		{"empty", []string{"Retry-After", ""}, 0, false},
		{"blank", []string{"Retry-After", " \t "}, 0, false},
		{"negative", []string{"Retry-After", "-1"}, 0, false},
		{"plus sign", []string{"Retry-After", "+1"}, 0, false},
		{"exponent", []string{"Retry-After", "1e3"}, 0, false},
		{"trailing dot", []string{"Retry-After", "1."}, 0, false},
		{"leading dot", []string{"Retry-After", ".5"}, 0, false},
		{"two dots", []string{"Retry-After", "1.2.3"}, 0, false},
		{"inner space", []string{"Retry-After", "1 2"}, 0, false},
		{"unit suffix", []string{"Retry-After", "5s"}, 0, false},
		{"hex", []string{"Retry-After", "0x10"}, 0, false},
		{"garbage", []string{"Retry-After", "tomorrow, maybe"}, 0, false},
		{"non-ASCII digits", []string{"Retry-After", "٣"}, 0, false},
		{"newline inside", []string{"Retry-After", "1\n2"}, 0, false},
		{"huge seconds saturate", []string{"Retry-After", "99999999999999999999999999"}, maxDuration, true},
		{"seconds just past the limit saturate", []string{"Retry-After", "9223372037"}, maxDuration, true},
		{"seconds just below the limit", []string{"Retry-After", "9223372036"}, 9223372036 * time.Second, true},
		{"huge fraction saturates", []string{"Retry-After", "9223372036.99999999999"}, maxDuration, true},
		{"huge milliseconds saturate", []string{"Retry-After-Ms", "99999999999999999999"}, maxDuration, true},
		{"far-future date saturates", []string{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"}, maxDuration, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(headerOf(tt.header...), now)
			assert.Equal(t, tt.want, got, "ParseRetryAfter(%q)", tt.header)
			assert.Equal(t, tt.wantOK, ok, "ParseRetryAfter(%q): ok", tt.header)
		})
	}
}

func TestParseRetryAfterNilHeader(t *testing.T) {
	got, ok := ParseRetryAfter(nil, epoch)
	assert.Zero(t, got)
	assert.False(t, ok)
}
