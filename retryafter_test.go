package retryhttp

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// Every form of Retry-After R5 names, over a real connection: each 429 is
// waited out exactly as long as the server asked.
func TestRetryAfterForms(t *testing.T) {
	const ask = 7 * time.Second
	at := func(layout string) func(now time.Time) http.Header {
		return func(now time.Time) http.Header {
			v := now.Add(ask).UTC().Format(layout)
			return http.Header{"Retry-After": {strings.Replace(v, "UTC", "GMT", 1)}}
		}
	}
	fixed := func(kv ...string) func(time.Time) http.Header {
		return func(time.Time) http.Header {
			return headerOf(kv...)
		}
	}
	for _, tc := range []struct {
		name     string
		header   func(now time.Time) http.Header
		wantWait time.Duration
		wantFrom WaitSource
	}{
		{"delay-seconds", fixed("Retry-After", "7"), ask, FromRetryAfter},
		{"decimal seconds", fixed("Retry-After", "1.5"), 1500 * time.Millisecond, FromRetryAfter},
		{"IMF-fixdate", at(http.TimeFormat), ask, FromRetryAfter},
		{"RFC 850 date", at(time.RFC850), ask, FromRetryAfter},
		{"asctime date", at(time.ANSIC), ask, FromRetryAfter},
		{"retry-after-ms", fixed("Retry-After-Ms", "1500"), 1500 * time.Millisecond, FromRetryAfter},
		{"retry-after-ms wins", fixed("Retry-After-Ms", "250", "Retry-After", "30"), 250 * time.Millisecond, FromRetryAfter},
		{"invalid retry-after-ms falls back", fixed("Retry-After-Ms", "soon", "Retry-After", "3"), 3 * time.Second, FromRetryAfter},
		{"date in the past: the backoff", func(now time.Time) http.Header {
			return http.Header{"Retry-After": {now.Add(-time.Hour).UTC().Format(http.TimeFormat)}}
		}, 10 * time.Millisecond, FromBackoff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttNoLeak(t)
			clk := retryhttptest.NewClock() // today: an RFC 850 date's two-digit year names no other century
			var n atomic.Int32
			srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) <= 2 {
					for k, v := range tc.header(clk.Now()) {
						w.Header()[k] = v
					}
					w.WriteHeader(http.StatusTooManyRequests)
					io.WriteString(w, "slow down")
					return
				}
				io.WriteString(w, "ok")
			})
			var seen ttAttempts
			// The backoff stays below every ask: 10 ms, then 10 ms again.
			tr := New(faultBase(t), WithClock(clk), WithBackoff(Backoff{Base: 10 * time.Millisecond}), WithObserver(seen.observe))
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
			require.NoError(t, err, "the 200")
			resp.Body.Close()
			assertWaits(t, []time.Duration{tc.wantWait, tc.wantWait}, clk.Waits())
			attempts := seen.list()
			require.Len(t, attempts, 3)
			for _, a := range attempts[:2] {
				assert.Equal(t, Throttled, a.Class, "try %d", a.Try)
				assert.Equal(t, tc.wantFrom, a.From, "try %d", a.Try)
				assert.Equal(t, tc.wantWait, a.Wait, "try %d", a.Try)
			}
		})
	}
}

// Fuzz tests of the two parsers of what a server says (R2, R5). `go test`
// runs the seeds below and every input kept under testdata/fuzz/<Name>/;
// `go test -run '^$' -fuzz FuzzParseRetryAfter -fuzztime 60s` searches for more.

// FuzzParseRetryAfter: whatever the bytes of retry-after-ms and Retry-After
// and whatever the clock, ParseRetryAfter never panics, never returns a
// negative wait, returns 0 when ok is false, and reads a number exactly: never
// shorter than the server asked, saturating at the largest Duration.
func FuzzParseRetryAfter(f *testing.F) {
	date := func(d time.Duration, layout string) string {
		return strings.Replace(epoch.Add(d).UTC().Format(layout), "UTC", "GMT", 1)
	}
	for _, seed := range []struct {
		ms, ra string
		offset int64
	}{
		// Retry-After as delay-seconds, with or without a fraction.
		{"", "0", 0}, {"", "7", 0}, {"", "120", 0}, {"", "1.5", 0}, {"", "0.001", 0},
		{"", "1.0000000001", 0}, {"", " 7\t", 0}, {"", "\t\t1.25  ", 0},
		// Saturation at the largest Duration (9223372036.854775807 s).
		{"", "9223372036", 0}, {"", "9223372036.854775807", 0}, {"", "9223372036.854775808", 0},
		{"", "9223372037", 0}, {"", "99999999999999999999999999999999", 0},
		// Retry-After as an HTTP-date, all three forms, future and past.
		{"", date(7*time.Second, http.TimeFormat), 0},
		{"", date(7*time.Second, time.RFC850), 0},
		{"", date(7*time.Second, time.ANSIC), 0},
		{"", date(-time.Hour, http.TimeFormat), 0},
		{"", "Sun, 06 Nov 1994 08:49:37 GMT", 0},
		{"", "Sunday, 06-Nov-94 08:49:37 GMT", 0},
		{"", "Sun Nov  6 08:49:37 1994", 0},
		{"", "Fri, 31 Dec 9999 23:59:59 GMT", math.MinInt64},
		{"", date(time.Second, http.TimeFormat), math.MaxInt64},
		// retry-after-ms: wins when valid, falls back when not.
		{"1500", "", 0}, {"1.5", "", 0}, {"250", "30", 0}, {" 250 ", "30", 0},
		{"soon", "3", 0}, {"-1", "3", 0}, {"", "3", 0},
		{"9223372036854.775807", "", 0}, {"9223372036854.775808", "", 0}, {"18446744073709551616", "", 0},
		// Not a wait: ok is false.
		{"", "", 0}, {"", " ", 0}, {"", "-1", 0}, {"", "+5", 0}, {"", "1e3", 0}, {"", "0x10", 0},
		{"", "1.", 0}, {"", ".5", 0}, {"", "1.2.3", 0}, {"", "5 s", 0}, {"", "١٢", 0}, {"", "NaN", 0},
		{"", "Inf", 0}, {"", "1\x00", 0}, {"", "\xff", 0}, {"", "tomorrow", 0},
	} {
		f.Add(seed.ms, seed.ra, seed.offset)
	}
	f.Fuzz(func(t *testing.T, ms, ra string, offset int64) {
		h := http.Header{}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		if ra != "" {
			h.Set("Retry-After", ra)
		}
		now := epoch.Add(time.Duration(offset))
		got, ok := ParseRetryAfter(h, now)
		what := fmt.Sprintf("ParseRetryAfter(ms %q, ra %q) at %v", ms, ra, now)
		require.GreaterOrEqual(t, got, time.Duration(0), "%s: never negative", what)
		if !ok {
			require.Zero(t, got, "%s: 0 when not ok", what)
		}

		if len(ms) > fzGiant || len(ra) > fzGiant {
			return // the oracle reads no giants (fzDecimal): only the invariants above apply
		}
		// The oracle: exact arithmetic on big integers.
		if lo, hi, isNum := fzDecimal(fzTrim(ms), int64(time.Millisecond)); isNum {
			fzCheckNumber(t, "retry-after-ms "+fmt.Sprintf("%q", ms), got, ok, lo, hi)
			return
		}
		v := fzTrim(ra)
		if lo, hi, isNum := fzDecimal(v, int64(time.Second)); isNum {
			fzCheckNumber(t, "Retry-After "+fmt.Sprintf("%q", ra), got, ok, lo, hi)
			return
		}
		if v == "" {
			require.False(t, ok, "%s: not ok, neither header holds a wait", what)
			return
		}
		when, err := http.ParseTime(v)
		if err != nil {
			require.False(t, ok, "%s: not ok, for a value that is neither a number nor an HTTP-date", what)
			return
		}
		require.True(t, ok, "%s: ok, for an HTTP-date", what)
		require.Equal(t, max(when.Sub(now), 0), got, "%s: the date less now, 0 if past", what)
	})
}

// fzTrim drops the spaces and tabs RFC 9110 allows around a value.
func fzTrim(s string) string { return strings.Trim(s, " \t") }

// fzGiant is the longest value the oracles read: big.Int's SetString is
// slow on the fuzzer's megabyte values, and the callers check only the
// invariants on longer ones. A caller must not read "not a number" into
// fzDecimal's false for a giant.
const fzGiant = 4096

// fzDecimal reads s as digits with an optional fraction ("12", "1.5") in
// units of unit nanoseconds, exactly: lo and hi are the floor and the
// ceiling of the value in nanoseconds, each saturated at the largest
// Duration. isNum is false for anything else.
func fzDecimal(s string, unit int64) (lo, hi time.Duration, isNum bool) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if !fzDigits(whole) || hasDot && !fzDigits(frac) {
		return 0, 0, false
	}
	if len(s) > fzGiant {
		return 0, 0, false // the fuzzer's giants: only the invariants apply
	}
	num, _ := new(big.Int).SetString(whole+frac, 10)
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	num.Mul(num, big.NewInt(unit))
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	ceil := new(big.Int).Set(q)
	if r.Sign() != 0 {
		ceil.Add(ceil, big.NewInt(1))
	}
	sat := func(x *big.Int) time.Duration {
		if !x.IsInt64() {
			return maxDuration
		}
		return time.Duration(x.Int64())
	}
	return sat(q), sat(ceil), true
}

func fzDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func fzCheckNumber(t *testing.T, what string, got time.Duration, ok bool, lo, hi time.Duration) {
	t.Helper()
	require.True(t, ok, "%s: ok, for a number", what)
	require.GreaterOrEqual(t, got, lo, "%s (%d ns): never shorter than asked", what, int64(got))
	require.LessOrEqual(t, got, hi, "%s (%d ns): at most the value rounded up, saturating", what, int64(got))
}
