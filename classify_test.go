package retryhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"
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
			var header []string
			if tt.shouldRetry != "" {
				header = []string{"X-Should-Retry", tt.shouldRetry}
			}
			if got := Classify(req, respond(tt.status, "", header...), nil); got != tt.want {
				t.Errorf("Classify(status %d, X-Should-Retry %q) = %v, want %v", tt.status, tt.shouldRetry, got, tt.want)
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
			if got := Classify(req, nil, tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, tt.ctx, "GET", tt.url, nil)
			if got := Classify(req, tt.resp, tt.err); got != tt.want {
				t.Errorf("Classify = %v, want %v", got, tt.want)
			}
		})
	}
	if got := Classify(&http.Request{}, nil, boom); got != Permanent {
		t.Errorf("Classify(request with nil URL) = %v, want Permanent", got)
	}
	if got := Classify(nil, nil, boom); got != Permanent {
		t.Errorf("Classify(nil request) = %v, want Permanent", got)
	}
}

func TestStrings(t *testing.T) {
	tests := []struct{ got, want string }{
		{Done.String(), "done"}, {Retrying.String(), "retrying"}, {Exhausted.String(), "exhausted"},
		{OutOfTime.String(), "out_of_time"}, {NotReplayable.String(), "not_replayable"},
		{NoQuota.String(), "no_quota"}, {Canceled.String(), "canceled"}, {Outcome(42).String(), "outcome(42)"},
		{FromBackoff.String(), "backoff"}, {FromRetryAfter.String(), "retry-after"}, {WaitSource(7).String(), "wait_source(7)"},
		{Permanent.String(), "permanent"}, {Transient.String(), "transient"}, {Throttled.String(), "throttled"}, {Class(9).String(), "class(9)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
