package retryhttp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"
)

// Class is what a Classifier makes of one try.
type Class uint8

const (
	Permanent Class = iota // success, or a failure that repeating will not fix: return it
	Transient              // may clear by itself: retry after the backoff
	Throttled              // the server sheds load (429): retry no earlier than it asks
)

// String returns "permanent", "transient" or "throttled".
func (c Class) String() string {
	switch c {
	case Permanent:
		return "permanent"
	case Transient:
		return "transient"
	case Throttled:
		return "throttled"
	}
	return "class(" + itoa(int(c)) + ")"
}

// A Classifier decides whether a try is worth repeating. It gets the caller's
// request (with the caller's context, never a try's) and the try's response
// or error: exactly one of resp and err is non-nil. It must not read or close
// resp.Body, and must be safe for concurrent use by multiple goroutines.
type Classifier func(req *http.Request, resp *http.Response, err error) Class

// Classify is the default Classifier (R2).
//
// Permanent: the caller's own context has ended; a TLS certificate or
// hostname error, however wrapped; a URL with no host or a scheme other than
// http and https; a DNS name that does not exist; every status not listed
// below (so every success).
//
// Transient: any other transport error (reset, refused, EOF, timeout, a
// per-try timeout); 408; every 5xx except 501 and 505.
//
// Throttled: 429.
//
// On a status >= 400 the header X-Should-Retry, as the OpenAI and Anthropic
// APIs send it, overrides the table: "true" makes the try Transient
// (Throttled for 429) and "false" makes it Permanent. Below 400 it is
// ignored: a success is never retried.
func Classify(req *http.Request, resp *http.Response, err error) Class {
	if req != nil && req.Context().Err() != nil {
		return Permanent // the caller canceled or timed out: never retry that
	}
	if req == nil || !retryableURL(req) {
		return Permanent
	}
	if err != nil {
		return classifyError(err)
	}
	if resp == nil {
		return Permanent // conservatively
	}
	return classifyStatus(resp)
}

func retryableURL(req *http.Request) bool {
	u := req.URL
	if u == nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Scheme, "https") || strings.EqualFold(u.Scheme, "http")
}

func classifyError(err error) Class {
	var (
		certErr    *tls.CertificateVerificationError
		hostErr    x509.HostnameError
		authErr    x509.UnknownAuthorityError
		invalidErr x509.CertificateInvalidError
		dnsErr     *net.DNSError
		hostErrPtr *x509.HostnameError
		authErrPtr *x509.UnknownAuthorityError
		invalidPtr *x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &hostErr), errors.As(err, &authErr),
		errors.As(err, &invalidErr), errors.As(err, &hostErrPtr), errors.As(err, &authErrPtr),
		errors.As(err, &invalidPtr):
		return Permanent // the same certificate will fail the same way
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return Permanent
	}
	return Transient
}

func classifyStatus(resp *http.Response) Class {
	code := resp.StatusCode
	if code < 400 {
		return Permanent
	}
	class := Permanent
	switch {
	case code == http.StatusTooManyRequests:
		class = Throttled
	case code == http.StatusRequestTimeout,
		code >= 500 && code <= 599 && code != http.StatusNotImplemented && code != http.StatusHTTPVersionNotSupported:
		class = Transient
	}
	if v, ok := resp.Header["X-Should-Retry"]; ok && len(v) > 0 {
		switch v := strings.TrimSpace(v[0]); {
		case strings.EqualFold(v, "true"):
			if code == http.StatusTooManyRequests {
				return Throttled
			}
			return Transient
		case strings.EqualFold(v, "false"):
			return Permanent
		}
	}
	return class
}

// itoa formats small non-negative numbers for String methods without fmt.
func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
