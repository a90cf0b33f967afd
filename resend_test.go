package retryhttp

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResendCount checks R21: a base below the transport reads 0, 1, 2 from
// the tries of one call, with and without a try timeout (which gives each try
// a context of its own), and 0 for a context that never met a Transport.
func TestResendCount(t *testing.T) {
	assert.Equal(t, 0, ResendCount(context.Background()))
	//lint:ignore SA1012 a nil context must not panic
	//nolint:staticcheck // a nil context must not panic
	assert.Equal(t, 0, ResendCount(nil))

	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"try timeout", []Option{WithTryTimeout(time.Minute)}},
		{"idempotency key", []Option{WithIdempotencyKey()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu   sync.Mutex
				seen []int
			)
			replies := []int{503, 503, 200}
			base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, ResendCount(r.Context()))
				return respond(replies[len(seen)-1], ""), nil
			})
			clk := newFakeClock()
			tr := New(base, append([]Option{WithClock(clk)}, tc.opts...)...)
			req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1", []byte("{}"))
			res := drive(t, tr, clk, req)
			require.NoError(t, res.err)
			res.resp.Body.Close()
			assert.Equal(t, []int{0, 1, 2}, seen)
			assert.Equal(t, 0, ResendCount(req.Context()), "the caller's context is untouched")
		})
	}
}
