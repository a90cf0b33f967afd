package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// rig is an Anthropic client over retryhttp against a fake provider, with
// the SDK's retries off, on the test kit's Clock: every wait of the
// transport takes no time and is recorded in its Waits. The Clock starts at
// the real time (to the second, so that an HTTP-date is exact): the SDK's
// own deadlines are on the real clock.
type rig struct {
	p      *provider
	clock  *retryhttptest.Clock
	logs   *observer.ObservedLogs
	client anthropic.Client
}

func newRig(t *testing.T, plan []reply, opts ...retryhttp.Option) *rig {
	t.Helper()
	p := newProvider(plan...)
	t.Cleanup(p.Close)
	clk := retryhttptest.NewClock()
	core, logs := observer.New(zap.WarnLevel)
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections) // before p.Close: cleanups run last first
	opts = append([]retryhttp.Option{retryhttp.WithClock(clk), retryhttp.WithLogger(zap.New(core))}, opts...)
	return &rig{p: p, clock: clk, logs: logs, client: newClient(p.URL, retryhttp.New(base, opts...))}
}

// ask makes one Messages call and returns its text.
func (r *rig) ask(ctx context.Context) (string, error) {
	m, err := r.client.Messages.New(ctx, params())
	if err != nil {
		return "", err
	}
	return m.Content[0].Text, nil
}

// smallBackoff is smaller than every Retry-After below, without jitter, so
// the server's ask sets each wait exactly (R4).
var smallBackoff = retryhttp.WithBackoff(retryhttp.Backoff{Base: 100 * time.Millisecond, Factor: 2})

const msgRetrying = "llm transient failure — retrying"

// TestRetriesThroughSDK: a 429 with retry-after-ms and a 503 with Retry-After
// (seconds or an HTTP-date) are retried by retryhttp under the SDK, after
// exactly the wait the server asked for, with a log line per retry; the SDK
// sees only the final success.
func TestRetriesThroughSDK(t *testing.T) {
	at := func(clk *retryhttptest.Clock, d time.Duration) string {
		return clk.Now().Add(d).UTC().Format(http.TimeFormat)
	}
	tests := []struct {
		name      string
		plan      func(clk *retryhttptest.Clock) []reply
		wantWaits []time.Duration
	}{
		{"429 retry-after-ms", func(*retryhttptest.Clock) []reply {
			return []reply{fail(429, "retry-after-ms", "1500"), ok()}
		}, []time.Duration{1500 * time.Millisecond}},
		{"503 Retry-After seconds", func(*retryhttptest.Clock) []reply {
			return []reply{fail(503, "Retry-After", "7"), ok()}
		}, []time.Duration{7 * time.Second}},
		{"503 Retry-After HTTP-date", func(clk *retryhttptest.Clock) []reply {
			return []reply{fail(503, "Retry-After", at(clk, 5*time.Second)), ok()}
		}, []time.Duration{5 * time.Second}},
		{"529 overloaded Retry-After seconds", func(*retryhttptest.Clock) []reply {
			return []reply{fail(529, "Retry-After", "3"), ok()}
		}, []time.Duration{3 * time.Second}},
		{"429 retry-after-ms then 503 Retry-After", func(*retryhttptest.Clock) []reply {
			return []reply{fail(429, "retry-after-ms", "1500"), fail(503, "Retry-After", "7"), ok()}
		}, []time.Duration{1500 * time.Millisecond, 7 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil, smallBackoff)
			r.p.Plan(tt.plan(r.clock)...)
			got, err := r.ask(context.Background())
			if err != nil {
				t.Fatalf("Messages.New: %v", err)
			}
			if want := strings.Join(answer, ""); got != want {
				t.Errorf("answer %q, want %q", got, want)
			}
			if got := r.clock.Waits(); !slices.Equal(got, tt.wantWaits) {
				t.Errorf("waits %v, want %v", got, tt.wantWaits)
			}
			wantTries := len(tt.wantWaits) + 1
			if got, want := r.p.RetryCounts(), slices.Repeat([]string{"0"}, wantTries); !slices.Equal(got, want) {
				t.Errorf("X-Stainless-Retry-Count of the tries %v, want %v: only retryhttp retried", got, want)
			}
			lines := r.logs.FilterMessage(msgRetrying).All()
			if len(lines) != len(tt.wantWaits) {
				t.Fatalf("got %d retry log lines, want %d", len(lines), len(tt.wantWaits))
			}
			for i, line := range lines {
				f := line.ContextMap()
				if f["wait_ms"] != tt.wantWaits[i].Milliseconds() || f["wait_from"] != "retry-after" || f["attempt"] != int64(i+1) {
					t.Errorf("retry log line %d: %v, want attempt %d, wait_ms %d from retry-after", i, f, i+1, tt.wantWaits[i].Milliseconds())
				}
			}
		})
	}
}

// TestPublicTierRateLimited: on the public tier (a Budget of
// PublicTierMaxWait in the context), a rate limit whose Retry-After does not
// fit the budget comes out of the SDK call at once, after one try, as an
// error that errors.Is ErrRateLimited; one that fits is waited out.
func TestPublicTierRateLimited(t *testing.T) {
	tests := []struct {
		name        string
		plan        func(clk *retryhttptest.Clock) []reply
		wantErr     bool
		wantStatus  int
		wantAsk     time.Duration
		wantTries   int
		wantCharged time.Duration
	}{
		{name: "429 Retry-After 30 s", plan: func(*retryhttptest.Clock) []reply {
			return []reply{fail(429, "Retry-After", "30")}
		}, wantErr: true, wantStatus: 429, wantAsk: 30 * time.Second, wantTries: 1},
		{name: "429 retry-after-ms 60000", plan: func(*retryhttptest.Clock) []reply {
			return []reply{fail(429, "retry-after-ms", "60000", "Retry-After", "60")}
		}, wantErr: true, wantStatus: 429, wantAsk: time.Minute, wantTries: 1},
		{name: "503 Retry-After HTTP-date in an hour", plan: func(clk *retryhttptest.Clock) []reply {
			return []reply{fail(503, "Retry-After", clk.Now().Add(time.Hour).UTC().Format(http.TimeFormat))}
		}, wantErr: true, wantStatus: 503, wantAsk: time.Hour, wantTries: 1},
		{name: "429 Retry-After 2 s fits", plan: func(*retryhttptest.Clock) []reply {
			return []reply{fail(429, "Retry-After", "2"), ok()}
		}, wantTries: 2, wantCharged: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil, smallBackoff)
			r.p.Plan(tt.plan(r.clock)...)
			budget := retryhttp.NewBudget(retryhttp.PublicTierMaxWait)
			start := time.Now()
			_, err := r.ask(retryhttp.WithBudget(context.Background(), budget))
			if elapsed := time.Since(start); elapsed > 2*time.Second {
				t.Errorf("the call took %v of real time: it should not wait", elapsed)
			}
			if got := len(r.p.Tries()); got != tt.wantTries {
				t.Errorf("provider saw %d tries, want %d", got, tt.wantTries)
			}
			if got := budget.Waited(); got != tt.wantCharged {
				t.Errorf("budget charged %v, want %v", got, tt.wantCharged)
			}
			var wantWaits []time.Duration // a fail-fast waits not at all; a fit waits what it is charged
			if tt.wantCharged > 0 {
				wantWaits = []time.Duration{tt.wantCharged}
			}
			if got := r.clock.Waits(); !slices.Equal(got, wantWaits) {
				t.Errorf("transport waited %v, want %v", got, wantWaits)
			}
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Messages.New: %v, want the answer", err)
				}
				return
			}
			if !errors.Is(err, retryhttp.ErrRateLimited) {
				t.Fatalf("Messages.New error %v (%T), want one that errors.Is ErrRateLimited", err, err)
			}
			var rerr *retryhttp.Error
			if !errors.As(err, &rerr) {
				t.Fatalf("error %v is not a *retryhttp.Error", err)
			}
			if rerr.Status != tt.wantStatus || rerr.RetryAfter != tt.wantAsk || rerr.Tries != tt.wantTries {
				t.Errorf("Error{Status %d, RetryAfter %v, Tries %d}, want {%d, %v, %d}",
					rerr.Status, rerr.RetryAfter, rerr.Tries, tt.wantStatus, tt.wantAsk, tt.wantTries)
			}
			var apiErr *anthropic.Error
			if errors.As(err, &apiErr) {
				t.Errorf("error is also an *anthropic.Error (status %d): the SDK saw the response", apiErr.StatusCode)
			}
		})
	}
}

// TestStream: a streamed answer is read to the end through the SDK; once its
// first byte is handed over nothing is re-sent (R6), even when the
// connection drops mid-stream, and the per-try timeout never cuts it (R13).
func TestStream(t *testing.T) {
	hold := make(chan struct{})
	tests := []struct {
		name       string
		plan       []reply
		opts       []retryhttp.Option
		afterFirst func(clk *retryhttptest.Clock) // once the first chunk is read
		wantText   string
		wantErr    bool
		wantTries  int
	}{
		{name: "to the end after a 503", plan: []reply{fail(503, "retry-after-ms", "20"), ok()},
			wantText: strings.Join(answer, ""), wantTries: 2},
		{name: "cut after the first chunk is not re-sent", plan: []reply{{cut: true}},
			wantText: answer[0], wantErr: true, wantTries: 1},
		{name: "outlives the per-try timeout", plan: []reply{{hold: hold}},
			opts: []retryhttp.Option{retryhttp.WithTryTimeout(time.Second)},
			afterFirst: func(clk *retryhttptest.Clock) {
				clk.Add(time.Minute) // far past the try timeout
				close(hold)
			},
			wantText: strings.Join(answer, ""), wantTries: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.plan, append([]retryhttp.Option{smallBackoff}, tt.opts...)...)
			stream := r.client.Messages.NewStreaming(context.Background(), params())
			defer stream.Close()
			var text strings.Builder
			first := true
			for stream.Next() {
				if ev := stream.Current(); ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
					text.WriteString(ev.Delta.Text)
				}
				if first && text.Len() > 0 {
					first = false
					if tt.afterFirst != nil {
						tt.afterFirst(r.clock)
					}
				}
			}
			if err := stream.Err(); (err != nil) != tt.wantErr {
				t.Errorf("stream error %v, want error: %t", err, tt.wantErr)
			}
			if got := text.String(); got != tt.wantText {
				t.Errorf("streamed %q, want %q", got, tt.wantText)
			}
			tries := r.p.Tries()
			if len(tries) != tt.wantTries {
				t.Errorf("provider saw %d tries, want %d", len(tries), tt.wantTries)
			}
			for i, try := range tries {
				if !try.stream {
					t.Errorf("try %d did not ask for a stream", i+1)
				}
			}
		})
	}
}

// TestShouldRetryHeader: the provider's x-should-retry header, which the SDK
// honours, is honoured by retryhttp too, in both directions.
func TestShouldRetryHeader(t *testing.T) {
	tests := []struct {
		name       string
		plan       []reply
		wantStatus int // of the SDK's error; 0: the answer
		wantTries  int
	}{
		{"400 x-should-retry true is retried", []reply{fail(400, "x-should-retry", "true"), ok()}, 0, 2},
		{"409 x-should-retry true is retried", []reply{fail(409, "x-should-retry", "true"), ok()}, 0, 2},
		{"503 x-should-retry false is not", []reply{fail(503, "x-should-retry", "false"), ok()}, 503, 1},
		{"429 x-should-retry false is not", []reply{fail(429, "x-should-retry", "false", "retry-after-ms", "10"), ok()}, 429, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.plan, smallBackoff)
			got, err := r.ask(context.Background())
			if tt.wantStatus == 0 {
				if err != nil || got != strings.Join(answer, "") {
					t.Errorf("got %q, %v; want the answer", got, err)
				}
			} else {
				var apiErr *anthropic.Error
				if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.wantStatus {
					t.Errorf("error %v, want an *anthropic.Error with status %d", err, tt.wantStatus)
				}
			}
			if n := len(r.p.Tries()); n != tt.wantTries {
				t.Errorf("provider saw %d tries, want %d", n, tt.wantTries)
			}
		})
	}
}

// TestStackedRetries measures what the provider sees of one call against an
// always-503 provider when the SDK's retries (default 2) are stacked on
// retryhttp's (default 2): 3 x 3 = 9 tries, and X-Stainless-Retry-Count
// counts only the SDK's. The provider's retry-after-ms of 1 and a 1 ms
// backoff keep both sides' waits tiny.
func TestStackedRetries(t *testing.T) {
	tests := []struct {
		name       string
		retryhttp  bool
		sdkRetries int
		want       []string // X-Stainless-Retry-Count of each try the provider sees
	}{
		{"SDK retries on, retryhttp on", true, 2, []string{"0", "0", "0", "1", "1", "1", "2", "2", "2"}},
		{"SDK retries off, retryhttp on", true, 0, []string{"0", "0", "0"}},
		{"SDK retries on, no retryhttp", false, 2, []string{"0", "1", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(fail(503, "retry-after-ms", "1"))
			defer p.Close()
			base := http.DefaultTransport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			var rt http.RoundTripper = base
			if tt.retryhttp {
				rt = retryhttp.New(base, retryhttp.WithBackoff(retryhttp.Backoff{Base: time.Millisecond}))
			}
			client := newClient(p.URL, rt, option.WithMaxRetries(tt.sdkRetries))
			_, err := client.Messages.New(context.Background(), params())
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
				t.Errorf("error %v, want an *anthropic.Error with status 503", err)
			}
			if got := p.RetryCounts(); !slices.Equal(got, tt.want) {
				t.Errorf("provider saw %d tries with X-Stainless-Retry-Count %v, want %d: %v", len(got), got, len(tt.want), tt.want)
			}
		})
	}
}

// TestSDKRetriesDefeatFailFast: with the SDK's retries left on, the
// public tier's fail-fast is lost. retryhttp returns ErrRateLimited at once,
// but to the SDK that is a connection error, which it retries after its own
// backoff (0.5 s, then 1 s, less up to 25% jitter; no option shortens it):
// the provider gets another try inside the 30 s it asked for. One SDK retry
// here keeps the test at about 0.4 s of real time.
func TestSDKRetriesDefeatFailFast(t *testing.T) {
	tests := []struct {
		name       string
		sdkRetries int
		want       []string
	}{
		{"SDK retries off", 0, []string{"0"}},
		{"SDK retries on", 1, []string{"0", "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(fail(429, "Retry-After", "30"))
			defer p.Close()
			base := http.DefaultTransport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			client := newClient(p.URL, retryhttp.New(base), option.WithMaxRetries(tt.sdkRetries))
			ctx := retryhttp.WithBudget(context.Background(), retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
			_, err := client.Messages.New(ctx, params())
			if !errors.Is(err, retryhttp.ErrRateLimited) {
				t.Errorf("error %v, want one that errors.Is ErrRateLimited", err)
			}
			if got := p.RetryCounts(); !slices.Equal(got, tt.want) {
				t.Errorf("provider saw X-Stainless-Retry-Count %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDroppedBody: an answer that is not streamed and whose connection drops
// halfway through its JSON is not re-sent by retryhttp, which hands the
// response over before its body is read (R6). This SDK reads the body inside
// its retry loop and retries a dropped one: a retry that is lost when the
// SDK's retries are off, since retryhttp cannot make it.
func TestDroppedBody(t *testing.T) {
	tests := []struct {
		name       string
		sdkRetries int
		wantErr    bool
		want       []string
	}{
		{"SDK retries off", 0, true, []string{"0"}},
		{"SDK retries on", 2, false, []string{"0", "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// retry-after-ms on the 200 keeps the SDK's wait at 1 ms.
			p := newProvider(reply{cut: true, header: []string{"retry-after-ms", "1"}}, ok())
			defer p.Close()
			base := http.DefaultTransport.(*http.Transport).Clone()
			defer base.CloseIdleConnections()
			client := newClient(p.URL, retryhttp.New(base, smallBackoff), option.WithMaxRetries(tt.sdkRetries))
			_, err := client.Messages.New(context.Background(), params())
			if (err != nil) != tt.wantErr {
				t.Errorf("Messages.New error %v, want error: %t", err, tt.wantErr)
			}
			if got := p.RetryCounts(); !slices.Equal(got, tt.want) {
				t.Errorf("provider saw X-Stainless-Retry-Count %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStreamErrorEventRetried: the Messages API fails a stream it has
// answered 200 with an error event (overloaded_error) before its first
// token. With WithStreamRetry the transport retries it (R26) and the SDK
// accumulates the whole message of the retried stream, with no error; the
// try and its stream's error are logged. Without it, the SDK's stream
// fails.
func TestStreamErrorEventRetried(t *testing.T) {
	for _, tt := range []struct {
		name      string
		opts      []retryhttp.Option
		wantTries int
		wantErr   bool
	}{
		{"WithStreamRetry", []retryhttp.Option{retryhttp.WithStreamRetry(10 * time.Second)}, 2, false},
		{"without it", nil, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []reply{streamFail("overloaded_error"), ok()}, append([]retryhttp.Option{smallBackoff}, tt.opts...)...)
			stream := r.client.Messages.NewStreaming(context.Background(), params())
			defer stream.Close()
			var message anthropic.Message
			for stream.Next() {
				if err := message.Accumulate(stream.Current()); err != nil {
					t.Fatalf("Accumulate: %v", err)
				}
			}
			if got := len(r.p.Tries()); got != tt.wantTries {
				t.Errorf("provider saw %d tries, want %d", got, tt.wantTries)
			}
			if tt.wantErr {
				if stream.Err() == nil || !strings.Contains(stream.Err().Error(), "overloaded_error") {
					t.Errorf("stream error %v, want the overloaded_error the SDK read", stream.Err())
				}
				return
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream error %v, want none: the retried stream is the SDK's", err)
			}
			if len(message.Content) != 1 || message.Content[0].Text != strings.Join(answer, "") || message.StopReason != "end_turn" {
				t.Errorf("accumulated %+v, want the whole answer, ended", message.Content)
			}
			lines := r.logs.FilterMessage(msgRetrying).All()
			if len(lines) != 1 || lines[0].ContextMap()["stream_error"] != "overloaded_error" {
				t.Errorf("retry log lines %v, want one with stream_error overloaded_error", lines)
			}
		})
	}
}
