package signal

import (
	"net/http"
	"strings"
	"time"
)

// RetryAfter is retryhttp.ParseRetryAfter (R5, the server's ask in headers).
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v := trimSpaceTab(h.Get("Retry-After-Ms")); v != "" {
		if d, ok := parseDecimal(v, time.Millisecond); ok {
			return d, true
		}
	}
	v := trimSpaceTab(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if d, ok := parseDecimal(v, time.Second); ok {
		return d, true
	}
	if c := v[0] | 0x20; c < 'a' || c > 'z' {
		return 0, false // every HTTP-date starts with a day name; spare ParseTime's errors
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 { // Sub saturates; it never wraps
		return d, true
	}
	return 0, true
}

// trimSpaceTab trims the optional whitespace of RFC 9110 (SP and HTAB) and
// nothing else.
func trimSpaceTab(s string) string {
	return strings.Trim(s, " \t")
}

// parseDecimal reads digits with an optional fraction ("12", "1.5") as a count
// of unit, saturating at the largest Duration. Signs, exponents, blanks inside
// and empty parts are rejected: "in doubt, do not trust the header".
func parseDecimal(s string, unit time.Duration) (time.Duration, bool) {
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || !allDigits(intPart) || hasDot && (frac == "" || !allDigits(frac)) {
		return 0, false
	}
	var whole time.Duration
	for i := 0; i < len(intPart); i++ {
		digit := time.Duration(intPart[i] - '0')
		if whole > (maxDuration-digit)/10 {
			return maxDuration, true
		}
		whole = whole*10 + digit
	}
	if whole > maxDuration/unit {
		return maxDuration, true
	}
	d := whole * unit
	// The fraction, exactly: Horner's rule from its last digit, each step
	// (digit×unit + carry)/10 in whole nanoseconds. Flooring at every step
	// floors the whole sum, so the result is the value rounded down to the
	// nanosecond for any unit (an hour's tenths are 360e9 ns, but its
	// 12th digit is worth 3.6 ns, not 3). The carry stays below unit.
	var carry time.Duration
	for i := len(frac) - 1; i >= 0; i-- {
		carry = (time.Duration(frac[i]-'0')*unit + carry) / 10
	}
	if d > maxDuration-carry {
		return maxDuration, true
	}
	d += carry
	return d, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
