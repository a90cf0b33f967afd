package retryhttp

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFirstTryAsTheBaseGaveIt checks R1 off the happy path too: whatever
// option takes the call off it (its own Classifier, an Observer, a Quota, an
// idempotency key a GET does not need), the first try sends the caller's own
// request, and a response that is not retried comes back as the base gave
// it, its body the base's own (only WithTryTimeout wraps it, R13).
func TestFirstTryAsTheBaseGaveIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Option
	}{
		{"default options", nil},
		{"a Classifier of the caller's own", WithClassifier(Classify)},
		{"an Observer", WithObserver(func(context.Context, Attempt) {})},
		{"a Quota", WithQuota(NewQuota(10, 0.1))},
		{"an idempotency key, on a GET", WithIdempotencyKey()},
	} {
		for _, status := range []int{200, 404} {
			t.Run(tc.name+", "+http.StatusText(status), func(t *testing.T) {
				body := &trackedBody{r: strings.NewReader("hello")}
				want := respond(status, "hello")
				want.Body = body
				var sent []*http.Request
				tr := New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
					sent = append(sent, r)
					return want, nil
				}), tc.opt)
				req := newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil)
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				require.Len(t, sent, 1, "tries")
				assert.Same(t, req, sent[0], "the first try sends the caller's request")
				assert.Same(t, want, resp, "the base's response")
				assert.Same(t, body, resp.Body, "the base's body, not wrapped")
				assert.Zero(t, body.read.Load(), "unread")
			})
		}
	}
}
