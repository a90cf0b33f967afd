package retryhttp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
)

// Class is what a Classifier makes of one try.
type Class uint8

// The classes of a try.
const (
	// Permanent is a success, or a failure that repeating will not fix:
	// it is returned as it is.
	Permanent Class = iota
	// Transient may clear by itself: the request is sent again after the
	// backoff.
	Transient
	// Throttled is a server shedding load (429): the request is sent again
	// no earlier than the server asks.
	Throttled
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

// Classify is the default Classifier.
//
// Permanent: every response below 400 (a success is never retried); the
// caller's own context has ended; a TLS certificate or hostname error,
// however wrapped; a TLS alert from the server about the client's
// certificate (certificate required, bad, unsupported, revoked, expired,
// unknown, unknown CA, access denied); a TLS record header error (an
// https:// URL answered in plain HTTP: returned unchanged, so http.Client
// still reports http.ErrSchemeMismatch); a URL with no host or a scheme
// other than http and https; a DNS name that does not exist; a request
// net/http refuses before sending a byte (an invalid method, header name or
// value, a body whose length does not match ContentLength); every status not
// listed below.
//
// Transient: any other transport error (reset, refused, EOF, timeout, a
// per-try timeout); 408; every 5xx except 501 and 505.
//
// Throttled: 429.
//
// On a status >= 400 the header X-Should-Retry, as the OpenAI and Anthropic
// APIs send it, overrides the table: "true" makes the try Transient
// (Throttled for 429) and "false" makes it Permanent. Its name and value
// match in any case, even in a Header map built by hand.
func Classify(req *http.Request, resp *http.Response, err error) Class {
	if err == nil && resp != nil && resp.StatusCode < 400 {
		return Permanent // a success needs nothing else looked at (R16)
	}
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
		recordErr  tls.RecordHeaderError
		alertErr   tls.AlertError
		hostErr    x509.HostnameError
		authErr    x509.UnknownAuthorityError
		invalidErr x509.CertificateInvalidError
		dnsErr     *net.DNSError
		opErr      *net.OpError
		hostErrPtr *x509.HostnameError
		authErrPtr *x509.UnknownAuthorityError
		invalidPtr *x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &hostErr), errors.As(err, &authErr),
		errors.As(err, &invalidErr), errors.As(err, &hostErrPtr), errors.As(err, &authErrPtr),
		errors.As(err, &invalidPtr):
		return Permanent // the same certificate will fail the same way
	case errors.As(err, &recordErr):
		return Permanent // the server speaks another protocol (plain HTTP to https://)
	case errors.As(err, &alertErr) && clientCertAlert(uint8(alertErr)):
		return Permanent
	case errors.As(err, &opErr) && opErr.Op == "remote error" && opErr.Err != nil && clientCertAlertText(opErr.Err.Error()):
		// crypto/tls reports an alert from the server as a *net.OpError
		// around an unexported type: only its text says which alert.
		return Permanent
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return Permanent
	case malformedRequest(err.Error()):
		return Permanent
	}
	return Transient
}

// clientCertAlert reports whether a TLS alert code is about the client's
// certificate: bad (42), unsupported (43), revoked (44), expired (45),
// unknown (46), unknown CA (48), access denied (49), certificate required
// (116). Sending the same certificate again gets the same alert.
func clientCertAlert(code uint8) bool {
	switch code {
	case 42, 43, 44, 45, 46, 48, 49, 116:
		return true
	}
	return false
}

// clientCertAlertTexts are crypto/tls's texts of the alerts clientCertAlert
// lists, pinned by TestClassifyPinsTexts against the crypto/tls in use.
var clientCertAlertTexts = []string{
	"tls: bad certificate",
	"tls: unsupported certificate",
	"tls: revoked certificate",
	"tls: expired certificate",
	"tls: unknown certificate",
	"tls: unknown certificate authority",
	"tls: access denied",
	"tls: certificate required",
}

func clientCertAlertText(s string) bool {
	return slices.Contains(clientCertAlertTexts, s)
}

// malformedRequestTexts are what net/http says, with no error type, of a
// request it refuses before sending a byte; repeating it cannot help. Each
// is pinned by TestClassifyPinsTexts against the net/http in use, so that a
// Go release that changes one fails loudly.
var malformedRequestTexts = []string{
	"net/http: invalid header ",    // an invalid header name or value, HTTP/1 and HTTP/2
	"net/http: invalid trailer ",   // the same in a trailer
	"net/http: invalid method ",    // an invalid method
	"unsupported protocol scheme ", // neither http nor https
	"http: ContentLength=",         // "... with Body length n": the body is not as long as declared (HTTP/1)
	"http: Request.ContentLength=", // "... with nil Body"
	"http2: request body larger than specified content length",
}

func malformedRequest(s string) bool {
	for _, m := range malformedRequestTexts {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
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
	if v, ok := shouldRetry(resp.Header); ok {
		switch v := strings.TrimSpace(v); {
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

// shouldRetry returns the X-Should-Retry header, in any spelling: a Header
// map built by hand may hold "x-should-retry".
func shouldRetry(h http.Header) (string, bool) {
	if v := h["X-Should-Retry"]; len(v) > 0 {
		return v[0], true
	}
	for name, v := range h {
		if len(v) > 0 && strings.EqualFold(name, "X-Should-Retry") {
			return v[0], true
		}
	}
	return "", false
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
