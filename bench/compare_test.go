package bench

// Side-by-side benchmarks: the same request through every Lib. Sub-benchmark
// names carry key=value parts, so that
//
//	benchstat -col /lib results.txt
//
// puts the libraries in columns, with the bare transport first and every
// other column's ratio to it. They measure and assert nothing about time.

import (
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

// stub is a base that answers every request with one shared response and
// allocates nothing. It puts the Body back each time: failsafe-go wraps the
// Body of the response it gets, and the wrappers must not pile up.
type stub struct{ resp *http.Response }

func (s *stub) RoundTrip(*http.Request) (*http.Response, error) {
	s.resp.Body = http.NoBody
	return s.resp, nil
}

func response(status int) *http.Response {
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody,
	}
}

// newStub returns the stub as the http.RoundTripper every library holds its
// base as; not inlined, so the bare column pays the same interface call.
//
//go:noinline
func newStub(status int) http.RoundTripper { return &stub{resp: response(status)} }

const apiURL = "https://api.example.com/v1/chat/completions"

// BenchmarkHappy is a first-try success: over a stub base (the library's own
// cost, called with RoundTrip as http.Client would), with a Background
// context and with a deadline (as real calls carry), and over a real
// loopback server through an http.Client, reading the body to the end.
func BenchmarkHappy(b *testing.B) {
	deadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, c := range []struct {
		base, ctxName string
		ctx           context.Context
	}{
		{"stub", "background", context.Background()},
		{"stub", "deadline", deadline},
		{"loopback", "background", context.Background()},
	} {
		libs := Compared()
		if c.base == "stub" {
			libs = append([]Lib{Floor}, libs...) // R16's limit: retryhttp at most 2x it
		}
		for _, lib := range libs {
			b.Run("base="+c.base+"/ctx="+c.ctxName+"/lib="+lib.Name, func(b *testing.B) {
				if c.base == "stub" {
					happyStub(b, lib, c.ctx)
				} else {
					happyLoopback(b, lib, c.ctx)
				}
			})
		}
	}
}

func happyStub(b *testing.B, lib Lib, ctx context.Context) {
	rt := lib.Wrap(newStub(http.StatusOK), Shaped)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

func happyLoopback(b *testing.B, lib Lib, ctx context.Context) {
	srv := NewCompletionServer()
	defer srv.Close()
	base := BaseTransport(2)
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: lib.Wrap(base, Shaped)}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/chat/completions", nil)
	if err != nil {
		b.Fatal(err)
	}
	get := func() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	get() // the connection is made before the clock starts
	b.ReportAllocs()
	for b.Loop() {
		get()
	}
}

// BenchmarkLoopbackPaired sends, in every iteration, one request through the
// bare transport and one through lib (each first in turn), over the same
// loopback server, and times each. A loopback round trip is tens of
// microseconds and swings with whatever else the machine runs: a request
// descheduled for a millisecond weighs as much as a hundred others in a mean.
// So this reports medians of the single requests: ns/op is lib's median,
// bare-ns/op the bare one's from the same run, and vs-bare their ratio. lib=bare
// is the control: its vs-bare shows the noise of the method itself. Run it
// without -benchmem: its allocations are those of both requests
// (BenchmarkHappy has them apart).
func BenchmarkLoopbackPaired(b *testing.B) {
	srv := NewCompletionServer()
	defer srv.Close()
	for _, lib := range Compared() {
		b.Run("lib="+lib.Name, func(b *testing.B) {
			bareBase, libBase := BaseTransport(2), BaseTransport(2)
			defer bareBase.CloseIdleConnections()
			defer libBase.CloseIdleConnections()
			clients := [2]*http.Client{
				{Transport: Bare.Wrap(bareBase, Shaped)},
				{Transport: lib.Wrap(libBase, Shaped)},
			}
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/chat/completions", nil)
			if err != nil {
				b.Fatal(err)
			}
			get := func(c *http.Client) time.Duration {
				start := time.Now()
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				d := time.Since(start)
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
				return d
			}
			get(clients[0]) // connections are made before the clock starts
			get(clients[1])
			var took [2][]time.Duration
			for i := range took {
				took[i] = make([]time.Duration, 0, 1<<16)
			}
			n := 0
			for b.Loop() {
				first := n % 2
				took[first] = append(took[first], get(clients[first]))
				took[1-first] = append(took[1-first], get(clients[1-first]))
				n++
			}
			bare, ours := median(took[0]), median(took[1])
			b.ReportMetric(float64(ours.Nanoseconds()), "ns/op")
			b.ReportMetric(float64(bare.Nanoseconds()), "bare-ns/op")
			b.ReportMetric(float64(ours)/float64(bare), "vs-bare")
		})
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// flaky answers 503 and then 200, over and over.
type flaky struct {
	fail, ok *http.Response
	n        int
}

func (s *flaky) RoundTrip(*http.Request) (*http.Response, error) {
	s.n++
	if s.n%2 == 1 {
		s.fail.Body = http.NoBody
		return s.fail, nil
	}
	s.ok.Body = http.NoBody
	return s.ok, nil
}

// BenchmarkRetryOnce is one call that gets a 503 and then a 200 over a stub
// base, with no backoff (so no waiting, on any library's clock): what one
// retry costs beyond the tries themselves.
func BenchmarkRetryOnce(b *testing.B) {
	for _, lib := range Compared() {
		if !lib.Retries {
			continue
		}
		b.Run("lib="+lib.Name, func(b *testing.B) {
			base := &flaky{fail: response(http.StatusServiceUnavailable), ok: response(http.StatusOK)}
			rt := lib.Wrap(base, Zero)
			req, err := http.NewRequest(http.MethodGet, apiURL, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d, want 200 after one retry", resp.StatusCode)
				}
			}
		})
	}
}
