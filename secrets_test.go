package retryhttp

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Secrets (R14): no log entry, no Attempt and no error text the library
// writes holds a query string, userinfo, a header value or a body, even when
// the base's own error text embeds the full URL, as a *url.Error does: the
// way CVE-2024-6104 leaked API keys from go-retryablehttp's logs.

const (
	secURL      = "https://alice:s3cret@api.example.com/v1/chat?key=AIzaSECRET&x=1"
	secSafeURL  = "https://api.example.com/v1/chat"
	secAuth     = "Bearer sk-SECRETTOKEN"
	secAPIKey   = "xk-SECRETAPIKEY"
	secReqBody  = `{"prompt":"PROMPT-SECRET"}`
	secRespBody = "RESP-SECRET: quota of org-SECRET exceeded"
	secCookie   = "sess=COOKIE-SECRET"
)

// secForbidden is every piece of a secret that must never be written.
var secForbidden = []string{
	"alice", "s3cret", // userinfo
	"key=AIzaSECRET&x=1", "AIzaSECRET", "x=1", // the query and its parts
	"sk-SECRETTOKEN", "SECRETAPIKEY", // credential header values
	"PROMPT-SECRET", "RESP-SECRET", "org-SECRET", "COOKIE-SECRET", // bodies, a response header
}

// secCheck fails the test if text holds any forbidden piece.
func secCheck(t *testing.T, where, text string) {
	t.Helper()
	for _, s := range secForbidden {
		assert.NotContains(t, text, s, "%s holds %q", where, s)
	}
}

// secLogs serializes every log entry in full, as a JSON log would hold it:
// message and every field, errorVerbose and errorCauses included.
func secLogs(t *testing.T, logs *observer.ObservedLogs) []string {
	t.Helper()
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	var out []string
	for _, e := range logs.All() {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		require.NoError(t, err, "encoding a log entry")
		out = append(out, buf.String())
		buf.Free()
	}
	return out
}

// secRequest is a POST to secURL carrying every kind of secret.
func secRequest(t *testing.T, ctx context.Context) *http.Request {
	t.Helper()
	req := newRequest(t, ctx, http.MethodPost, secURL, []byte(secReqBody))
	req.Header.Set("Authorization", secAuth)
	req.Header.Set("X-Api-Key", secAPIKey)
	return req
}

// secURLError is what a base that wraps its errors with the URL returns, as
// http.Client does: the text holds the URL it was given.
func secURLError(u string, err error) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) {
		if u == "" {
			u = r.URL.String()
		}
		return nil, &url.Error{Op: "Post", URL: u, Err: err}
	}
}

// secVerbose is an error whose %+v (which zap writes as errorVerbose) says
// more than its Error().
type secVerbose struct{ detail string }

func (e *secVerbose) Error() string { return "upstream failed" }
func (e *secVerbose) Format(s fmt.State, verb rune) {
	if verb == 'v' && s.Flag('+') {
		io.WriteString(s, "upstream failed: "+e.detail)
		return
	}
	io.WriteString(s, e.Error())
}
func (e *secVerbose) Unwrap() error { return syscall.ECONNRESET }

// secStep answers a try of TestSecretsNeverWritten.
type secStep = func(clk *retryhttptest.Clock, r *http.Request) (*http.Response, error)

// secretsTest is a row of TestSecretsNeverWritten.
type secretsTest struct {
	name   string
	step   secStep // every try
	opts   []Option
	budget bool
	cancel bool  // the caller cancels during the first wait
	wantIs error // what RoundTrip's error must still match
}

// TestSecretsNeverWritten: every try of a call gets the same answer from a
// base that echoes what it was sent (which a Script cannot do) into its
// errors.
func TestSecretsNeverWritten(t *testing.T) {
	type step = secStep
	resp := func(code int) step {
		return func(*retryhttptest.Clock, *http.Request) (*http.Response, error) {
			return respond(code, secRespBody, "Set-Cookie", secCookie, "X-Request-Echo", secAuth), nil
		}
	}
	full := func(_ *retryhttptest.Clock, r *http.Request) (*http.Response, error) {
		return secURLError("", syscall.ECONNRESET)(r)
	}
	for _, tc := range []secretsTest{
		{name: "503 with secrets in body and headers", step: resp(503)},
		{name: "*url.Error with the full URL", step: full, wantIs: syscall.ECONNRESET},
		{name: "*url.Error with the URL's Redacted form", wantIs: syscall.ECONNRESET,
			step: func(_ *retryhttptest.Clock, r *http.Request) (*http.Response, error) {
				return secURLError(r.URL.Redacted(), syscall.ECONNRESET)(r)
			}},
		{name: "error echoing the credential headers", wantIs: syscall.ECONNRESET,
			step: func(_ *retryhttptest.Clock, r *http.Request) (*http.Response, error) {
				return nil, fmt.Errorf("proxy refused %q and %q: %w", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), syscall.ECONNRESET)
			}},
		{name: "joined errors, each with the URL", wantIs: syscall.ECONNRESET,
			step: func(clk *retryhttptest.Clock, r *http.Request) (*http.Response, error) {
				_, e1 := full(clk, r)
				return nil, errors.Join(e1, fmt.Errorf("retrying %s", r.URL))
			}},
		{name: "error whose %+v holds the URL", wantIs: syscall.ECONNRESET,
			step: func(_ *retryhttptest.Clock, r *http.Request) (*http.Response, error) {
				return nil, &secVerbose{detail: "POST " + r.URL.String()}
			}},
		{name: "429 with a Budget: rate limited", step: resp(429), budget: true, wantIs: ErrRateLimited},
		{name: "caller cancels during the wait", step: full, cancel: true, wantIs: context.Canceled},
		{name: "per-try timeout", opts: []Option{WithTryTimeout(time.Second)},
			step: func(clk *retryhttptest.Clock, r *http.Request) (*http.Response, error) {
				clk.Add(time.Second) // the headers never come: the try timeout fires
				<-r.Context().Done()
				return secURLError("", r.Context().Err())(r)
			}},
		{name: "quota refuses", step: full, opts: []Option{WithQuota(NewQuota(0, 0))}, wantIs: syscall.ECONNRESET},
	} {
		t.Run(tc.name, func(t *testing.T) { checkSecretsNeverWritten(t, tc) })
	}
}

// checkSecretsNeverWritten runs tc's call and looks for a secret in
// every log entry, Attempt and error it leaves.
func checkSecretsNeverWritten(t *testing.T, tc secretsTest) {
	clk := newClock()
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) { return tc.step(clk, r) })
	log, logs := logSink()
	var seen ttAttempts
	tr := New(base, append([]Option{WithClock(clk), WithBackoff(noJitter), WithLogger(log), WithObserver(seen.observe)}, tc.opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if tc.budget {
		ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
	}
	if tc.cancel {
		clk.AfterFunc(time.Millisecond, cancel) // a millisecond into the first wait
	}
	resp, err := tr.RoundTrip(secRequest(t, ctx))
	if resp != nil {
		resp.Body.Close()
	}

	entries := secLogs(t, logs)
	require.NotEmpty(t, entries, "log entries: at least a give-up")
	for i, e := range entries {
		secCheck(t, fmt.Sprintf("log entry %d", i+1), e)
		assert.Contains(t, e, `"url":"`+secSafeURL+`"`, "log entry %d: the url field", i+1)
	}
	attempts := seen.list()
	require.NotEmpty(t, attempts, "the observer's attempts")
	for _, a := range attempts {
		where := fmt.Sprintf("Attempt %d", a.Try)
		assert.Equal(t, secSafeURL, a.URL, where)
		secCheck(t, where+" Method", a.Method)
		if a.Err != nil {
			secCheck(t, where+" Err", a.Err.Error())
		}
	}
	if err != nil {
		secCheck(t, "RoundTrip's error", err.Error())
	}
	if tc.wantIs != nil {
		assert.ErrorIs(t, err, tc.wantIs, "scrubbing must keep the chain")
	}
}

// The base's error really did hold the secrets: the test above could fail.
func TestSecretsBaseErrorHoldsThem(t *testing.T) {
	_, err := secURLError("", syscall.ECONNRESET)(secRequest(t, context.Background()))
	for _, s := range []string{"alice", "s3cret", "AIzaSECRET"} {
		assert.Contains(t, err.Error(), s, "the base's error lacks it: the secrets test would prove nothing")
	}
}

// A Permanent error on the first try is returned unchanged (R9): it is the
// base's own text, not one the library writes. What the library does write
// about it, the Attempt, is scrubbed; and a Permanent error on a later try
// comes back inside an *Error whose text is scrubbed.
func TestSecretsPermanentError(t *testing.T) {
	tlsErr := secURLError("", x509.UnknownAuthorityError{})
	t.Run("first try: unchanged", func(t *testing.T) {
		log, logs := logSink()
		var seen ttAttempts
		tr := New(roundTripperFunc(tlsErr), WithLogger(log), WithObserver(seen.observe))
		resp, err := tr.RoundTrip(secRequest(t, context.Background()))
		require.Nil(t, resp)
		var ue *url.Error
		require.ErrorAs(t, err, &ue)
		assert.Same(t, ue, err, "the base's *url.Error itself")
		for i, e := range secLogs(t, logs) {
			secCheck(t, fmt.Sprintf("log entry %d", i+1), e)
		}
		attempts := seen.list()
		require.Len(t, attempts, 1)
		secCheck(t, "Attempt Err", attempts[0].Err.Error())
		assert.ErrorAs(t, attempts[0].Err, new(x509.UnknownAuthorityError), "the Attempt's Err still unwraps to the certificate error")
	})
	t.Run("later try: scrubbed inside *Error", func(t *testing.T) {
		tries := 0
		base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if tries++; tries == 1 {
				return secURLError("", syscall.ECONNRESET)(r)
			}
			return tlsErr(r)
		})
		log, logs := logSink()
		tr := New(base, WithClock(newClock()), WithBackoff(noJitter), WithLogger(log))
		_, err := tr.RoundTrip(secRequest(t, context.Background()))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, Done, e.Reason)
		assert.Equal(t, 2, e.Tries)
		secCheck(t, "RoundTrip's error", err.Error())
		assert.ErrorAs(t, err, new(x509.UnknownAuthorityError), "it still unwraps to the certificate error")
		for i, e := range secLogs(t, logs) {
			secCheck(t, fmt.Sprintf("log entry %d", i+1), e)
		}
	})
}

// Secrets that reach an error's text in another spelling than the request's
// own: a query value on its own, the query re-encoded by a wrapper
// (url.Values.Encode sorts it), a password percent-encoded.
func TestSecretsInOtherSpellings(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		errText   func(r *http.Request) string
	}{
		{"password with reserved characters", "https://alice:s3cret%40%2F%20x@api.example.com/v1/chat?key=AIzaSECRET&x=1",
			func(r *http.Request) string { return "Post " + r.URL.String() }},
		{"query value alone", secURL,
			func(r *http.Request) string { return "API key " + r.URL.Query().Get("key") + " rejected" }},
		{"query re-encoded in another order", "https://alice:s3cret@api.example.com/v1/chat?x=1&key=AIzaSECRET",
			func(r *http.Request) string {
				u := *r.URL
				u.RawQuery = u.Query().Encode()
				return "Post " + u.String()
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				return nil, fmt.Errorf("%s: %w", tc.errText(r), syscall.ECONNRESET)
			})
			log, logs := logSink()
			var seen ttAttempts
			tr := New(base, WithClock(newClock()), WithBackoff(noJitter), WithLogger(log), WithObserver(seen.observe))
			_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, tc.url, []byte(secReqBody)))
			require.Error(t, err)
			secCheck(t, "RoundTrip's error", err.Error())
			for i, e := range secLogs(t, logs) {
				secCheck(t, fmt.Sprintf("log entry %d", i+1), e)
			}
			for _, a := range seen.list() {
				secCheck(t, fmt.Sprintf("Attempt %d Err", a.Try), a.Err.Error())
			}
		})
	}
}

// TestScrubEdges: what the library writes of a base's error holds none of
// the request's secrets (R14) at the edges of what counts as one: a
// credential header's value of 3 characters, a query value of 4 quoted
// alone, a fragment, and a secret that holds another (blanked whole, not
// around the one inside it). The scrubbed error still unwraps to the base's.
func TestScrubEdges(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		header    []string // name, value pairs
		errText   string
		secrets   []string // in errText, and never in what is written
	}{
		{"a 3-character credential header", "https://api.example.com/v1", []string{"X-Api-Key", "k3y"},
			"upstream refused key k3y", []string{"k3y"}},
		{"a 4-character query value alone", "https://api.example.com/v1?key=abcd", nil,
			"upstream refused key abcd", []string{"abcd"}},
		{"a fragment", "https://api.example.com/v1#tok-FRAGSECRET", nil,
			"Post https://api.example.com/v1#tok-FRAGSECRET", []string{"tok-FRAGSECRET"}},
		{"a header value holding a query value", "https://api.example.com/v1?key=abcd1234", []string{"X-Api-Key", "abcd1234-SUFFIXSECRET"},
			"upstream refused abcd1234-SUFFIXSECRET", []string{"abcd1234", "SUFFIXSECRET"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, context.Background(), http.MethodPost, tc.url, nil)
			for i := 0; i+1 < len(tc.header); i += 2 {
				req.Header.Set(tc.header[i], tc.header[i+1])
			}
			base := fmt.Errorf("%s: %w", tc.errText, syscall.ECONNRESET)
			for _, s := range tc.secrets {
				require.Contains(t, base.Error(), s, "the base's error holds it: the test could fail")
			}
			got := scrub(base, req)
			for _, s := range tc.secrets {
				assert.NotContains(t, got.Error(), s)
			}
			assert.ErrorIs(t, got, syscall.ECONNRESET, "it still unwraps")
		})
	}
}
