package retryhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A dialect is one provider's event stream, in its own words (R26; the
// table in internal/signal/stream.go): the events before the first token,
// which carry no output, the first token, and the rest, to the end.
type dialect struct {
	name    string
	opening string
	token   string
	rest    string
	// failures are its error events: each fails the try as the status it
	// stands for would.
	failures []streamFailure
}

// A streamFailure is an error event that comes before the first token.
type streamFailure struct {
	name   string
	event  string
	header []string // the response's headers, name, value...
	typ    string   // Attempt.StreamError
	class  Class
	wait   time.Duration // the wait before the retry: noJitter's 400 ms, or the provider's ask
}

var ev = retryhttptest.Event

// geminiEvent is a Gemini data-only event, its lines ended with \r\n as
// Gemini's are.
func geminiEvent(data string) string { return "data: " + data + "\r\n\r\n" }

var dialects = []dialect{
	{
		name: "anthropic",
		opening: ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`) +
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
			ev("ping", `{"type": "ping"}`),
		token: ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`),
		rest: ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}`) +
			ev("message_stop", `{"type":"message_stop"}`),
		failures: []streamFailure{
			{"overloaded", ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), nil, "overloaded_error", Transient, 400 * time.Millisecond},
			{"api error", ev("error", `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`), nil, "api_error", Transient, 400 * time.Millisecond},
			{"rate limit", ev("error", `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit."}}`),
				[]string{"Retry-After", "2"}, "rate_limit_error", Throttled, 2 * time.Second},
			{"invalid request", ev("error", `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`), nil, "invalid_request_error", Permanent, 0},
		},
	},
	{
		name:    "openai-chat",
		opening: ev("", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}]}`),
		token:   ev("", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`),
		rest:    ev("", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`) + ev("", "[DONE]"),
		failures: []streamFailure{
			{"server error", ev("", `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`), nil, "server_error", Transient, 400 * time.Millisecond},
			{"rate limit", ev("", `{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM): Limit 500.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`),
				[]string{"Retry-After-Ms", "1500"}, "rate_limit_exceeded", Throttled, 1500 * time.Millisecond},
			{"quota spent", ev("", `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`), nil, "insufficient_quota", Permanent, 0},
		},
	},
	{
		name: "openai-responses",
		opening: ev("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","error":null,"output":[]}}`) +
			ev("response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","error":null,"output":[]}}`) +
			ev("response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`) +
			ev("response.content_part.added", `{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"text":""}}`),
		token: ev("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}`),
		rest:  ev("response.completed", `{"type":"response.completed","sequence_number":5,"response":{"id":"resp_1","object":"response","status":"completed","error":null,"output":[]}}`),
		failures: []streamFailure{
			{"failed", ev("response.failed", `{"type":"response.failed","sequence_number":4,"response":{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"The server had an error."},"output":[]}}`), nil, "server_error", Transient, 400 * time.Millisecond},
			{"error event", ev("error", `{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached.","param":null,"sequence_number":4}`),
				[]string{"Retry-After", "3"}, "rate_limit_exceeded", Throttled, 3 * time.Second},
		},
	},
	{
		name:    "gemini",
		opening: geminiEvent(`{"usageMetadata":{"promptTokenCount":5},"modelVersion":"gemini-2.5-flash"}`),
		token:   geminiEvent(`{"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash"}`),
		rest:    geminiEvent(`{"candidates":[{"content":{"parts":[{"text":"!"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2}}`),
		failures: []streamFailure{
			{"unavailable", geminiEvent(`{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`), nil, "UNAVAILABLE", Transient, 400 * time.Millisecond},
			{"resource exhausted", geminiEvent(`{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}`),
				nil, "RESOURCE_EXHAUSTED", Throttled, 7 * time.Second},
			{"per-day quota", geminiEvent(`{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}`),
				nil, "RESOURCE_EXHAUSTED", Permanent, 0},
			{"deadline exceeded", geminiEvent(`{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`), nil, "DEADLINE_EXCEEDED", Permanent, 0},
			{"a JSON body, not SSE", `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, nil, "UNAVAILABLE", Transient, 400 * time.Millisecond},
		},
	},
}

// healthyTTFT is when a healthy stream's first token comes, after its
// opening: a FirstToken an Attempt can say exactly.
const healthyTTFT = 200 * time.Millisecond

// healthy is d's stream as a provider that is well sends it: the opening at
// once, the first token healthyTTFT later, the rest after it.
func (d dialect) healthy() retryhttptest.Reply {
	return retryhttptest.Stream(
		retryhttptest.Chunk{Data: d.opening},
		retryhttptest.Chunk{After: healthyTTFT, Data: d.token},
		retryhttptest.Chunk{After: 20 * time.Millisecond, Data: d.rest},
	)
}

func (d dialect) whole() string { return d.opening + d.token + d.rest }

// A failureShape is where an error event comes in its stream.
type failureShape struct {
	name  string
	bytes func(d dialect, f streamFailure) string
	split int // bytes a read; 0: the opening, then the error a second later
}

var failureShapes = []failureShape{
	{"after the opening", func(d dialect, f streamFailure) string { return f.opening(d) + f.event }, 0},
	{"as the first bytes", func(_ dialect, f streamFailure) string { return f.event }, 0},
	{"a byte a read", func(d dialect, f streamFailure) string { return f.opening(d) + f.event }, 1},
}

// opening is what comes before f in d's stream: d's opening, or nothing for
// an error that is the whole body (a JSON body, not SSE).
func (f streamFailure) opening(d dialect) string {
	if strings.HasPrefix(f.event, "{") {
		return ""
	}
	return d.opening
}

func (s failureShape) reply(d dialect, f streamFailure) retryhttptest.Reply {
	var r retryhttptest.Reply
	switch body := s.bytes(d, f); {
	case s.split > 0:
		r = retryhttptest.Stream(retryhttptest.Split(body, s.split)...)
	default:
		opening := strings.TrimSuffix(body, f.event)
		r = retryhttptest.Stream(retryhttptest.Chunk{Data: opening}, retryhttptest.Chunk{After: time.Second, Data: f.event})
	}
	for i := 0; i+1 < len(f.header); i += 2 {
		r.Header.Set(f.header[i], f.header[i+1])
	}
	return r
}

func (s failureShape) fits(f streamFailure) bool {
	return !strings.HasPrefix(f.event, "{") || s.name != "after the opening" // a JSON body has no opening
}

// TestStreamErrorFirst: with WithStreamRetry, a 200 event stream whose first
// event is an error fails its try as the status the error stands for (R26,
// R2), whatever the dialect and wherever the reads cut it: a Transient or
// Throttled one is retried after the backoff or the provider's ask, and the
// caller reads the retried stream alone, exactly; a Permanent one is
// handed back whole. The Attempt says the error's type, never its message.
func TestStreamErrorFirst(t *testing.T) {
	for _, d := range dialects {
		for _, f := range d.failures {
			for _, shape := range failureShapes {
				if !shape.fits(f) {
					continue
				}
				t.Run(d.name+"/"+f.name+"/"+shape.name, func(t *testing.T) {
					failing := shape.reply(d, f)
					var seen ttAttempts
					clk, script, tr := scripted(replies{failing, d.healthy()}, WithStreamRetry(0), WithObserver(seen.observe))
					resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", []byte(`{}`)))
					require.NoError(t, err)
					got, err := io.ReadAll(resp.Body)
					require.NoError(t, err)
					require.NoError(t, resp.Body.Close())
					atts := seen.list()
					require.NotEmpty(t, atts)
					first := atts[0]
					assert.Equal(t, f.class, first.Class)
					assert.Equal(t, f.typ, first.StreamError)
					assert.Equal(t, http.StatusOK, first.Status)
					assert.Zero(t, first.FirstToken)
					if f.class == Permanent {
						assert.Equal(t, shape.bytes(d, f), string(got), "handed back whole")
						assert.Equal(t, 1, script.Len())
						assert.Equal(t, Done, first.Outcome)
						return
					}
					assert.Equal(t, d.whole(), string(got), "the retried stream, alone and exact")
					assert.Equal(t, 2, script.Len())
					assertWaits(t, []time.Duration{f.wait}, clk.Waits())
					require.Len(t, atts, 2)
					assert.Equal(t, Retrying, first.Outcome)
					assert.Equal(t, Attempt{Class: Permanent, Outcome: Done, FirstToken: healthyTTFT, Status: 200},
						Attempt{Class: atts[1].Class, Outcome: atts[1].Outcome, FirstToken: atts[1].FirstToken, Status: atts[1].Status, StreamError: atts[1].StreamError})
				})
			}
		}
	}
}

// TestStreamHandedOver: a stream whose first token comes first, or that
// ends or runs 64 KiB with no token, is handed over after one try, its
// bytes exactly the provider's (R26); the Attempt's FirstToken is the time
// from the send to the token, on the transport's clock, 0 with none.
func TestStreamHandedOver(t *testing.T) {
	type tc struct {
		name       string
		reply      retryhttptest.Reply
		body       string
		firstToken time.Duration
	}
	var tests []tc
	for _, d := range dialects {
		tests = append(tests,
			tc{d.name + "/a token first", d.healthy(), d.whole(), healthyTTFT},
			tc{d.name + "/a token a byte a read", retryhttptest.Stream(retryhttptest.Split(d.whole(), 1)...), d.whole(), 0},
			tc{d.name + "/ends with no token", retryhttptest.Stream(retryhttptest.Chunk{Data: d.opening}), d.opening, 0},
		)
	}
	pings := ": keep-alive\n\n" + ev("ping", `{"type": "ping"}`) + ":\n\n"
	anthropic := dialects[0]
	noToken := strings.Repeat(": padding, not a token\n", 3000) // 69,000 bytes of comments
	tests = append(tests,
		tc{"comments and pings before the first token", retryhttptest.Stream(
			retryhttptest.Chunk{Data: pings},
			retryhttptest.Chunk{After: time.Second, Data: pings + anthropic.opening},
			retryhttptest.Chunk{After: time.Second, Data: anthropic.token + anthropic.rest},
		), pings + pings + anthropic.whole(), 2 * time.Second},
		tc{"64 KiB with no token", retryhttptest.Stream(retryhttptest.Split(noToken, 1000)...), noToken, 0},
		tc{"data that is not JSON: a token", retryhttptest.Stream(retryhttptest.Chunk{After: time.Second, Data: ev("", "hello")}), ev("", "hello"), time.Second},
		tc{"an empty stream", retryhttptest.Stream(), "", 0},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen ttAttempts
			_, script, tr := scripted(replies{tt.reply, reply(500)}, WithStreamRetry(5*time.Second), WithObserver(seen.observe))
			resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, tt.body, string(got))
			assert.Equal(t, 1, script.Len())
			atts := seen.list()
			require.Len(t, atts, 1)
			assert.Equal(t, tt.firstToken, atts[0].FirstToken)
			assert.Empty(t, atts[0].StreamError)
			assert.Equal(t, Done, atts[0].Outcome)
		})
	}
}

// TestStreamFirstTokenTimeout: with firstToken > 0, a stream with no token
// that long after its try was sent is cut, and the try is Transient as a
// try timeout (R26, R13): its error satisfies os.IsTimeout, and the
// retry's stream is the caller's. Retries run out: an *Error that is a
// timeout. firstToken <= 0 waits for the token as long as the caller's
// context lets it.
func TestStreamFirstTokenTimeout(t *testing.T) {
	d := dialects[0]
	stalled := retryhttptest.Stream(
		retryhttptest.Chunk{Data: d.opening},
		retryhttptest.Chunk{After: 30 * time.Second, Data: d.token + d.rest},
	)
	t.Run("cut at 2 s, then the retry", func(t *testing.T) {
		var seen ttAttempts
		clk, script, tr := scripted(replies{stalled, d.healthy()}, WithStreamRetry(2*time.Second), WithObserver(seen.observe))
		start := clk.Now()
		resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
		require.NoError(t, err)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, d.whole(), string(got))
		assert.Equal(t, 2, script.Len())
		reqs := script.Requests()
		assert.Equal(t, 2*time.Second+400*time.Millisecond, reqs[1].At.Sub(start), "cut at 2 s, retried 400 ms later")
		atts := seen.list()
		require.Len(t, atts, 2)
		assert.Equal(t, Transient, atts[0].Class)
		assert.True(t, os.IsTimeout(atts[0].Err), "%v is a timeout", atts[0].Err)
		assert.Zero(t, atts[0].Status)
		assert.Equal(t, healthyTTFT, atts[1].FirstToken)
	})
	t.Run("every try cut: a timeout error", func(t *testing.T) {
		_, script, tr := scripted(replies{stalled}, WithStreamRetry(2*time.Second), WithMaxRetries(1))
		resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
		require.Nil(t, resp)
		var rerr *Error
		require.ErrorAs(t, err, &rerr)
		assert.Equal(t, Exhausted, rerr.Reason)
		assert.True(t, os.IsTimeout(err))
		assert.ErrorContains(t, err, "no first token within 2s")
		assert.Equal(t, 2, script.Len())
	})
	t.Run("firstToken 0 waits", func(t *testing.T) {
		var seen ttAttempts
		_, script, tr := scripted(replies{stalled}, WithStreamRetry(0), WithObserver(seen.observe))
		resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 1, script.Len())
		assert.Equal(t, 30*time.Second, seen.list()[0].FirstToken)
	})
	t.Run("firstToken 0, the caller's deadline", func(t *testing.T) {
		clk, script, tr := scripted(replies{retryhttptest.Stream(retryhttptest.Chunk{Data: d.opening}).Open()}, WithStreamRetry(0))
		ctx, cancel := clk.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, "https://api.example.com/v1/stream", nil))
		require.Nil(t, resp)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 1, script.Len())
	})
}

// TestStreamCallerCancel: the caller's context ending during the read ahead
// ends the call as it would during a try (R26, R9): the first try's error
// as it is, a retry's in an *Error; nothing more is sent.
func TestStreamCallerCancel(t *testing.T) {
	d := dialects[0]
	stalled := retryhttptest.Stream(retryhttptest.Chunk{Data: d.opening}, retryhttptest.Chunk{After: 30 * time.Second, Data: d.token})
	overloaded := retryhttptest.Stream(retryhttptest.Chunk{Data: d.opening + d.failures[0].event})
	for _, tt := range []struct {
		name    string
		replies replies
		tries   int
	}{
		{"the first try", replies{stalled}, 1},
		{"a retry", replies{overloaded, stalled}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk, script, tr := scripted(tt.replies, WithStreamRetry(10*time.Second))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			clk.AfterFunc(5*time.Second, cancel)
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, "https://api.example.com/v1/stream", nil))
			require.Nil(t, resp)
			require.ErrorIs(t, err, context.Canceled)
			var rerr *Error
			if tt.tries == 1 {
				assert.Equal(t, context.Canceled, err, "the first try's error, as it is")
			} else if assert.ErrorAs(t, err, &rerr) {
				assert.Equal(t, Done, rerr.Reason)
				assert.Equal(t, 2, rerr.Tries)
			}
			assert.Equal(t, tt.tries, script.Len())
		})
	}
}

// TestStreamBudget: a rate-limit error first, on the public tier (a
// Budget), fails fast with ErrRateLimited when the provider's ask does not
// fit (R8, R26): at once, after one try, the ask in Error.RetryAfter and
// Budget.Err, from a header or from the error's RetryInfo.
func TestStreamBudget(t *testing.T) {
	anthropicLimit := dialects[0].failures[2]
	geminiLimit := dialects[3].failures[1]
	withRetryAfter := retryhttptest.Stream(retryhttptest.Chunk{Data: anthropicLimit.event})
	withRetryAfter.Header.Set("Retry-After", "30")
	for _, tt := range []struct {
		name  string
		reply retryhttptest.Reply
		ask   time.Duration
	}{
		{"anthropic, Retry-After 30", withRetryAfter, 30 * time.Second},
		{"gemini, retryDelay 45s", retryhttptest.Stream(retryhttptest.Chunk{Data: strings.Replace(geminiLimit.event, `"7s"`, `"45s"`, 1)}), 45 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk, script, tr := scripted(replies{tt.reply, dialects[0].healthy()}, WithStreamRetry(2*time.Second))
			budget := NewBudget(PublicTierMaxWait)
			resp, err := tr.RoundTrip(newRequest(t, WithBudget(t.Context(), budget), http.MethodPost, "https://api.example.com/v1/stream", nil))
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrRateLimited)
			var rerr *Error
			require.ErrorAs(t, err, &rerr)
			assert.Equal(t, Error{Tries: 1, Status: 200, RetryAfter: tt.ask, Reason: OutOfTime, Err: ErrRateLimited}, *rerr)
			assert.Same(t, rerr, budget.Err())
			assert.Equal(t, 1, script.Len())
			assert.Empty(t, clk.Waits())
		})
	}
}

// TestStreamOpensCircuit: five streams that fail overloaded, in a row, open
// their key's circuit (R25, R26: an overloaded stream is a failure, not the
// sign of life its 200 would be), and the next call is refused, sending
// nothing.
func TestStreamOpensCircuit(t *testing.T) {
	d := dialects[0]
	overloaded := retryhttptest.Stream(retryhttptest.Chunk{Data: d.opening + d.failures[0].event})
	cd := NewCooldown(nil, WithCircuit(Circuit{Failures: 5}))
	_, script, tr := scripted(replies{overloaded}, WithStreamRetry(2*time.Second), WithCooldown(cd), WithMaxRetries(0))
	for i := range 5 {
		resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
		require.NoError(t, err, "call %d", i+1)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, d.opening+d.failures[0].event, string(got), "retries run out: handed back whole")
	}
	assert.True(t, cd.Down("https://api.example.com"))
	_, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.Equal(t, 5, script.Len())
}

// TestStreamRateLimitHoldsKey: a rate-limit error first holds the key of a
// Cooldown as a 429 would (R17, R26): the next call waits out the ask.
func TestStreamRateLimitHoldsKey(t *testing.T) {
	d := dialects[0]
	limited := retryhttptest.Stream(retryhttptest.Chunk{Data: d.failures[2].event})
	limited.Header.Set("Retry-After", "20")
	cd := NewCooldown(nil)
	clk, script, tr := scripted(replies{limited, d.healthy()}, WithStreamRetry(2*time.Second), WithCooldown(cd), WithMaxRetries(0))
	start := clk.Now()
	resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, start.Add(20*time.Second), cd.Until("https://api.example.com"))
	resp, err = tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
	require.NoError(t, err)
	resp.Body.Close()
	reqs := script.Requests()
	require.Len(t, reqs, 2)
	assert.GreaterOrEqual(t, reqs[1].At.Sub(start), 19*time.Second, "held until the ask's last second")
}

// TestStreamLogs: the retry entry and the give-up entry of a try whose
// stream began with an error event carry stream_error, its type (R14, R26).
func TestStreamLogs(t *testing.T) {
	d := dialects[0]
	overloaded := retryhttptest.Stream(retryhttptest.Chunk{Data: d.opening + d.failures[0].event})
	log, logs := logSink()
	_, _, tr := scripted(replies{overloaded}, WithStreamRetry(2*time.Second), WithLogger(log), WithMaxRetries(1))
	resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream?key=secret", nil))
	require.NoError(t, err)
	resp.Body.Close()
	entries := logs.All()
	require.Len(t, entries, 2)
	for i, msg := range []string{msgRetrying, msgGivingUp} {
		assert.Equal(t, msg, entries[i].Message)
		f := entries[i].ContextMap()
		assert.Equal(t, "overloaded_error", f["stream_error"])
		assert.Equal(t, int64(200), f["status"])
		assert.NotContains(t, entries[i].Message+strings.Join(fieldValues(f), " "), "Overloaded", "the type, never the message")
	}
}

func fieldValues(f map[string]any) []string {
	var s []string
	for k, v := range f {
		if str, ok := v.(string); ok {
			s = append(s, k+"="+str)
		}
	}
	return s
}

// TestStreamLeftAlone: a response that is not a 2xx event stream is not
// read with WithStreamRetry (a header check), nor is an event stream the
// server compressed for the caller, nor any stream without the option.
func TestStreamLeftAlone(t *testing.T) {
	d := dialects[0]
	overloaded := d.opening + d.failures[0].event
	gzipped := retryhttptest.Stream(retryhttptest.Chunk{Data: overloaded})
	gzipped.Header.Set("Content-Encoding", "gzip")
	for _, tt := range []struct {
		name  string
		reply retryhttptest.Reply
		opts  []Option
	}{
		{"JSON", retryhttptest.Reply{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: overloaded}, []Option{WithStreamRetry(time.Second)}},
		{"a 3xx event stream", func() retryhttptest.Reply {
			r := retryhttptest.Stream(retryhttptest.Chunk{Data: overloaded})
			r.Status = 304
			return r
		}(), []Option{WithStreamRetry(time.Second)}},
		{"text/event-streams", func() retryhttptest.Reply {
			r := retryhttptest.Stream(retryhttptest.Chunk{Data: overloaded})
			r.Header.Set("Content-Type", "text/event-streams")
			return r
		}(), []Option{WithStreamRetry(time.Second)}},
		{"gzip", gzipped, []Option{WithStreamRetry(time.Second)}},
		{"without the option", retryhttptest.Stream(retryhttptest.Chunk{Data: overloaded}), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var reads int
			base := &spy{script: retryhttptest.NewScript(tt.reply), edit: func(_ int, resp *http.Response) {
				resp.Body = readCounter{resp.Body, &reads}
			}}
			tr := New(base, append([]Option{WithClock(newClock())}, tt.opts...)...)
			resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
			require.NoError(t, err)
			assert.Zero(t, reads, "not read before it was handed back")
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, overloaded, string(got))
			assert.Len(t, base.sent(), 1)
		})
	}
}

type readCounter struct {
	io.ReadCloser
	n *int
}

func (r readCounter) Read(p []byte) (int, error) {
	*r.n++
	return r.ReadCloser.Read(p)
}

// TestStreamReadErrorBeforeToken: a stream whose read fails before its
// first token (the connection reset) is a try that failed with that
// error, retried as a transport error would be (R26, R2); one that fails
// after its first token is handed over, the error after the bytes (R6).
func TestStreamReadErrorBeforeToken(t *testing.T) {
	d := dialects[1]
	broken := retryhttptest.Stream(retryhttptest.Chunk{Data: d.opening}).Cut(io.ErrUnexpectedEOF)
	_, script, tr := scripted(replies{broken, d.healthy()}, WithStreamRetry(time.Second))
	resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, d.whole(), string(got))
	assert.Equal(t, 2, script.Len())

	_, script, tr = scripted(replies{retryhttptest.Stream(retryhttptest.Chunk{Data: d.opening + d.token}).Cut(io.ErrUnexpectedEOF)}, WithStreamRetry(time.Second))
	resp, err = tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
	require.NoError(t, err)
	got, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, d.opening+d.token, string(got))
	assert.True(t, errors.Is(err, io.ErrUnexpectedEOF))
	assert.Equal(t, 1, script.Len())
}

// TestStreamRateLimitHitsItsLimitOnly: a rate-limit error first paces the
// limit its payload names, and no other, as the same error in a 429's body
// would (R23, R26).
func TestStreamRateLimitHitsItsLimitOnly(t *testing.T) {
	for _, tc := range []struct {
		limit     string
		hit, miss laneID
	}{{"tokens", laneTokens, laneRequests}, {"requests", laneRequests, laneTokens}} {
		t.Run(tc.limit, func(t *testing.T) {
			limited := retryhttptest.Stream(retryhttptest.Chunk{Data: ev("",
				`{"error":{"message":"Rate limit reached for gpt-4o on `+tc.limit+` per min","type":"`+tc.limit+`","code":"rate_limit_exceeded"}}`)})
			cd := NewCooldown(nil)
			_, _, tr := scripted(replies{limited, dialects[1].healthy()}, WithStreamRetry(time.Second), WithCooldown(cd))
			resp, err := tr.RoundTrip(postOf(t.Context(), 4000))
			require.NoError(t, err)
			resp.Body.Close()
			require.NotNil(t, cd.entry())
			st := cd.stateOf()
			assert.Positive(t, st.Lane(tc.hit).Per, "the lane it hit is paced")
			assert.Zero(t, st.Lane(tc.miss).Per, "the other is not")
		})
	}
}

// TestStreamOverloadedIsNoSuccess: to a Cooldown, an overloaded stream on a
// paced key is the failure its status stands for (R26), not the success
// its 200 would be: the rate it is learning does not grow, as it does on a
// stream that brings its token.
func TestStreamOverloadedIsNoSuccess(t *testing.T) {
	d := dialects[1]
	overloaded := retryhttptest.Stream(retryhttptest.Chunk{Data: d.opening + d.failures[0].event})
	for _, tc := range []struct {
		name  string
		reply retryhttptest.Reply
		grows bool
	}{{"overloaded", overloaded, false}, {"a token", d.healthy(), true}} {
		t.Run(tc.name, func(t *testing.T) {
			cd := NewCooldown(nil)
			_, _, tr := scripted(replies{tokens429("requests"), okReply, tc.reply}, WithStreamRetry(time.Second), WithCooldown(cd), WithMaxRetries(1))
			resp, err := tr.RoundTrip(postOf(t.Context(), 100))
			require.NoError(t, err)
			resp.Body.Close()
			per := func() float64 { return cd.stateOf().Lane(laneRequests).Per }
			before := per()
			require.Positive(t, before, "the 429 paced the key")
			resp, err = tr.RoundTrip(postOf(t.Context(), 100))
			require.NoError(t, err)
			resp.Body.Close()
			if tc.grows {
				assert.Less(t, per(), before, "a success grows the rate")
			} else {
				assert.Equal(t, before, per(), "an overloaded stream does not")
			}
		})
	}
}

// TestStreamBodyDeafToContext: a body that does not watch the request's
// context (a base of one's own) is closed when the first token's time runs
// out, or when the caller's context ends, and its Read ends with it: the
// read ahead never outlives the try (R26).
func TestStreamBodyDeafToContext(t *testing.T) {
	for _, tc := range []struct {
		name       string
		firstToken time.Duration
		cancelAt   time.Duration
	}{{"first token", 2 * time.Second, 0}, {"caller", 0, 3 * time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			start := clk.Now()
			var pipes []*io.PipeWriter
			base := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
				pr, pw := io.Pipe()
				pipes = append(pipes, pw)
				go func() { _, _ = pw.Write([]byte(dialects[0].opening)) }() // then nothing: a Read waits until the pipe is closed
				return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, Request: req}, nil
			})
			tr := New(base, WithClock(clk), WithStreamRetry(tc.firstToken), WithMaxRetries(0))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan struct{})
			go func() { // real time: nothing moves the clock while a pipe is read
				for {
					select {
					case <-done:
						return
					case <-time.After(5 * time.Millisecond):
					}
					if tc.cancelAt > 0 && clk.Since(start) >= tc.cancelAt {
						cancel()
					}
					clk.Add(100 * time.Millisecond)
				}
			}()
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, "https://api.example.com/v1/stream", nil))
			close(done)
			require.Nil(t, resp)
			require.Error(t, err)
			if tc.cancelAt > 0 {
				assert.Equal(t, context.Canceled, err)
			} else {
				assert.True(t, os.IsTimeout(err), "%v", err)
			}
			for _, pw := range pipes {
				_, werr := pw.Write([]byte("x"))
				assert.ErrorIs(t, werr, io.ErrClosedPipe, "the body was closed")
			}
		})
	}
}

// What only a real connection shows of streams (R26): over loopback, with
// HTTP/1.1 and HTTP/2, the bytes the caller reads of a stream handed over
// are exactly those the provider sent on that try, by hash; a stream cut
// for want of a first token, or by the caller, is ended on the wire.

// A write is one part of a stream the test server sends: its bytes, after
// a pause, flushed.
type write struct {
	after time.Duration
	data  string
}

// streamServer answers try n with plan[n] (past the end, the last), as
// text/event-stream, flushing each write, and keeps the SHA-256 of what
// each try sent and whether each ended early (its request's context done
// before its last write).
type streamServer struct {
	*httptest.Server
	plan [][]write

	mu     sync.Mutex
	sent   [][32]byte
	cut    []bool
	served chan struct{} // a value each time a handler returns
}

func newStreamServer(t *testing.T, http2 bool, plan ...[]write) *streamServer {
	t.Helper()
	s := &streamServer{plan: plan, served: make(chan struct{}, 64)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if http2 {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (s *streamServer) serve(w http.ResponseWriter, r *http.Request) {
	defer func() { s.served <- struct{}{} }()
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	n := len(s.sent)
	s.sent, s.cut = append(s.sent, [32]byte{}), append(s.cut, false)
	s.mu.Unlock()
	writes := s.plan[min(n, len(s.plan)-1)]
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	h := sha256.New()
	defer func() {
		s.mu.Lock()
		copy(s.sent[n][:], h.Sum(nil))
		s.mu.Unlock()
	}()
	for _, wr := range writes {
		if wr.after > 0 {
			select {
			case <-time.After(wr.after):
			case <-r.Context().Done():
				s.mu.Lock()
				s.cut[n] = true
				s.mu.Unlock()
				return
			}
		}
		if _, err := io.WriteString(w, wr.data); err != nil {
			return
		}
		h.Write([]byte(wr.data))
		w.(http.Flusher).Flush()
	}
}

// tries returns the hash each try sent and whether it ended early, once
// every handler has returned (n of them).
func (s *streamServer) tries(t *testing.T, n int) ([][32]byte, []bool) {
	t.Helper()
	for range n {
		select {
		case <-s.served:
		case <-time.After(10 * time.Second):
			t.Fatalf("the server's handlers did not all return")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][32]byte(nil), s.sent...), append([]bool(nil), s.cut...)
}

// bytewise sends data a byte a flush.
func bytewise(data string) []write {
	ws := make([]write, len(data))
	for i := range data {
		ws[i] = write{data: data[i : i+1]}
	}
	return ws
}

func TestStreamBytesOverLoopback(t *testing.T) {
	d := dialects[0]
	overloaded := d.opening + d.failures[0].event
	var big strings.Builder
	for big.Len() < 1<<20 {
		big.WriteString(ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"token token token"}}`))
	}
	comments := strings.Repeat(": not a token\n", 5000) // 70,000 bytes
	healthy := []write{{data: d.opening}, {after: 5 * time.Millisecond, data: d.token}, {data: d.rest}}
	tests := []struct {
		name  string
		plan  [][]write
		tries int
	}{
		{"a token first", [][]write{healthy}, 1},
		{"an overloaded stream, then a token first", [][]write{{{data: overloaded}}, healthy}, 2},
		{"a byte a flush", [][]write{bytewise(d.whole())}, 1},
		{"ends with no token", [][]write{{{data: d.opening}}}, 1},
		{"64 KiB with no token", [][]write{{{data: comments}, {data: d.token + d.rest}}}, 1},
		{"1 MiB after the first token", [][]write{{{data: d.opening + d.token}, {data: big.String()}, {data: d.rest}}}, 1},
		{"an error split across flushes, then a token", [][]write{bytewise(overloaded), healthy}, 2},
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, tt := range tests {
			t.Run(proto+"/"+tt.name, func(t *testing.T) {
				s := newStreamServer(t, proto == "HTTP/2.0", tt.plan...)
				base := s.Client().Transport.(*http.Transport)
				defer base.CloseIdleConnections()
				tr := New(base, WithStreamRetry(5*time.Second), WithBackoff(Backoff{Base: time.Millisecond}))
				resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, s.URL+"/v1/messages", []byte(`{"stream":true}`)))
				require.NoError(t, err)
				assert.Equal(t, proto, resp.Proto)
				h := sha256.New()
				_, err = io.Copy(h, resp.Body)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				sent, _ := s.tries(t, tt.tries)
				require.Len(t, sent, tt.tries)
				assert.Equal(t, sent[tt.tries-1][:], h.Sum(nil), "the caller's bytes are the last try's, exactly")
			})
		}
	}
}

// TestStreamCutOverLoopback: a stream cut for want of a first token, and
// one whose caller gives up during the read ahead, are ended on the wire:
// the server's handler sees its request end, over HTTP/1.1 and HTTP/2, on
// the first try (the caller's own request: no context of the transport's)
// and on a retry.
func TestStreamCutOverLoopback(t *testing.T) {
	d := dialects[1]
	stalled := []write{{data: d.opening}, {after: time.Minute, data: d.token}}
	healthy := []write{{data: d.opening}, {after: 5 * time.Millisecond, data: d.token}, {data: d.rest}}
	overloaded := []write{{data: d.opening + d.failures[0].event}}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto+"/first token", func(t *testing.T) {
			s := newStreamServer(t, proto == "HTTP/2.0", stalled, healthy)
			base := s.Client().Transport.(*http.Transport)
			defer base.CloseIdleConnections()
			tr := New(base, WithStreamRetry(100*time.Millisecond), WithBackoff(Backoff{Base: time.Millisecond}))
			start := time.Now()
			resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, s.URL, nil))
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, d.whole(), string(got))
			assert.Less(t, time.Since(start), 5*time.Second)
			_, cut := s.tries(t, 2)
			assert.Equal(t, []bool{true, false}, cut, "the stalled try ended on the wire")
		})
		for _, tt := range []struct {
			name  string
			plan  [][]write
			tries int
		}{
			{"caller on the first try", [][]write{stalled}, 1},
			{"caller on a retry", [][]write{overloaded, stalled}, 2},
		} {
			t.Run(proto+"/"+tt.name, func(t *testing.T) {
				s := newStreamServer(t, proto == "HTTP/2.0", tt.plan...)
				base := s.Client().Transport.(*http.Transport)
				defer base.CloseIdleConnections()
				tr := New(base, WithStreamRetry(0), WithBackoff(Backoff{Base: time.Millisecond}))
				ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
				defer cancel()
				resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, s.URL, nil))
				require.Nil(t, resp)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				_, cut := s.tries(t, tt.tries)
				assert.True(t, cut[tt.tries-1], "the try ended on the wire")
			})
		}
	}
}

// FuzzStreamRetry: whatever the bytes of a 200 event stream and however
// the reads cut them, the read ahead (R26) never panics, and the caller
// reads exactly the bytes of the try handed over: the stream itself when a
// token, its end, 64 KiB or a Permanent error came first (one try), or the
// retry's healthy stream after an error event that is retried, as the
// stream reader's verdict on the whole bytes says. `go test -run '^$'
// -fuzz '^FuzzStreamRetry$' -fuzztime 60000x` searches for more.
func FuzzStreamRetry(f *testing.F) {
	for _, d := range dialects {
		f.Add([]byte(d.whole()), []byte{5, 1, 255})
		for _, fail := range d.failures {
			f.Add([]byte(fail.opening(d)+fail.event), []byte{0})
			f.Add([]byte(fail.opening(d)+fail.event+d.rest), []byte{3, 200})
		}
	}
	for _, seed := range []string{"", ":\n\n", "data:\r\r", "{", "event: error\ndata: x\n\n", "\xef\xbb\xbf{\"error\":{}}"} {
		f.Add([]byte(seed), []byte{1})
	}
	healthy := dialects[0].whole()
	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		var chunks []retryhttptest.Chunk
		for i, c := 0, 0; c < len(body); i++ {
			n := 1
			if len(sizes) > 0 {
				n += int(sizes[i%len(sizes)])
			}
			n = min(n, len(body)-c)
			chunks = append(chunks, retryhttptest.Chunk{Data: string(body[c : c+n])})
			c += n
		}
		var seen ttAttempts
		_, script, tr := scripted(replies{retryhttptest.Stream(chunks...), retryhttptest.Stream(retryhttptest.Chunk{Data: healthy})},
			WithStreamRetry(0), WithObserver(seen.observe))
		resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, "https://api.example.com/v1/stream", nil))
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())

		var s signal.Stream
		v := s.Feed(body)
		if v.Kind == signal.StreamMore {
			v = s.End()
		}
		atts := seen.list()
		if v.Kind == signal.StreamError && streamClass(v.Status) != Permanent && !signal.ErrorBody(v.Payload).Exhausted &&
			(!signal.ErrorBody(v.Payload).DeadlineExceeded || v.Status != http.StatusGatewayTimeout) {
			require.Equal(t, 2, script.Len(), "%q: retried", body)
			require.Equal(t, healthy, string(got), "the retry's stream, exactly")
			require.Equal(t, v.Type, atts[0].StreamError)
			return
		}
		require.Equal(t, 1, script.Len(), "%q: handed over", body)
		require.True(t, bytes.Equal(body, got), "%q: the caller reads exactly the stream's bytes, read %q", body, got)
	})
}
