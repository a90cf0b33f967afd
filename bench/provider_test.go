package bench

// Tests of the goodput harness's provider: the token bucket, and what the
// fake provider sends in each dialect and when.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBucket(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		at   time.Duration
		want Decision
	}
	for _, tc := range []struct {
		name        string
		rate, burst int
		steps       []step
	}{
		{"starts full, refuses the one after the burst", 10, 3, []step{
			{0, Decision{OK: true, Remaining: 2, Reset: 100 * time.Millisecond}},
			{0, Decision{OK: true, Remaining: 1, Reset: 200 * time.Millisecond}},
			{0, Decision{OK: true, Remaining: 0, Reset: 300 * time.Millisecond}},
			{0, Decision{Remaining: 0, Next: 100 * time.Millisecond, Reset: 300 * time.Millisecond}},
		}},
		{"refills continuously, a token at a time", 10, 1, []step{
			{0, Decision{OK: true, Remaining: 0, Reset: 100 * time.Millisecond}},
			{40 * time.Millisecond, Decision{Next: 60 * time.Millisecond, Reset: 60 * time.Millisecond}},
			{101 * time.Millisecond, Decision{OK: true, Remaining: 0, Reset: 100 * time.Millisecond}}, // full, capped at 1
		}},
		{"a refusal takes nothing", 4, 1, []step{
			{0, Decision{OK: true, Reset: 250 * time.Millisecond}},
			{0, Decision{Next: 250 * time.Millisecond, Reset: 250 * time.Millisecond}},
			{0, Decision{Next: 250 * time.Millisecond, Reset: 250 * time.Millisecond}},
			{260 * time.Millisecond, Decision{OK: true, Reset: 250 * time.Millisecond}},
		}},
		{"never holds more than the burst", 100, 2, []step{
			{time.Hour, Decision{OK: true, Remaining: 1, Reset: 10 * time.Millisecond}},
			{time.Hour, Decision{OK: true, Remaining: 0, Reset: 20 * time.Millisecond}},
			{time.Hour, Decision{Next: 10 * time.Millisecond, Reset: 20 * time.Millisecond}},
		}},
		{"an earlier now adds nothing", 10, 1, []step{
			{time.Second, Decision{OK: true, Reset: 100 * time.Millisecond}},
			{500 * time.Millisecond, Decision{Next: 100 * time.Millisecond, Reset: 100 * time.Millisecond}},
			{time.Second + 50*time.Millisecond, Decision{Next: 50 * time.Millisecond, Reset: 50 * time.Millisecond}},
		}},
		{"remaining counts whole tokens", 10, 3, []step{
			{0, Decision{OK: true, Remaining: 2, Reset: 100 * time.Millisecond}},
			{50 * time.Millisecond, Decision{OK: true, Remaining: 1, Reset: 150 * time.Millisecond}}, // 1.5 left
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBucket(float64(tc.rate), tc.burst, t0)
			for i, s := range tc.steps {
				got := b.Take(at(s.at))
				// Float arithmetic may leave a nanosecond either way.
				if got.OK != s.want.OK || got.Remaining != s.want.Remaining || !near(got.Next, s.want.Next) || !near(got.Reset, s.want.Reset) {
					t.Errorf("step %d at %v: got %+v, want %+v", i, s.at, got, s.want)
				}
			}
		})
	}
}

func near(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }

// TestBucketAdmitsNoMore drives a bucket with many requests at uneven times
// and checks the bound the goodput runs rely on.
func TestBucketAdmitsNoMore(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	const rate, burst = 50, 5
	b := NewBucket(rate, burst, t0)
	admitted := 0
	var now time.Duration
	for i := range 10_000 {
		now += time.Duration(i%7) * 97 * time.Microsecond
		if b.Take(t0.Add(now)).OK {
			admitted++
		}
		if limit := burst + rate*now.Seconds(); float64(admitted) > limit+1e-9 {
			t.Fatalf("after %v: %d admitted, more than %.3f", now, admitted, limit)
		}
	}
	if want := burst + int(rate*now.Seconds()); admitted < want-1 {
		t.Errorf("after %v: %d admitted, want about %d: the bucket does not refill", now, admitted, want)
	}
}

func TestFormatReset(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{time.Nanosecond, "1ms"},
		{20 * time.Millisecond, "20ms"},
		{20*time.Millisecond + 1, "21ms"},
		{999*time.Millisecond + 1, "1s"},
		{time.Second, "1s"},
		{1500 * time.Millisecond, "1.5s"},
		{1234567 * time.Microsecond, "1.235s"},
		{6 * time.Minute, "6m0s"},
		{90*time.Second + 500*time.Millisecond, "1m30.5s"},
	} {
		got := FormatReset(tc.d)
		if got != tc.want {
			t.Errorf("FormatReset(%v) = %q, want %q", tc.d, got, tc.want)
		}
		if back, err := time.ParseDuration(got); err != nil || back < tc.d {
			t.Errorf("FormatReset(%v) = %q reads back as %v, %v: earlier than the reset", tc.d, got, back, err)
		}
	}
}

func TestCeilUnits(t *testing.T) {
	for _, tc := range []struct {
		d, unit time.Duration
		want    int64
	}{
		{0, time.Millisecond, 1},
		{time.Nanosecond, time.Millisecond, 1},
		{time.Millisecond, time.Millisecond, 1},
		{time.Millisecond + 1, time.Millisecond, 2},
		{10 * time.Millisecond, time.Second, 1},
		{2*time.Second + 1, time.Second, 3},
	} {
		if got := ceilUnits(tc.d, tc.unit); got != tc.want {
			t.Errorf("ceilUnits(%v, %v) = %d, want %d", tc.d, tc.unit, got, tc.want)
		}
	}
}

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
		d                 Dialect
		on200, on429      []string // header names but Content-Type, Content-Length and Date
		wait              span     // ParseRetryAfter of the 429
		reset             span     // ParseRateLimitReset of the second 200 (0 remaining) and of the 429
		bodyWait          span     // ParseErrorBody of the 429
		limit, remaining2 string   // the count headers' limit, and remaining on the second 200
	}{
		{d: OpenAIDialect, on200: openAI, on429: append(counts("Retry-After", "Retry-After-Ms"), openAI...),
			wait: span{500 * time.Millisecond, time.Second}, reset: span{1500 * time.Millisecond, 2 * time.Second}},
		{d: AnthropicDialect, on200: anthropic, on429: append(counts("Retry-After"), anthropic...),
			wait: span{time.Second, time.Second}, reset: span{time.Second, 3 * time.Second}},
		{d: RetryAfterDialect, on429: counts("Retry-After"), wait: span{time.Second, time.Second}},
		{d: GeminiDialect, bodyWait: span{500 * time.Millisecond, time.Second}},
		{d: BareDialect},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			p := NewProvider(1, 2, tc.d, 0)
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
			s.AdmitSpan = 0
			assert.Equal(t, ProviderStats{Requests: 3, Admitted: 2, Limited: 1, Conns: 1}, s)
		})
	}
}

// TestProviderLatency checks that the token is taken when the request
// arrives, that the 200 waits the latency, and that a 429 does not.
func TestProviderLatency(t *testing.T) {
	const latency = 300 * time.Millisecond
	p := NewProvider(1, 1, OpenAIDialect, latency)
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
	p := NewProvider(1, 1, OpenAIDialect, time.Hour)
	base := BaseTransport(1)
	defer base.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := call(ctx, &http.Client{Transport: base}, p.URL, time.Hour)
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
