package retryhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TestObserver checks R15: one Attempt per try, in order, before the wait,
// with the request's context and a URL free of query and userinfo.
func TestObserver(t *testing.T) {
	const tryTime = 250 * time.Millisecond
	clk := newClock()
	script := retryhttptest.NewScript(reply(503), reply(429, "Retry-After", "5"), reply(200)).WithClock(clk)
	slow := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		clk.Add(tryTime) // the try itself takes time on the injected clock
		return script.RoundTrip(r)
	})
	type ctxKey struct{}
	var (
		attempts    []Attempt
		waitsBefore []int // waits taken before each report
	)
	tr := New(slow, WithClock(clk), WithBackoff(noJitter), WithObserver(func(ctx context.Context, a Attempt) {
		assert.Equal(t, "turn-7", ctx.Value(ctxKey{}), "the observer gets the request's context")
		waitsBefore = append(waitsBefore, len(clk.Waits()))
		attempts = append(attempts, a)
	}))
	ctx := context.WithValue(context.Background(), ctxKey{}, "turn-7")
	resp, err := tr.RoundTrip(newRequest(t, ctx, "POST", "https://bob:hunter2@api.example.com/v1/chat?key=secret#frag", []byte("{}")))
	require.NoError(t, err)
	resp.Body.Close()

	want := []Attempt{
		{Try: 1, Status: 503, Class: Transient, Wait: 400 * time.Millisecond, From: FromBackoff, Outcome: Retrying},
		{Try: 2, Status: 429, Class: Throttled, Wait: 5 * time.Second, From: FromRetryAfter, Outcome: Retrying},
		{Try: 3, Status: 200, Class: Permanent, Outcome: Done},
	}
	require.Len(t, attempts, len(want))
	call := attempts[0].Call
	assert.NotZero(t, call, "a call number")
	for i := range want {
		want[i].Call, want[i].MaxTries, want[i].Method, want[i].URL, want[i].Elapsed = call, 3, "POST", "https://api.example.com/v1/chat", tryTime
	}
	assert.Equal(t, want, attempts)
	assert.Equal(t, []int{0, 1, 2}, waitsBefore, "try n is reported after n-1 waits, before the n-th")
	assertWaits(t, []time.Duration{400 * time.Millisecond, 5 * time.Second}, clk.Waits())

	// A second call gets another number.
	resp, err = tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.NotEqual(t, call, attempts[len(attempts)-1].Call, "two calls share a number")
}

// TestLogs checks R14: a Warn entry per retry with its fields, and one
// give-up entry when the transport stops after a failed try.
func TestLogs(t *testing.T) {
	log, logs := logSink()
	_, _, tr := scripted(replies{reply(503), retryhttptest.Fail(errRefused), reply(429, "Retry-After", "3")}, WithLogger(log))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "POST", "https://u:p@api.example.com/v1/chat?key=k", []byte("{}")))
	require.NoError(t, err)
	resp.Body.Close()

	type (
		fields = map[string]any
		entry  struct {
			Level, Msg string
			Fields     fields
		}
	)
	want := []entry{
		{"warn", "llm transient failure — retrying", fields{"attempt": int64(1), "max": int64(2), "status": int64(503), "wait_ms": int64(400),
			"wait_from": "backoff", "method": "POST", "url": "https://api.example.com/v1/chat"}},
		{"warn", "llm transient failure — retrying", fields{"attempt": int64(2), "max": int64(2), "status": int64(0), "wait_ms": int64(800),
			"wait_from": "backoff", "method": "POST", "url": "https://api.example.com/v1/chat", "error": "dial tcp: connection refused"}},
		{"warn", "llm transient failure — giving up", fields{"reason": "exhausted", "tries": int64(3), "waited_ms": int64(1200), "status": int64(429),
			"ask_from": "header", "url": "https://api.example.com/v1/chat"}},
	}
	var got []entry
	for _, e := range logs.All() {
		got = append(got, entry{e.Level.String(), e.Message, e.ContextMap()})
	}
	assert.Equal(t, want, got)
}

// TestNoLogsOnSuccessOrPermanentFailure: only retries and give-ups log.
func TestNoLogsOnSuccessOrPermanentFailure(t *testing.T) {
	for _, r := range []retryhttptest.Reply{reply(200), reply(404), retryhttptest.Fail(errNotFound)} {
		log, logs := logSink()
		_, _, tr := scripted(replies{r}, WithLogger(log))
		if resp, _ := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com", nil)); resp != nil {
			resp.Body.Close()
		}
		assert.Empty(t, logs.All(), "status %d, error %v", r.Status, r.Err)
	}
}

// TestObserverPanicLeaksNothing: an Observer that panics has the try's
// response closed, the next try's fresh body closed, and the Budget's charge
// given back before the panic goes on up to the caller (R15).
func TestObserverPanicLeaksNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
	}{
		{"on a success", 200},
		{"on a retry", 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			respBody := &trackedBody{r: strings.NewReader("x")}
			var fresh *trackedBody
			base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: respBody, ContentLength: 1}, nil
			})
			budget := NewBudget(PublicTierMaxWait)
			req := newRequest(t, WithBudget(context.Background(), budget), "POST", "https://api.example.com", []byte("{}"))
			req.GetBody = func() (io.ReadCloser, error) {
				fresh = &trackedBody{r: strings.NewReader("{}")}
				return fresh, nil
			}
			tr := New(base, WithClock(newClock()), WithObserver(func(context.Context, Attempt) { panic("observer bug") }))
			assert.PanicsWithValue(t, "observer bug", func() { _, _ = tr.RoundTrip(req) })
			assert.EqualValues(t, 1, respBody.closed.Load(), "the try's response is closed")
			if tc.status != 200 {
				require.NotNil(t, fresh)
				assert.EqualValues(t, 1, fresh.closed.Load(), "the next try's body is closed")
			}
			assert.Zero(t, budget.Waited(), "nothing stays charged")
		})
	}
}

// TestLogsCarryNoStackOrCaller: a retry is expected, not a fault, so no
// entry of the transport carries a stack trace or a caller, whatever the
// logger's config (R14). The logger here is zap.NewDevelopment's config, stack
// traces at Warn and callers on, writing to a buffer: without the transport's
// own options each entry below came with some 20 lines of stack and the
// caller observe.go, which tells a user nothing.
func TestLogsCarryNoStackOrCaller(t *testing.T) {
	for _, tc := range []struct {
		name string
		enc  zapcore.Encoder
	}{
		{"console", zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())},
		{"json", zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := zap.NewDevelopmentConfig().Build(zap.WrapCore(func(zapcore.Core) zapcore.Core {
				return zapcore.NewCore(tc.enc, zapcore.AddSync(&buf), zapcore.DebugLevel)
			}))
			require.NoError(t, err)
			allLogEntryKinds(t, WithLogger(log))

			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			require.Len(t, lines, 3, "one line per entry, no stack trace lines:\n%s", buf.String())
			for i, want := range []string{msgRetrying, msgGivingUp, msgHolding} {
				assert.Contains(t, lines[i], want)
				assert.NotContains(t, lines[i], "observe.go", "entry %d: a caller in the library tells a user nothing", i+1)
				if tc.name == "json" {
					var e map[string]any
					require.NoError(t, json.Unmarshal([]byte(lines[i]), &e))
					assert.NotContains(t, e, "stacktrace", "entry %d", i+1)
					assert.NotContains(t, e, "caller", "entry %d", i+1)
				}
			}
		})
	}
}

// allLogEntryKinds makes a Transport with opts write one entry of each kind:
// a retry (a 503), a give-up (a 429 with no retries left, which holds the
// key for some 20 seconds) and, on the next call, a Cooldown's hold.
func allLogEntryKinds(t *testing.T, opts ...Option) {
	t.Helper()
	_, _, tr := scripted(replies{reply(503), reply(429, "Retry-After", "20"), reply(200)},
		append([]Option{WithMaxRetries(1), WithCooldown(NewCooldown(nil))}, opts...)...)
	for _, want := range []int{429, 200} {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com/v1/chat", nil))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode)
	}
}

// geminiAsks2s is a Gemini 429 body that asks for 2 s in its RetryInfo,
// the way the Gemini SDK's calls see it: no Retry-After header at all.
const geminiAsks2s = `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}`

// gemini429 is a 429 with the geminiAsks2s body, as JSON.
func gemini429() retryhttptest.Reply {
	r := reply(429, "Content-Type", "application/json")
	r.Body = geminiAsks2s
	return r
}

// TestLogsAskFrom: the retry and give-up entries say where the server's ask
// came from, ask_from "header" or "body", and leave it out when the server
// asked nothing (R14). wait_from keeps its three values: a body's ask that
// sets the wait is "retry-after", as a header's is.
func TestLogsAskFrom(t *testing.T) {
	gemini := gemini429()
	type entry struct{ msg, askFrom, waitFrom string } // "" for a field left out
	for _, tc := range []struct {
		name   string
		first  retryhttptest.Reply
		opts   []Option
		cancel bool // the caller cancels during the wait
		want   []entry
	}{
		{"retry after a body's retryDelay", gemini, nil, false,
			[]entry{{msgRetrying, "body", "retry-after"}}},
		{"retry after Retry-After", reply(429, "Retry-After", "2"), nil, false,
			[]entry{{msgRetrying, "header", "retry-after"}}},
		{"retry after retry-after-ms", reply(429, "Retry-After-Ms", "2000"), nil, false,
			[]entry{{msgRetrying, "header", "retry-after"}}},
		{"retry after a small ask: the backoff wins, the ask is still told", reply(503, "Retry-After-Ms", "10"), nil, false,
			[]entry{{msgRetrying, "header", "backoff"}}},
		{"retry with no ask", reply(503), nil, false,
			[]entry{{msgRetrying, "", "backoff"}}},
		{"give up after a body's retryDelay", gemini, []Option{WithMaxRetries(0)}, false,
			[]entry{{msgGivingUp, "body", ""}}},
		{"give up after Retry-After", reply(429, "Retry-After", "2"), []Option{WithMaxRetries(0)}, false,
			[]entry{{msgGivingUp, "header", ""}}},
		{"give up with no ask", reply(503), []Option{WithMaxRetries(0)}, false,
			[]entry{{msgGivingUp, "", ""}}},
		{"canceled during a body's wait", gemini, nil, true,
			[]entry{{msgRetrying, "body", "retry-after"}, {msgGivingUp, "body", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := logSink()
			clk, _, tr := scripted(replies{tc.first, reply(200)}, append([]Option{WithLogger(log)}, tc.opts...)...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				clk.AfterFunc(time.Millisecond, cancel)
			}
			if resp, _ := tr.RoundTrip(newRequest(t, ctx, "POST", "https://api.example.com/v1/chat", []byte("{}"))); resp != nil {
				resp.Body.Close()
			}
			var got []entry
			for _, e := range logs.All() {
				f := e.ContextMap()
				got = append(got, entry{e.Message, str(f["ask_from"]), str(f["wait_from"])})
				if v, ok := f["ask_from"]; ok {
					assert.IsType(t, "", v, "ask_from is a string")
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// str is v when it is a string, else "".
func str(v any) string {
	s, _ := v.(string)
	return s
}
