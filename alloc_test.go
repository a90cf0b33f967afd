//go:build !race

package retryhttp

import (
	"context"
	"net/http"
	"testing"
)

// TestHappyPathAllocatesNothing checks R16 as a count, not a time: a
// first-try success with default options allocates nothing beyond the base,
// with or without a Budget. (The race detector allocates on its own, hence
// the build tag; benchmarks report the same number with -benchmem.)
func TestHappyPathAllocatesNothing(t *testing.T) {
	ok := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
	var base http.RoundTripper = roundTripperFunc(func(*http.Request) (*http.Response, error) { return ok, nil })
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no budget", context.Background()},
		{"budget", WithBudget(context.Background(), NewBudget(PublicTierMaxWait))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(base)
			req := newRequest(t, tc.ctx, http.MethodPost, "https://api.example.com/v1/chat?key=x", []byte(`{"q":1}`))
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("first-try success allocates %v times per call, want 0", allocs)
			}
		})
	}
}
