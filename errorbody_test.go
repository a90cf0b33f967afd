package retryhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/signal"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Real error bodies, as the providers send them with a 429.
const (
	geminiPerMinute = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"15"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"45.837906927s"}]}}`
	geminiPerDay    = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"200"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"45.837906927s"}]}}`
	openAIQuota     = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openAIRate      = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-1 on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	google504       = `{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`
)

// retryInfo is a Gemini body whose only detail is a RetryInfo with delay.
func retryInfo(delay string) string {
	return `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":` + delay + `}]}}`
}

// errorBodyTest is a row of TestParseErrorBody.
type errorBodyTest struct {
	name string
	body string
	want BodyHint
}

var errorBodyTests = []errorBodyTest{
	{"gemini per minute", geminiPerMinute, BodyHint{RetryAfter: gemini45}},
	{"gemini per day", geminiPerDay, BodyHint{RetryAfter: gemini45, Exhausted: true}},
	{"vertex array", `[` + geminiPerMinute + `]`, BodyHint{RetryAfter: gemini45}},
	{"vertex array of several: combined", `[` + retryInfo(`"3s"`) + `,` + geminiPerDay + `,` + retryInfo(`"50s"`) + `]`, BodyHint{RetryAfter: 50 * time.Second, Exhausted: true}},
	{"vertex array with junk elements", `[1,"x",null,[],{},{"error":null},` + retryInfo(`"7s"`) + `]`, BodyHint{RetryAfter: 7 * time.Second}},
	{"empty array", `[]`, BodyHint{}},
	{"nested array is not an envelope", `[[` + retryInfo(`"7s"`) + `]]`, BodyHint{}},
	{"openai insufficient_quota", openAIQuota, BodyHint{Exhausted: true}},
	{"openai code only", `{"error":{"code":"insufficient_quota","type":"requests"}}`, BodyHint{Exhausted: true}},
	{"openai type only", `{"error":{"code":null,"type":"insufficient_quota"}}`, BodyHint{Exhausted: true}},
	{"openai rate limit is not exhausted", openAIRate, BodyHint{}},
	{"openai other spelling is not matched", `{"error":{"code":"INSUFFICIENT_QUOTA"}}`, BodyHint{}},
	{"openai message is not read", `{"error":{"message":"insufficient_quota","code":"x"}}`, BodyHint{}},
	{"openai outside the envelope", `{"code":"insufficient_quota","type":"insufficient_quota"}`, BodyHint{}},

	// DEADLINE_EXCEEDED is read apart (parseErrorBody): the BodyHint has no field for it.
	{"google 504 DEADLINE_EXCEEDED: nothing to wait for", google504, BodyHint{}},
	{"vertex 504 DEADLINE_EXCEEDED with a retryDelay: the delay", `[` + google504 + `,` + retryInfo(`"3s"`) + `]`, BodyHint{RetryAfter: 3 * time.Second}},

	// retryDelay.
	{"whole seconds", retryInfo(`"30s"`), BodyHint{RetryAfter: 30 * time.Second}},
	{"zero", retryInfo(`"0s"`), BodyHint{}},
	{"nanoseconds", retryInfo(`"0.000000001s"`), BodyHint{RetryAfter: 1}},
	{"below a nanosecond is dropped", retryInfo(`"1.0000000009s"`), BodyHint{RetryAfter: time.Second}},
	{"several: the largest", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"5s"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"9s"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}`, BodyHint{RetryAfter: 9 * time.Second}},
	{"negative ignored", retryInfo(`"-5s"`), BodyHint{}},
	{"exponent ignored", retryInfo(`"1e400s"`), BodyHint{}},
	{"letters ignored", retryInfo(`"abc"`), BodyHint{}},
	{"missing s ignored", retryInfo(`"45"`), BodyHint{}},
	{"other unit ignored", retryInfo(`"45ms"`), BodyHint{}},
	{"just s ignored", retryInfo(`"s"`), BodyHint{}},
	{"leading dot ignored", retryInfo(`".5s"`), BodyHint{}},
	{"inner space ignored", retryInfo(`"4 5s"`), BodyHint{}},
	{"surrounding space ignored", retryInfo(`" 45s"`), BodyHint{}},
	{"number ignored", retryInfo(`45`), BodyHint{}},
	{"object ignored", retryInfo(`{"seconds":45,"nanos":0}`), BodyHint{}},
	{"null ignored", retryInfo(`null`), BodyHint{}},
	{"escaped string", retryInfo(`"\u0034\u0035s"`), BodyHint{RetryAfter: 45 * time.Second}},
	{"nine thousand digits saturate", retryInfo(`"` + strings.Repeat("9", 9000) + `s"`), BodyHint{RetryAfter: maxDuration}},
	{"just past the largest Duration saturates", retryInfo(`"9223372036.854775808s"`), BodyHint{RetryAfter: maxDuration}},
	{"largest Duration", retryInfo(`"9223372036.854775807s"`), BodyHint{RetryAfter: maxDuration}},
	{"RetryInfo without its prefix", `{"error":{"details":[{"@type":"google.rpc.RetryInfo","retryDelay":"4s"}]}}`, BodyHint{RetryAfter: 4 * time.Second}},
	{"RetryInfo by another @type is not read", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfoX","retryDelay":"4s"}]}}`, BodyHint{}},
	{"retryDelay without @type is not read", `{"error":{"details":[{"retryDelay":"4s"}]}}`, BodyHint{}},
	{"retryDelay outside details is not read", `{"error":{"retryDelay":"4s"},"retryDelay":"4s"}`, BodyHint{}},

	// QuotaFailure.
	{"per-day among others", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"},{"quotaId":"GenerateContentInputTokensPerModelPerDay-FreeTier"}]}]}}`, BodyHint{Exhausted: true}},
	{"per-day in quotaMetric only is not read", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"x/PerDay","quotaId":"PerMinute"}]}]}}`, BodyHint{}},
	{"per-day outside a QuotaFailure is not read", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.Help","violations":[{"quotaId":"PerDay"}]}]}}`, BodyHint{}},
	{"no violations", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"}]}}`, BodyHint{}},

	// Wrong types leave out only their own field.
	{"wrong types everywhere", `{"error":{"code":429,"type":123,"status":["x"],"details":[
			{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":45},
			{"@type":5,"retryDelay":"99s"}, "str", null, 7, [],
			{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":7},null,"PerDay",{"quotaId":"XPerDayX"}]},
			{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":{"quotaId":"PerDay"}},
			{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`, BodyHint{RetryAfter: 3 * time.Second, Exhausted: true}},
	{"error is a string", `{"error":"insufficient_quota"}`, BodyHint{}},
	{"details is an object", `{"error":{"details":{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}}}`, BodyHint{}},
	{"huge numbers", `{"error":{"code":1e400,"size":-123456789012345678901234567890,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","n":1e999999,"retryDelay":"3s"}]}}`, BodyHint{RetryAfter: 3 * time.Second}},
	{"extra fields", `{"id":"x","error":{"x":{"y":[1,2,{"z":null}]},"code":"insufficient_quota"},"extra":true}`, BodyHint{Exhausted: true}},
	{"duplicate keys: the last wins, as encoding/json", `{"error":{"code":"insufficient_quota","code":"other"}}`, BodyHint{}},

	// Not an envelope, or not JSON.
	{"empty", ``, BodyHint{}},
	{"blank", " \n\t", BodyHint{}},
	{"null", `null`, BodyHint{}},
	{"number", `429`, BodyHint{}},
	{"string", `"insufficient_quota"`, BodyHint{}},
	{"html", `<html><body>429 Too Many Requests</body></html>`, BodyHint{}},
	{"plain text", `Too Many Requests`, BodyHint{}},
	{"truncated", geminiPerDay[:len(geminiPerDay)-3], BodyHint{}},
	{"trailing garbage", geminiPerDay + "}}}garbage\x00\xff", BodyHint{RetryAfter: gemini45, Exhausted: true}},
	{"a second value is not read", retryInfo(`"3s"`) + openAIQuota, BodyHint{RetryAfter: 3 * time.Second}},
	{"leading whitespace", "\n\t " + openAIQuota, BodyHint{Exhausted: true}},
	{"byte order mark", "\xef\xbb\xbf" + openAIQuota, BodyHint{}},
	{"invalid UTF-8 in strings", "{\"error\":{\"message\":\"\xff\xfe\xc0\",\"code\":\"insufficient_quota\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"2s\",\"x\":\"\xed\xa0\x80\"}]}}", BodyHint{RetryAfter: 2 * time.Second, Exhausted: true}},
	{"invalid UTF-8 inside the value read", "{\"error\":{\"code\":\"insufficient_quota\xff\"}}", BodyHint{}},
	{"invalid UTF-8 outside strings", "{\xff\"error\":{}}", BodyHint{}},
}

func TestParseErrorBody(t *testing.T) {
	for _, tt := range errorBodyTests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ParseErrorBody([]byte(tt.body)))
		})
	}
}

// TestParseErrorBodyHostile: inputs built to hurt a parser end in the zero
// hint, or in what could be read before the damage, and never in a panic
// or a stack overflow.
func TestParseErrorBodyHostile(t *testing.T) {
	const deep = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "{}[]\",:0123456789.-eE truefalsnul\\\x00\xff"
	garbage := make([]byte, 10<<20)
	for i := range garbage {
		garbage[i] = alphabet[rng.IntN(len(alphabet))]
	}
	junkArray := func() []byte { // 10 MiB of valid JSON, the envelope last
		var b bytes.Buffer
		b.WriteString("[")
		for b.Len() < 10<<20 {
			b.WriteString(`{"error":{"details":[{"@type":5},{"x":[1,2,3]}]},"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},`)
		}
		b.WriteString(retryInfo(`"8s"`) + "]")
		return b.Bytes()
	}
	tests := []struct {
		name string
		body []byte
		want BodyHint
	}{
		{"100k nested arrays", []byte(strings.Repeat("[", deep) + strings.Repeat("]", deep)), BodyHint{}},
		{"100k nested arrays, unclosed", []byte(strings.Repeat("[", deep)), BodyHint{}},
		{"100k nested objects", []byte(strings.Repeat(`{"error":`, deep) + "1" + strings.Repeat("}", deep)), BodyHint{}},
		{"100k nested after a valid envelope", []byte(`{"error":{"code":"insufficient_quota"},"x":` + strings.Repeat("[", deep) + strings.Repeat("]", deep) + "}"), BodyHint{}},
		{"9000 nested beside a valid envelope", []byte(`{"error":{"code":"insufficient_quota"},"x":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + "}"), BodyHint{Exhausted: true}},
		{"10 MiB of JSON garbage", garbage, BodyHint{}},
		{"10 MiB of JSON", junkArray(), BodyHint{RetryAfter: 8 * time.Second}},
		{"10 MiB string", []byte(`{"error":{"message":"` + strings.Repeat("x", 10<<20) + `","code":"insufficient_quota"}}`), BodyHint{Exhausted: true}},
		{"10 MiB number", []byte(`{"error":{"code":` + strings.Repeat("9", 10<<20) + `,"type":"insufficient_quota"}}`), BodyHint{Exhausted: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ParseErrorBody(tt.body))
		})
	}
}

// TestParseErrorBodyPure: the function leaves the body as it found it.
func TestParseErrorBodyPure(t *testing.T) {
	body := []byte(geminiPerDay + " trailing")
	want := bytes.Clone(body)
	ParseErrorBody(body)
	assert.Equal(t, want, body)
}

// FuzzParseErrorBody: whatever the bytes, ParseErrorBody never panics and
// never returns a negative wait, and is what parseErrorBody reads besides
// DEADLINE_EXCEEDED; bytes after a whole object or array change nothing;
// and an object reads the same, DEADLINE_EXCEEDED included, alone or as the
// only element of an array (Vertex AI), or twice in one.
func FuzzParseErrorBody(f *testing.F) {
	for _, seed := range []string{
		geminiPerMinute, geminiPerDay, "[" + geminiPerMinute + "]", "[" + geminiPerMinute + "," + geminiPerDay + "]",
		openAIQuota, openAIRate, `{"error":{"type":"insufficient_quota"}}`,
		retryInfo(`"30s"`), retryInfo(`"0.000000001s"`), retryInfo(`"-5s"`), retryInfo(`"1e400s"`), retryInfo(`"abc"`),
		retryInfo(`"45"`), retryInfo(`45`), retryInfo(`{"seconds":45}`), retryInfo(`"9223372036.854775808s"`),
		retryInfo(`"` + strings.Repeat("9", 100) + `s"`),
		`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":7},{"quotaId":"XPerDayX"}]}]}}`,
		`{"error":{"code":1e400,"details":[{"@type":5}]}}`,
		``, ` `, `null`, `[]`, `{}`, `429`, `"x"`, `<html>`, strings.Repeat("[", 200), strings.Repeat("[", 50) + strings.Repeat("]", 50),
		geminiPerDay[:100], geminiPerDay + "garbage", "\xef\xbb\xbf{}", "{\"error\":{\"code\":\"insufficient_quota\xff\"}}", "{\xff}",
		google504, "[" + google504 + "]", `{"error":{"status":["DEADLINE_EXCEEDED"]}}`, `{"error":{"status":"DEADLINE_EXCEEDED\u0000"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := signal.ErrorBody(body) // what ParseErrorBody returns, and what only the transport reads
		if (BodyHint{RetryAfter: got.RetryAfter, Exhausted: got.Exhausted}) != ParseErrorBody(body) || got.RetryAfter < 0 {
			t.Fatalf("signal.ErrorBody(%q) = %+v, ParseErrorBody %+v: want the same hint, and a RetryAfter never negative", body, got, ParseErrorBody(body))
		}
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		if !json.Valid(body) || len(trimmed) == 0 || trimmed[0] != '{' && trimmed[0] != '[' {
			return
		}
		if more := signal.ErrorBody(append(bytes.Clone(body), "}]garbage"...)); more != got {
			t.Fatalf("ParseErrorBody(%q) = %+v, but %+v with bytes after it", body, got, more)
		}
		if trimmed[0] != '{' || len(body) >= 9000 {
			return // wrapped, a body near encoding/json's depth limit would pass it
		}
		array := []byte("[" + string(body) + "]")
		require.Equal(t, got, signal.ErrorBody(array), "an object alone and in an array: %q", body)
		twice := []byte("[" + string(body) + "," + string(body) + "]")
		require.Equal(t, got, signal.ErrorBody(twice), "an object once and twice in an array: %q", body)
	})
}

// jsonReply is a reply with a JSON error body and, optionally, headers.
func jsonReply(status int, body string, headerKV ...string) retryhttptest.Reply {
	r := retryhttptest.Status(status, append([]string{"Content-Type", "application/json; charset=UTF-8"}, headerKV...)...)
	r.Body = body
	return r
}

// TestErrorBodyThroughTheTransport checks R19 end to end on the kit's Clock:
// the body's retryDelay is the server's ask, a spent quota is Permanent, and
// any response handed back yields every byte of its body.
func TestErrorBodyThroughTheTransport(t *testing.T) {
	const gemini45 = 45*time.Second + 837906927*time.Nanosecond
	ok := retryhttptest.Reply{Body: "ok"}
	huge := strings.Repeat("9", 9000)
	for _, tc := range []struct {
		name       string
		replies    []retryhttptest.Reply
		budget     bool
		wantWaits  []time.Duration
		wantStatus int // 0: an error
		wantBody   string
		wantLimit  bool
		wantAfter  time.Duration // Error.RetryAfter
		wantTries  int
	}{
		{name: "Gemini: the retryDelay is waited, not the backoff", replies: []retryhttptest.Reply{jsonReply(429, geminiPerMinute), ok},
			wantWaits: []time.Duration{gemini45}, wantStatus: 200, wantBody: "ok", wantTries: 2},
		{name: "a Retry-After header asking more wins", replies: []retryhttptest.Reply{jsonReply(429, retryInfo(`"2s"`), "Retry-After", "5"), ok},
			wantWaits: []time.Duration{5 * time.Second}, wantStatus: 200, wantBody: "ok", wantTries: 2},
		{name: "a body asking more than the header wins", replies: []retryhttptest.Reply{jsonReply(429, retryInfo(`"7s"`), "Retry-After", "5"), ok},
			wantWaits: []time.Duration{7 * time.Second}, wantStatus: 200, wantBody: "ok", wantTries: 2},
		{name: "a retryDelay shorter than the backoff: the backoff", replies: []retryhttptest.Reply{jsonReply(503, retryInfo(`"0.1s"`)), ok},
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200, wantBody: "ok", wantTries: 2},
		{name: "Gemini per-day quota: handed back at once, whole", replies: []retryhttptest.Reply{jsonReply(429, geminiPerDay), ok},
			wantStatus: 429, wantBody: geminiPerDay, wantTries: 1},
		{name: "Gemini per-day quota with a Budget: handed back, not busy", replies: []retryhttptest.Reply{jsonReply(429, geminiPerDay), ok}, budget: true,
			wantStatus: 429, wantBody: geminiPerDay, wantTries: 1},
		{name: "OpenAI insufficient_quota: handed back at once", replies: []retryhttptest.Reply{jsonReply(429, openAIQuota), ok},
			wantStatus: 429, wantBody: openAIQuota, wantTries: 1},
		{name: "public tier, retryDelay 30s: busy at once", replies: []retryhttptest.Reply{jsonReply(429, retryInfo(`"30s"`)), ok}, budget: true,
			wantLimit: true, wantAfter: 30 * time.Second, wantTries: 1},
		{name: "retryDelay -5s is ignored", replies: []retryhttptest.Reply{jsonReply(429, retryInfo(`"-5s"`)), ok},
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200, wantBody: "ok", wantTries: 2},
		{name: "retryDelay 1e400s is ignored", replies: []retryhttptest.Reply{jsonReply(429, retryInfo(`"1e400s"`)), ok},
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200, wantBody: "ok", wantTries: 2},
		{name: "retryDelay abc is ignored", replies: []retryhttptest.Reply{jsonReply(429, retryInfo(`"abc"`)), ok},
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200, wantBody: "ok", wantTries: 2},
		{name: "retryDelay of nine thousand digits saturates: does not fit, handed back whole",
			replies:    []retryhttptest.Reply{jsonReply(429, retryInfo(`"`+huge+`s"`)), ok},
			wantStatus: 429, wantBody: retryInfo(`"` + huge + `s"`), wantTries: 1},
		{name: "not JSON despite its Content-Type: the backoff, and handed back whole at the end",
			replies: []retryhttptest.Reply{jsonReply(503, "<html>busy</html>")}, wantWaits: []time.Duration{400 * time.Millisecond, 800 * time.Millisecond},
			wantStatus: 503, wantBody: "<html>busy</html>", wantTries: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			script := retryhttptest.NewScript(tc.replies...).WithClock(clk)
			log, logs := logSink()
			tr := New(script, WithClock(clk), WithBackoff(noJitter), WithLogger(log))
			ctx := context.Background()
			if tc.budget {
				ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
			}
			req, _ := http.NewRequestWithContext(ctx, "POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini:generateContent", strings.NewReader("{}"))
			resp, err := tr.RoundTrip(req)
			assert.Equal(t, tc.wantWaits, clk.Waits())
			assert.Equal(t, tc.wantTries, script.Len(), "tries")
			if tc.wantStatus == 0 {
				require.Nil(t, resp)
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tc.wantLimit, errors.Is(err, ErrRateLimited))
				assert.Equal(t, tc.wantAfter, e.RetryAfter)
				return
			}
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.wantStatus, resp.StatusCode)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.wantBody, string(body), "every byte of the body handed back")
			for _, e := range logs.FilterMessage(msgRetrying).All() {
				if len(tc.wantWaits) > 0 && tc.wantWaits[0] > 400*time.Millisecond {
					assert.Equal(t, "retry-after", e.ContextMap()["wait_from"])
				}
			}
		})
	}
}

// TestErrorBodyLargeOrStalled: a body read before deciding is read at most
// 64 KiB and bounded in time; a response handed back still yields every
// byte, the read-ahead first, then the rest (R10, R19).
func TestErrorBodyLargeOrStalled(t *testing.T) {
	big := `{"error":{"message":"` + strings.Repeat("x", 10<<20) + `"}}` // 10 MiB
	for _, tc := range []struct {
		name   string
		length int64 // ContentLength; -1 unknown
	}{
		{"10 MiB, length known: not read", int64(len(big))},
		{"10 MiB, length unknown: 64 KiB read, all handed back", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &trackedBody{r: strings.NewReader(big)}
			base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 429, Header: http.Header{"Content-Type": {"application/json"}}, Body: body, ContentLength: tc.length}, nil
			})
			tr := New(base, WithMaxRetries(0))
			resp, err := tr.RoundTrip(httptest.NewRequest("GET", "https://api.example.com", nil))
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, len(big), len(got))
			assert.True(t, string(got) == big, "the body handed back is the body sent")
			assert.EqualValues(t, 1, body.closed.Load())
		})
	}

	t.Run("stalls after 10 bytes: handed back at once, the 10 bytes first", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte(`{"error":{`))
		}()
		base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 429, Header: http.Header{"Content-Type": {"application/json"}}, Body: pr, ContentLength: -1}, nil
		})
		start := time.Now()
		resp, err := New(base, WithMaxRetries(0)).RoundTrip(httptest.NewRequest("GET", "https://api.example.com", nil))
		require.NoError(t, err)
		t.Logf("returned after %v of real time", time.Since(start))
		b := make([]byte, 10)
		_, err = io.ReadFull(resp.Body, b)
		require.NoError(t, err)
		assert.Equal(t, `{"error":{`, string(b))
		require.NoError(t, resp.Body.Close()) // ends the stalled read
		pw.CloseWithError(io.ErrClosedPipe)
	})
}

// TestErrorBodyNotReadWhenNotNeeded: a success, and a failure Permanent by
// its status, are handed back with the base's own body, unread (R16, R19).
func TestErrorBodyNotReadWhenNotNeeded(t *testing.T) {
	for _, status := range []int{200, 400, 401, 404} {
		body := &trackedBody{r: strings.NewReader(openAIQuota)}
		base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: body, ContentLength: int64(len(openAIQuota))}, nil
		})
		resp, err := New(base).RoundTrip(httptest.NewRequest("GET", "https://api.example.com", nil))
		require.NoError(t, err)
		assert.Same(t, body, resp.Body, "status %d: the base's body itself", status)
		assert.Zero(t, body.read.Load(), "status %d: unread", status)
	}
}

// TestErrorBodyArmsTheCooldown: a body's retryDelay is the server's ask for
// the Cooldown too (R17, R19).
func TestErrorBodyArmsTheCooldown(t *testing.T) {
	clk := newClock()
	cd := NewCooldown(nil)
	script := retryhttptest.NewScript(jsonReply(429, retryInfo(`"12s"`))).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
	resp, err := tr.RoundTrip(httptest.NewRequest("GET", "https://generativelanguage.googleapis.com/v1beta", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, clk.Now().Add(12*time.Second), cd.Until("https://generativelanguage.googleapis.com"))
}

func TestIsJSON(t *testing.T) {
	for v, want := range map[string]bool{
		"application/json": true, "application/json; charset=UTF-8": true, "Application/JSON": true,
		"application/problem+json": true, "text/json": false, "text/html": false, "": false, "application/json;;": false,
	} {
		assert.Equal(t, want, isJSON(http.Header{"Content-Type": {v}}), v)
	}
}

// TestErrorBodyEdges: a JSON body declared exactly 64 KiB long is read, one
// byte more is not (R19); a body that asks for no wait is no ask, so a
// Budget with no room hands its 503 back rather than failing fast (R8).
func TestErrorBodyEdges(t *testing.T) {
	padded := func(n int) string { b := retryInfo(`"3s"`); return b + strings.Repeat(" ", n-len(b)) }
	for _, tc := range []struct {
		name       string
		first      retryhttptest.Reply
		noRoom     bool // a Budget with no room, NewBudget(0)
		wantWaits  []time.Duration
		wantStatus int // 0: ErrRateLimited
	}{
		{name: "declared 64 KiB: read", first: jsonReply(503, padded(64<<10)), wantWaits: []time.Duration{3 * time.Second}, wantStatus: 200},
		{name: "declared 64 KiB + 1: not read", first: jsonReply(503, padded(64<<10+1)), wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200},
		{name: "no retryDelay, no room: the 503 back", first: jsonReply(503, openAIRate), noRoom: true, wantStatus: 503},
		{name: "a retryDelay, no room: busy", first: jsonReply(503, retryInfo(`"3s"`)), noRoom: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk, script, tr := scripted(replies{tc.first, reply(200)})
			ctx := context.Background()
			if tc.noRoom {
				ctx = WithBudget(ctx, NewBudget(0))
			}
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", "https://api.example.com/v1", nil))
			assertWaits(t, tc.wantWaits, clk.Waits())
			assert.Equal(t, 1+len(tc.wantWaits), script.Len(), "tries")
			if tc.wantStatus == 0 {
				assert.ErrorIs(t, err, ErrRateLimited)
				return
			}
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.wantStatus, resp.StatusCode)
		})
	}
}

// Google answers 504 DEADLINE_EXCEEDED when a request overran
// Google's own deadline (its docs: raise the timeout); the same request
// sent again spends another, so it is handed back at once (R19).

// googleStatus is a Google error envelope with code and status.
func googleStatus(code int, status string) string {
	return `{"error":{"code":` + itoa(code) + `,"message":"x","status":` + status + `}}`
}

// TestParseErrorBodyDeadlineExceeded: signal.ErrorBody reads a Google error's
// status DEADLINE_EXCEEDED, apart from the BodyHint, which stays what
// ParseErrorBody returns (API.md fixes it).
func TestParseErrorBodyDeadlineExceeded(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want signal.Hint
	}{
		{"google 504", google504, signal.Hint{DeadlineExceeded: true}},
		{"the code is not read: the status is", googleStatus(500, `"DEADLINE_EXCEEDED"`), signal.Hint{DeadlineExceeded: true}},
		{"vertex array", `[` + google504 + `]`, signal.Hint{DeadlineExceeded: true}},
		{"vertex array, among others", `[1,{"error":null},` + retryInfo(`"3s"`) + `,` + google504 + `]`,
			signal.Hint{RetryAfter: 3 * time.Second, DeadlineExceeded: true}},
		{"with a per-day quota", `[` + geminiPerDay + `,` + google504 + `]`,
			signal.Hint{RetryAfter: gemini45, Exhausted: true, DeadlineExceeded: true}},
		{"another status", googleStatus(504, `"UNAVAILABLE"`), signal.Hint{}},
		{"RESOURCE_EXHAUSTED", geminiPerMinute, signal.Hint{RetryAfter: gemini45}},
		{"lower case is not Google's", googleStatus(504, `"deadline_exceeded"`), signal.Hint{}},
		{"spaced is not Google's", googleStatus(504, `" DEADLINE_EXCEEDED"`), signal.Hint{}},
		{"escaped: the same string", googleStatus(504, `"DEADLINE\u005fEXCEEDED"`), signal.Hint{DeadlineExceeded: true}},
		{"a number", googleStatus(504, `4`), signal.Hint{}},
		{"an array", googleStatus(504, `["DEADLINE_EXCEEDED"]`), signal.Hint{}},
		{"an object", googleStatus(504, `{"DEADLINE_EXCEEDED":true}`), signal.Hint{}},
		{"null", googleStatus(504, `null`), signal.Hint{}},
		{"outside the envelope", `{"code":504,"status":"DEADLINE_EXCEEDED"}`, signal.Hint{}},
		{"in a detail", `{"error":{"details":[{"status":"DEADLINE_EXCEEDED"}]}}`, signal.Hint{}},
		{"the message is not read", `{"error":{"message":"DEADLINE_EXCEEDED"}}`, signal.Hint{}},
		{"nested array is not an envelope", `[[` + google504 + `]]`, signal.Hint{}},
		{"truncated", google504[:len(google504)-2], signal.Hint{}},
		{"trailing garbage", google504 + "}}]\x00\xff", signal.Hint{DeadlineExceeded: true}},
		{"a second value is not read", `{}` + google504, signal.Hint{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := signal.ErrorBody([]byte(tc.body))
			got.Limits = 0 // which limit a 429 names: internal/signal's limitbody_test.go
			assert.Equal(t, tc.want, got)
			assert.Equal(t, BodyHint{RetryAfter: got.RetryAfter, Exhausted: got.Exhausted}, ParseErrorBody([]byte(tc.body)), "ParseErrorBody: the hint alone")
		})
	}
}

// TestErrorBodyDeadlineExceeded checks R19's DEADLINE_EXCEEDED end to end on
// the kit's Clock: a 504 whose Google error body says it is handed back at
// once, whole, even with a Budget and whatever X-Should-Retry says, as a
// spent quota is; any other 504 (a gateway's) is still retried, and so is
// any other status with that body.
func TestErrorBodyDeadlineExceeded(t *testing.T) {
	ok := retryhttptest.Reply{Body: "ok"}
	html504 := retryhttptest.Status(504, "Content-Type", "text/html")
	html504.Body = "<html>504 Gateway Time-out</html>"
	gz := gzipOf(t, []byte(google504))
	for _, tc := range []struct {
		name       string
		first      retryhttptest.Reply
		budget     bool
		gzip       bool // the caller asks for gzip itself
		wantWaits  []time.Duration
		wantStatus int
		wantBody   string
	}{
		{name: "Google 504 DEADLINE_EXCEEDED: handed back at once, whole", first: jsonReply(504, google504),
			wantStatus: 504, wantBody: google504},
		{name: "with a Budget: handed back, not busy", first: jsonReply(504, google504), budget: true,
			wantStatus: 504, wantBody: google504},
		{name: "Vertex AI's array: handed back", first: jsonReply(504, "["+google504+"]"),
			wantStatus: 504, wantBody: "[" + google504 + "]"},
		{name: "X-Should-Retry true: the body's word wins, handed back", first: jsonReply(504, google504, "X-Should-Retry", "true"),
			wantStatus: 504, wantBody: google504},
		{name: "gzip'd, the caller's Accept-Encoding: handed back as sent", first: jsonReply(504, string(gz), "Content-Encoding", "gzip"), gzip: true,
			wantStatus: 504, wantBody: string(gz)},
		{name: "a gateway's 504, HTML: retried", first: html504,
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200, wantBody: "ok"},
		{name: "a 504 whose JSON says another status: retried", first: jsonReply(504, googleStatus(504, `"UNAVAILABLE"`)),
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200, wantBody: "ok"},
		{name: "a 503 saying DEADLINE_EXCEEDED: retried, the rule is the 504's", first: jsonReply(503, google504),
			wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200, wantBody: "ok"},
		{name: "not JSON by its Content-Type: not read, retried", first: func() retryhttptest.Reply {
			r := retryhttptest.Status(504, "Content-Type", "text/plain")
			r.Body = google504
			return r
		}(), wantWaits: []time.Duration{400 * time.Millisecond}, wantStatus: 200, wantBody: "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk, script, tr := scripted(replies{tc.first, ok})
			ctx := context.Background()
			if tc.budget {
				ctx = WithBudget(ctx, NewBudget(PublicTierMaxWait))
			}
			req := newRequest(t, ctx, http.MethodPost, "https://aiplatform.googleapis.com/v1/projects/p/models/gemini:generateContent", []byte(`{}`))
			if tc.gzip {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assertWaits(t, tc.wantWaits, clk.Waits())
			assert.Equal(t, 1+len(tc.wantWaits), script.Len(), "tries")
			assert.Equal(t, tc.wantStatus, resp.StatusCode)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.wantBody, string(body), "every byte of the body handed back")
			if tc.budget {
				assert.NoError(t, BudgetFrom(ctx).Err(), "the Budget: not busy")
			}
		})
	}
}

// TestErrorBodyDeadlineExceededObserved: the 504 is not "busy" (the Budget
// never has ErrRateLimited of it), and the Observer sees one Permanent try,
// Done (R15).
func TestErrorBodyDeadlineExceededObserved(t *testing.T) {
	var seen ttAttempts
	_, _, tr := scripted(replies{jsonReply(504, google504), reply(200)}, WithObserver(seen.observe))
	ctx := WithBudget(context.Background(), NewBudget(PublicTierMaxWait))
	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, "https://generativelanguage.googleapis.com/v1beta", []byte(`{}`)))
	require.NoError(t, err, "the 504, handed back")
	resp.Body.Close()
	assert.NoError(t, BudgetFrom(ctx).Err(), "the Budget: not busy")
	a := seen.list()
	require.Len(t, a, 1, "attempts")
	assert.Equal(t, Permanent, a[0].Class)
	assert.Equal(t, Done, a[0].Outcome)
	assert.Equal(t, 504, a[0].Status)
}
