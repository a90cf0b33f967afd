package retryhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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

// fzErrors are the transport errors FuzzClassify picks from, with the class
// R2 gives each when the caller's context is live.
var fzErrors = []struct {
	err  error
	want Class
}{
	{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, Transient},
	{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, Transient},
	{io.EOF, Transient},
	{io.ErrUnexpectedEOF, Transient},
	{&tryTimeoutError{d: time.Second}, Transient},
	{fmt.Errorf("try: %w", context.DeadlineExceeded), Transient}, // a try's own deadline, not the caller's
	{&url.Error{Op: "Get", URL: "https://api.example.com", Err: &net.DNSError{Err: "no such host", Name: "api.example.com", IsNotFound: true}}, Permanent},
	{&net.DNSError{Err: "server misbehaving", Name: "api.example.com", IsTemporary: true}, Transient},
	{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, Permanent},
	{fmt.Errorf("handshake: %w", x509.HostnameError{Host: "api.example.com", Certificate: &x509.Certificate{}}), Permanent},
	{&url.Error{Op: "Post", URL: "https://api.example.com", Err: x509.CertificateInvalidError{Reason: x509.Expired}}, Permanent},
	{errors.New("boom"), Transient},
	{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, Permanent}, // plain HTTP to https:// (R2)
}

// fzURLs are the request URLs FuzzClassify picks from, and whether R2 lets
// a request to each be retried at all.
var fzURLs = []struct {
	url       string
	retryable bool
}{
	{"https://api.example.com/v1/chat", true},
	{"http://127.0.0.1:8080/v1/chat", true},
	{"HTTPS://API.EXAMPLE.COM/v1", true},
	{"ftp://files.example.com/x", false},
	{"/v1/chat", false}, // no host
	{"file:///etc/hosts", false},
}

// FuzzClassify: whatever the status, X-Should-Retry value, error and URL,
// Classify never panics and returns one of the three classes; a status below
// 400 is never retried; 429 is Throttled unless X-Should-Retry is false; the
// caller's own ended context is never retried; and the rest of R2's table holds.
func FuzzClassify(f *testing.F) {
	for _, code := range []int{-1, 0, 100, 101, 200, 201, 204, 301, 304, 399, 400, 401, 403, 404, 408, 409, 422, 429, 499, 500, 501, 502, 503, 504, 505, 529, 599, 600, 999} {
		for _, xsr := range []struct {
			has bool
			v   string
		}{{false, ""}, {true, "true"}, {true, "false"}, {true, "TRUE"}, {true, " false "}, {true, "maybe"}, {true, ""}} {
			f.Add(code, xsr.has, xsr.v, uint8(0), uint8(0), false)
		}
	}
	for k := range fzErrors {
		f.Add(0, false, "", uint8(k+1), uint8(0), false)
		f.Add(0, false, "", uint8(k+1), uint8(0), true)
	}
	for u := range fzURLs {
		f.Add(503, false, "", uint8(0), uint8(u), false)
		f.Add(0, false, "", uint8(1), uint8(u), false)
		f.Add(429, true, "true", uint8(0), uint8(u), true)
	}
	f.Fuzz(func(t *testing.T, code int, hasXSR bool, xsr string, errKind, urlKind uint8, canceled bool) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if canceled {
			cancel()
		}
		u := fzURLs[int(urlKind)%len(fzURLs)]
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url, nil)
		require.NoError(t, err)
		var (
			resp    *http.Response
			tryErr  error
			errWant Class
		)
		if k := int(errKind) % (len(fzErrors) + 1); k == 0 {
			resp = &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody}
			if hasXSR {
				resp.Header["X-Should-Retry"] = []string{xsr}
			}
		} else {
			tryErr, errWant = fzErrors[k-1].err, fzErrors[k-1].want
		}

		got := Classify(req, resp, tryErr)
		what := fmt.Sprintf("Classify(url %q, canceled %v, status %d, X-Should-Retry %v %q, err %v)", u.url, canceled, code, hasXSR, xsr, tryErr)
		require.Contains(t, []Class{Permanent, Transient, Throttled}, got, "%s: one of the three classes", what)
		switch {
		case canceled || !u.retryable:
			require.Equal(t, Permanent, got, "%s: the caller's context ended or the URL is not retryable", what)
		case tryErr != nil:
			require.Equal(t, errWant, got, what)
		case code < 400:
			require.Equal(t, Permanent, got, "%s: a status below 400 is never retried", what)
		default:
			v := ""
			if hasXSR {
				v = strings.TrimSpace(xsr)
			}
			if code == http.StatusTooManyRequests && !strings.EqualFold(v, "false") {
				require.Equal(t, Throttled, got, what)
			}
			if want, known := fzStatusClass(code, hasXSR, xsr); known {
				require.Equal(t, want, got, what)
			}
		}
	})
}

// fzStatusClass is R2's table for a status >= 400. known is false for an
// X-Should-Retry value R2 does not name (anything but "true" and "false").
func fzStatusClass(code int, hasXSR bool, xsr string) (c Class, known bool) {
	if hasXSR {
		switch xsr {
		case "true":
			if code == http.StatusTooManyRequests {
				return Throttled, true
			}
			return Transient, true
		case "false":
			return Permanent, true
		}
		if t := strings.TrimSpace(xsr); strings.EqualFold(t, "true") || strings.EqualFold(t, "false") {
			return 0, false // a spelling R2 does not name: only the invariants apply
		}
	}
	switch {
	case code == http.StatusTooManyRequests:
		return Throttled, true
	case code == http.StatusRequestTimeout:
		return Transient, true
	case code >= 500 && code <= 599 && code != http.StatusNotImplemented && code != http.StatusHTTPVersionNotSupported:
		return Transient, true
	}
	return Permanent, true
}
