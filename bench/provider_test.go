package bench

// Tests of the goodput harness's provider, retryhttptest's on loopback: what
// it sends in each dialect and when (the kit's own tests pin every header
// and body), and its latency.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// near: float arithmetic may leave a nanosecond either way.
func near(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }

// TestProviderDialects sends three requests to a provider of each dialect
// that admits two at once and one a second: the third is refused at once,
// and each answer carries exactly the hints its dialect gives, as
// retryhttp's own parsers read them.
func TestProviderDialects(t *testing.T) {
	type span struct{ min, max time.Duration } // the zero span: the parser must find nothing
	counts := func(names ...string) []string { return names }
	openAI := counts("X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests")
	anthropic := counts("Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset")
	for _, tc := range []struct {
		d                 retryhttptest.Dialect
		on200, on429      []string // header names but Content-Type, Content-Length and Date
		wait              span     // ParseRetryAfter of the 429
		reset             span     // ParseRateLimitReset of the second 200 (0 remaining) and of the 429
		bodyWait          span     // ParseErrorBody of the 429
		limit, remaining2 string   // the count headers' limit, and remaining on the second 200
	}{
		{d: retryhttptest.OpenAIDialect, on200: openAI, on429: append(counts("Retry-After", "Retry-After-Ms"), openAI...),
			wait: span{500 * time.Millisecond, time.Second}, reset: span{1500 * time.Millisecond, 2 * time.Second}},
		{d: retryhttptest.AnthropicDialect, on200: anthropic, on429: append(counts("Retry-After"), anthropic...),
			wait: span{time.Second, time.Second}, reset: span{time.Second, 3 * time.Second}},
		{d: retryhttptest.RetryAfterDialect, on429: counts("Retry-After"), wait: span{time.Second, time.Second}},
		{d: retryhttptest.GeminiDialect, bodyWait: span{500 * time.Millisecond, time.Second}},
		{d: retryhttptest.BareDialect},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			p := NewProvider(GoodputConfig{Rate: 1, Burst: 2, Dialect: tc.d})
			defer p.Close()
			base := BaseTransport(1)
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: base}
			inSpan := func(what string, d time.Duration, ok bool, want span) {
				t.Helper()
				if want == (span{}) {
					assert.False(t, ok, "%s: found %v, want nothing", what, d)
					return
				}
				if assert.True(t, ok, "%s: found nothing", what) {
					assert.True(t, want.min <= d && d <= want.max, "%s: %v, want %v to %v", what, d, want.min, want.max)
				}
			}
			for i, status := range []int{200, 200, 429} {
				t0 := time.Now()
				resp, err := client.Post(p.URL, "application/json", bytes.NewReader(chatRequest))
				require.NoError(t, err)
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				now := time.Now()
				require.Equal(t, status, resp.StatusCode, "answer %d", i)
				var names []string
				for k := range resp.Header {
					if k != "Content-Type" && k != "Content-Length" && k != "Date" {
						names = append(names, k)
					}
				}
				want := tc.on200
				if status == 429 {
					want = tc.on429
				}
				assert.ElementsMatch(t, want, names, "answer %d's headers", i)
				reset, resetOK := retryhttp.ParseRateLimitReset(resp.Header, now)
				switch i {
				case 0:
					assert.Equal(t, CompletionBody, body)
					assert.False(t, resetOK, "one token left, yet a reset of %v", reset)
				case 1:
					inSpan("the second 200's reset", reset, resetOK, tc.reset)
				case 2:
					assert.Less(t, now.Sub(t0), 500*time.Millisecond, "a 429 answers at once")
					wait, ok := retryhttp.ParseRetryAfter(resp.Header, now)
					inSpan("the 429's Retry-After", wait, ok, tc.wait)
					inSpan("the 429's reset", reset, resetOK, tc.reset)
					hint := retryhttp.ParseErrorBody(body)
					inSpan("the 429's body", hint.RetryAfter, hint.RetryAfter > 0, tc.bodyWait)
					assert.False(t, hint.Exhausted)
				}
			}
			s := p.Stats()
			assert.Equal(t, [5]int64{3, 2, 1, 1, 1}, [5]int64{s.Requests, s.Admitted, s.Refused, s.RefusedRequests, s.Conns})
			assert.Positive(t, s.AdmitSpan)
		})
	}
}

// TestProviderLatency checks that the token is taken when the request
// arrives, that the 200 waits the latency, and that a 429 does not.
func TestProviderLatency(t *testing.T) {
	const latency = 300 * time.Millisecond
	p := NewProvider(GoodputConfig{Rate: 1, Burst: 1, Latency: latency})
	defer p.Close()
	base := BaseTransport(2)
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: base}
	post := func() (int, time.Duration) {
		t0 := time.Now()
		resp, err := client.Post(p.URL, "application/json", bytes.NewReader(chatRequest))
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(t0)
	}
	first := make(chan time.Duration, 1)
	go func() {
		status, took := post()
		assert.Equal(t, 200, status)
		first <- took
	}()
	// Sent while the first waits for its answer: its token is gone already.
	for p.Stats().Admitted == 0 {
		time.Sleep(time.Millisecond)
	}
	status, took := post()
	assert.Equal(t, 429, status)
	assert.Less(t, took, latency/2, "the 429 waited")
	assert.GreaterOrEqual(t, <-first, latency, "the 200 did not wait")
}

// TestProviderCloseEndsSlowAnswers checks that a run over does not wait out
// the answers still coming: the handler leaves when its client does.
func TestProviderCloseEndsSlowAnswers(t *testing.T) {
	p := NewProvider(GoodputConfig{Rate: 1, Burst: 1, Latency: time.Hour})
	base := BaseTransport(1)
	defer base.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := call(ctx, &http.Client{Transport: base}, p.URL, chatRequest, time.Hour)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waiting for a handler after 5 s")
	}
	s := p.Stats()
	assert.Equal(t, [2]int64{1, 1}, [2]int64{s.Admitted, s.Abandoned}, "admitted, abandoned")
}
