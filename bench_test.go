package retryhttp

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// stubOK is a base that answers every request with a shared 200 response,
// so the benchmarks measure the transport and nothing else.
type stubOK struct{ resp *http.Response }

func (s stubOK) RoundTrip(*http.Request) (*http.Response, error) { return s.resp, nil }

func newStubOK() stubOK {
	return stubOK{resp: &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}}
}

func BenchmarkBare(b *testing.B) {
	base := newStubOK()
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/models", nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := base.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHappyPath(b *testing.B) {
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no-budget", context.Background()},
		{"budget", WithBudget(context.Background(), NewBudget(PublicTierMaxWait))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tr := New(newStubOK())
			req, _ := http.NewRequestWithContext(bc.ctx, http.MethodGet, "https://api.example.com/v1/models", nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tr.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var sinkDuration time.Duration
