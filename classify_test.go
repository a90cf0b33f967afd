package retryhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		status      int
		shouldRetry string // X-Should-Retry; "" for none
		want        Class
	}{
		{200, "", Permanent},
		{201, "", Permanent},
		{204, "", Permanent},
		{301, "", Permanent},
		{304, "", Permanent},
		{200, "true", Permanent}, // a success is never retried
		{399, "true", Permanent},
		{400, "", Permanent},
		{401, "", Permanent},
		{403, "", Permanent},
		{404, "", Permanent},
		{408, "", Transient},
		{409, "", Permanent},
		{422, "", Permanent},
		{429, "", Throttled},
		{500, "", Transient},
		{501, "", Permanent},
		{502, "", Transient},
		{503, "", Transient},
		{504, "", Transient},
		{505, "", Permanent},
		{507, "", Transient},
		{529, "", Transient}, // Anthropic's "overloaded"
		{599, "", Transient},
		{600, "", Permanent},
		{409, "true", Transient}, // Anthropic asks for retries of lock timeouts
		{400, "TRUE", Transient},
		{429, "true", Throttled},
		{429, "false", Permanent},
		{503, "false", Permanent},
		{503, " false ", Permanent},
		{503, "maybe", Transient},
		{400, "maybe", Permanent},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%q", tt.status, tt.shouldRetry), func(t *testing.T) {
			req := newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil)
			// The header as Header.Set writes it, and as a hand-built map
			// may hold it (R2: the name matches in any spelling).
			for _, name := range []string{"X-Should-Retry", "x-should-retry", "X-SHOULD-RETRY"} {
				resp := respond(tt.status, "")
				if tt.shouldRetry != "" {
					resp.Header[name] = []string{tt.shouldRetry}
				}
				assert.Equal(t, tt.want, Classify(req, resp, nil), "status %d, %s: %q", tt.status, name, tt.shouldRetry)
			}
		})
	}
}

func TestClassifyError(t *testing.T) {
	wrap := func(err error) error {
		return &url.Error{Op: "Post", URL: "https://api.example.com", Err: fmt.Errorf("dial: %w", err)}
	}
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, Transient},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, Transient},
		{"unexpected EOF", io.ErrUnexpectedEOF, Transient},
		{"EOF", io.EOF, Transient},
		{"try timeout", &tryTimeoutError{d: 1}, Transient},
		{"any other error", errors.New("boom"), Transient},
		{"context deadline from elsewhere", context.DeadlineExceeded, Transient}, // not the caller's own context
		{"DNS name not found", &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}, Permanent},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", Name: "api.example.com", IsTimeout: true}, Transient},
		{"wrapped DNS not found", wrap(&net.DNSError{IsNotFound: true}), Permanent},
		{"certificate verification", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, Permanent},
		{"wrapped certificate verification", wrap(&tls.CertificateVerificationError{Err: errors.New("bad")}), Permanent},
		{"hostname mismatch", x509.HostnameError{Host: "evil.example"}, Permanent},
		{"hostname mismatch pointer, wrapped", wrap(&x509.HostnameError{Host: "evil.example"}), Permanent},
		{"unknown authority", wrap(x509.UnknownAuthorityError{}), Permanent},
		{"invalid certificate", wrap(x509.CertificateInvalidError{Reason: x509.Expired}), Permanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil)
			assert.Equal(t, tt.want, Classify(req, nil, tt.err), "Classify(%v)", tt.err)
		})
	}
}

func TestClassifyRequest(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	boom := errors.New("boom")
	tests := []struct {
		name string
		ctx  context.Context
		url  string
		resp *http.Response
		err  error
		want Class
	}{
		{"caller canceled, error", canceled, "https://api.example.com", nil, context.Canceled, Permanent},
		{"caller canceled, 503", canceled, "https://api.example.com", respond(503, ""), nil, Permanent},
		{"no host", context.Background(), "https:///v1", nil, boom, Permanent},
		{"ftp scheme", context.Background(), "ftp://files.example.com/x", nil, boom, Permanent},
		{"file scheme, 503", context.Background(), "file://host/x", respond(503, ""), nil, Permanent},
		{"upper-case scheme", context.Background(), "HTTPS://api.example.com", nil, boom, Transient},
		{"http", context.Background(), "http://127.0.0.1:8080/v1", respond(502, ""), nil, Transient},
		// Neither, or both (a Classifier may be handed what a base returned).
		{"no response and no error", context.Background(), "https://api.example.com", nil, nil, Permanent},
		{"a 200 and an error: the error decides", context.Background(), "https://api.example.com", respond(200, ""), boom, Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Classify(newRequest(t, tt.ctx, "GET", tt.url, nil), tt.resp, tt.err))
		})
	}
	assert.Equal(t, Permanent, Classify(&http.Request{}, nil, boom), "a request with a nil URL")
	assert.Equal(t, Permanent, Classify(nil, nil, boom), "a nil request")
}

func TestStrings(t *testing.T) {
	tests := []struct{ got, want string }{
		{Done.String(), "done"}, {Retrying.String(), "retrying"}, {Exhausted.String(), "exhausted"},
		{OutOfTime.String(), "out_of_time"}, {NotReplayable.String(), "not_replayable"},
		{NoQuota.String(), "no_quota"}, {Canceled.String(), "canceled"}, {Unavailable.String(), "unavailable"}, {(Unavailable + 1).String(), "outcome(8)"}, {Outcome(42).String(), "outcome(42)"},
		{FromBackoff.String(), "backoff"}, {FromRetryAfter.String(), "retry-after"}, {WaitSource(7).String(), "wait_source(7)"},
		{Permanent.String(), "permanent"}, {Transient.String(), "transient"}, {Throttled.String(), "throttled"}, {Class(9).String(), "class(9)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.got)
	}
}

// TestClassifyPinsTexts provokes, through the net/http and crypto/tls in use
// and a server on 127.0.0.1, every failure R2 makes Permanent that Go gives
// no type to, and checks both that Classify says Permanent and that the text
// it matches is still the text Go writes: a Go release that changes one fails
// here, loudly, instead of silently retrying requests that cannot succeed.
// Through the transport each is sent once and returned unchanged.
func TestClassifyPinsTexts(t *testing.T) {
	ttNoLeak(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	plain := httptest.NewServer(h)
	defer plain.Close()
	h2 := httptest.NewUnstartedServer(h)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	mtls := httptest.NewUnstartedServer(h)
	mtls.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert}
	mtls.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake error it logs is the point
	mtls.StartTLS()
	defer mtls.Close()

	newReq := func(method, url, body string, length int64, edit func(*http.Request)) *http.Request {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequest(http.MethodPost, url, r)
		require.NoError(t, err)
		req.Method = method
		if length >= 0 {
			req.ContentLength = length
		}
		if edit != nil {
			edit(req)
		}
		return req
	}
	h1Client, h2Client := plain.Client(), h2.Client()
	mtlsClient := mtls.Client()
	mtlsClient.Transport.(*http.Transport).TLSClientConfig.MaxVersion = tls.VersionTLS13
	defer h1Client.CloseIdleConnections()
	defer h2Client.CloseIdleConnections()
	defer mtlsClient.CloseIdleConnections()

	for _, tc := range []struct {
		name   string
		client *http.Client
		req    func() *http.Request
		text   string // what Go writes, in part: pinned
	}{
		{"invalid header value, HTTP/1", h1Client, func() *http.Request {
			return newReq("GET", plain.URL, "", -1, func(r *http.Request) { r.Header["X-A"] = []string{"a\nb"} })
		}, `net/http: invalid header field value for "X-A"`},
		{"invalid header name, HTTP/1", h1Client, func() *http.Request {
			return newReq("GET", plain.URL, "", -1, func(r *http.Request) { r.Header["X A"] = []string{"b"} })
		}, `net/http: invalid header field name "X A"`},
		{"invalid header value, HTTP/2", h2Client, func() *http.Request {
			return newReq("GET", h2.URL, "", -1, func(r *http.Request) { r.Header["X-A"] = []string{"a\nb"} })
		}, `net/http: invalid header field value for "X-A"`},
		{"invalid trailer", h1Client, func() *http.Request {
			return newReq("POST", plain.URL, "abc", -1, func(r *http.Request) { r.Trailer = http.Header{"X A": {"b"}} })
		}, `net/http: invalid trailer field name "X A"`},
		{"invalid method", h1Client, func() *http.Request { return newReq("GE T", plain.URL, "", -1, nil) },
			`net/http: invalid method "GE T"`},
		{"body shorter than ContentLength, HTTP/1", h1Client, func() *http.Request { return newReq("POST", plain.URL, "abc", 10, nil) },
			"http: ContentLength=10 with Body length 3"},
		{"body longer than ContentLength, HTTP/1", h1Client, func() *http.Request { return newReq("POST", plain.URL, "abcdefghijkl", 3, nil) },
			"http: ContentLength=3 with Body length 12"},
		{"ContentLength with nil Body", h1Client, func() *http.Request { return newReq("POST", plain.URL, "", 5, nil) },
			"http: Request.ContentLength=5 with nil Body"},
		{"body longer than ContentLength, HTTP/2", h2Client, func() *http.Request { return newReq("POST", h2.URL, "abcdefghijkl", 3, nil) },
			"http2: request body larger than specified content length"},
		{"the server wants a client certificate (TLS 1.3 alert)", mtlsClient, func() *http.Request { return newReq("GET", mtls.URL, "", -1, nil) },
			"remote error: tls: certificate required"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkPinned(t, tc.client.Transport, tc.req, tc.text) })
	}
}

// checkPinned sends newReq's request over base, first alone and then through
// the transport: net/http refuses it with text, Classify says Permanent, and
// the transport sends it once and returns the error unchanged.
func checkPinned(t *testing.T, base http.RoundTripper, newReq func() *http.Request, text string) {
	t.Helper()
	// net/http, alone: the error and its text. Now and then (under
	// -race mostly) net/http reports a request it refused as a read
	// on the connection it closed for it (net.ErrClosed): a Transient
	// error, not the one pinned here; provoke it again then.
	var err error
	for range 5 {
		var resp *http.Response
		if resp, err = base.RoundTrip(newReq()); resp != nil {
			resp.Body.Close()
		}
		if !errors.Is(err, net.ErrClosed) {
			break
		}
	}
	require.Error(t, err, "net/http no longer refuses this request")
	assert.Contains(t, err.Error(), text, "net/http's text changed: update classify.go")
	assert.Equal(t, Permanent, Classify(newReq(), nil, err))

	// Through the transport: one try, the error unchanged. (Compared
	// with the error of the same try: net/http's text for the TLS
	// alert varies from one connection to the next.)
	var (
		tries []error
		got   error
	)
	counted := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		tries = append(tries, err)
		return resp, err
	})
	for range 5 {
		tries = nil
		var resp *http.Response
		if resp, got = New(counted, WithBackoff(Backoff{})).RoundTrip(newReq()); resp != nil {
			resp.Body.Close()
		}
		if len(tries) == 0 || !errors.Is(tries[0], net.ErrClosed) {
			break // as above: a closed connection on the first try is net/http's race
		}
	}
	require.Len(t, tries, 1, "tries")
	assert.Equal(t, tries[0], got, "the first try's Permanent error comes back unchanged")
}

// TestSchemeMismatch: an https:// URL answered in plain HTTP is Permanent
// and its tls.RecordHeaderError comes back unchanged, so http.Client still
// tells the user what happened (R2).
func TestSchemeMismatch(t *testing.T) {
	ttNoLeak(t)
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	var tries atomic.Int32
	counted := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		tries.Add(1)
		return base.RoundTrip(r)
	})
	client := &http.Client{Transport: New(counted, WithBackoff(Backoff{}))}
	_, err := client.Get(strings.Replace(srv.URL, "http://", "https://", 1))
	require.Error(t, err)
	assert.ErrorIs(t, err, http.ErrSchemeMismatch)
	assert.EqualValues(t, 1, tries.Load(), "tries")
}

// TestClassifyTLSAlerts: a TLS alert about the client's certificate is
// Permanent, typed (tls.AlertError) or as crypto/tls reports one from the
// server (a *net.OpError "remote error" around it); other alerts are not.
func TestClassifyTLSAlerts(t *testing.T) {
	req := httptest.NewRequest("GET", "https://api.example.com", nil)
	for _, tc := range []struct {
		err  error
		want Class
	}{
		{tls.AlertError(116), Permanent}, // certificate required
		{tls.AlertError(42), Permanent},  // bad certificate
		{tls.AlertError(48), Permanent},  // unknown CA
		{fmt.Errorf("handshake: %w", tls.AlertError(45)), Permanent},
		{tls.AlertError(40), Transient}, // handshake failure: not about the certificate
		{tls.AlertError(80), Transient}, // internal error
		{&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, Permanent},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: access denied")}, Permanent},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: internal error")}, Transient},
		{&net.OpError{Op: "read", Err: errors.New("tls: certificate required")}, Transient}, // not an alert
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, Permanent},
	} {
		assert.Equal(t, tc.want, Classify(req, nil, tc.err), "%v", tc.err)
	}
}

// TestClassifyShouldRetryNoValue: in a Header map built by hand, a spelling
// of X-Should-Retry with no value is no header at all (R2): the status
// decides, or another spelling that has a value.
func TestClassifyShouldRetryNoValue(t *testing.T) {
	req := newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil)
	for _, tc := range []struct {
		status int
		header http.Header
		want   Class
	}{
		{503, http.Header{"x-should-retry": {}}, Transient},
		{429, http.Header{"X-SHOULD-RETRY": {}}, Throttled},
		{400, http.Header{"x-should-retry": {}}, Permanent},
		{503, http.Header{"x-should-retry": {}, "X-Should-retry": {"false"}}, Permanent},
		{400, http.Header{"X-Should-Retry": {}, "x-should-retry": {"true"}}, Transient},
	} {
		resp := respond(tc.status, "")
		resp.Header = tc.header
		assert.Equal(t, tc.want, Classify(req, resp, nil), "status %d, %v", tc.status, tc.header)
	}
}

// TestClassifierDecidesEveryTry: a Classifier of the caller's own decides
// every try, a first-try success too (R2): one that makes a 200 Transient
// has it retried.
func TestClassifierDecidesEveryTry(t *testing.T) {
	var calls int
	_, script, tr := scripted(replies{reply(200, "X-Busy", "1"), reply(200)}, WithClassifier(
		func(req *http.Request, resp *http.Response, err error) Class {
			calls++
			if resp != nil && resp.Header.Get("X-Busy") != "" {
				return Transient
			}
			return Classify(req, resp, err)
		}))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 2, calls, "Classifier calls")
	assert.Equal(t, 2, script.Len(), "tries")
	assert.Empty(t, resp.Header.Get("X-Busy"), "the second 200")
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
