package retryhttp

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/signal"
)

// Issue 21: Google answers 504 DEADLINE_EXCEEDED when a request overran
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
			got.Limits = 0 // which limit a 429 names: limitbody_test.go
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
