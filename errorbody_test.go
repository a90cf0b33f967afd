package retryhttp

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Real error bodies, as the providers send them with a 429.
const (
	geminiPerMinute = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"15"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"45.837906927s"}]}}`
	geminiPerDay    = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"},"quotaValue":"200"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"45.837906927s"}]}}`
	openAIQuota     = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openAIRate      = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-1 on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
)

// retryInfo is a Gemini body whose only detail is a RetryInfo with delay.
func retryInfo(delay string) string {
	return `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":` + delay + `}]}}`
}

func TestParseErrorBody(t *testing.T) {
	const gemini45 = 45*time.Second + 837906927*time.Nanosecond
	tests := []struct {
		name string
		body string
		want BodyHint
	}{
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
	for _, tt := range tests {
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
// never returns a negative wait; bytes after a whole object or array change
// nothing; and an object reads the same alone or as the only element of an
// array (Vertex AI), or twice in one.
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
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := ParseErrorBody(body)
		if got.RetryAfter < 0 {
			t.Fatalf("ParseErrorBody(%q) = %+v, want a RetryAfter never negative", body, got)
		}
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		if !json.Valid(body) || len(trimmed) == 0 || trimmed[0] != '{' && trimmed[0] != '[' {
			return
		}
		if more := ParseErrorBody(append(bytes.Clone(body), "}]garbage"...)); more != got {
			t.Fatalf("ParseErrorBody(%q) = %+v, but %+v with bytes after it", body, got, more)
		}
		if trimmed[0] != '{' || len(body) >= 9000 {
			return // wrapped, a body near encoding/json's depth limit would pass it
		}
		array := []byte("[" + string(body) + "]")
		require.Equal(t, got, ParseErrorBody(array), "an object alone and in an array: %q", body)
		twice := []byte("[" + string(body) + "," + string(body) + "]")
		require.Equal(t, got, ParseErrorBody(twice), "an object once and twice in an array: %q", body)
	})
}
