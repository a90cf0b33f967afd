//go:build !race

package retryhttp

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"
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

// TestSlowPathCallOnTheStack: a success through the slow path (an
// Observer) allocates only the redacted URL the Observer gets: the call
// stays on RoundTrip's stack. (A key function's panic cleanup held the call
// in an io.Closer, and every such call cost 944 B more.)
func TestSlowPathCallOnTheStack(t *testing.T) {
	ok := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) { return ok, nil })
	tr := New(base, WithObserver(func(context.Context, Attempt) {}), WithCooldown(NewCooldown(nil)))
	req := newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1", nil)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("a success with an Observer allocates %v times per call, want 1 (its URL)", allocs)
	}
}

// TestCooldownHappyPathAllocatesNothing: with a Cooldown, a first-try
// success carrying a provider's usual rate-limit headers allocates nothing,
// and nor does a call to a key while another key is watched (R16, R17).
func TestCooldownHappyPathAllocatesNothing(t *testing.T) {
	ok := &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{
		"X-Ratelimit-Limit-Requests":     {"500"},
		"X-Ratelimit-Remaining-Requests": {"0"},
		"X-Ratelimit-Reset-Requests":     {"120ms"},
		"Content-Type":                   {"application/json"},
	}}
	var base http.RoundTripper = roundTripperFunc(func(*http.Request) (*http.Response, error) { return ok, nil })
	for _, tc := range []struct {
		name    string
		watched string // a key the Cooldown watches
	}{
		{"nothing watched", ""},
		{"another key watched", "https://other.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd := NewCooldown(nil)
			tr := New(base, WithCooldown(cd))
			if tc.watched != "" {
				holdFor(cd, tc.watched, time.Now(), time.Hour)
			}
			req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte(`{"q":1}`))
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("first-try success allocates %v times per call, want 0", allocs)
			}
			if tc.watched == "" && cd.size() != 0 {
				t.Errorf("a success in free flow armed the Cooldown")
			}
		})
	}
}

// TestCooldownByModelHappyPathAllocatesNothing: with a Cooldown keyed by
// KeyByModel, a first-try success allocates nothing while no key of its
// host is watched, whether or not another host's is (R16): its body is
// not read. A call to a host that has a watched key reads its model on the
// slow path: what that costs is logged, and bounded.
func TestCooldownByModelHappyPathAllocatesNothing(t *testing.T) {
	ok := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
	var base http.RoundTripper = roundTripperFunc(func(*http.Request) (*http.Response, error) { return ok, nil })
	for _, tc := range []struct {
		name    string
		url     string
		watched string // a key the Cooldown watches
		most    float64
	}{
		{"nothing watched", openAIChat, "", 0},
		{"another host watched", openAIChat, "https://api.anthropic.com/claude-sonnet-4-5", 0},
		{"another model of the host watched", openAIChat, "https://api.openai.com/o3", 12},
		{"another model of the host watched, Gemini's path", geminiAPI + "gemini-2.0-flash:generateContent", "https://generativelanguage.googleapis.com/gemini-2.5-pro", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cd := NewCooldown(KeyByModel)
			tr := New(base, WithCooldown(cd))
			if tc.watched != "" {
				holdFor(cd, tc.watched, time.Now(), time.Hour)
			}
			req := newRequest(t, context.Background(), http.MethodPost, tc.url, []byte(`{"model":"gpt-4o","messages":[]}`))
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%s: %v allocations per call", tc.name, allocs)
			if allocs > tc.most {
				t.Errorf("first-try success allocates %v times per call, want %v at most", allocs, tc.most)
			}
		})
	}
}

// TestMemoryFlat: 100,000 calls, each retried once (a 503, then a 200),
// leave the heap where it was (R16): nothing of a call outlives it. The
// base answers with fresh responses, as a real one does, so what would pile
// up is the transport's own.
func TestMemoryFlat(t *testing.T) {
	var n int
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		n++
		if n%2 == 1 {
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody}, nil
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})
	tr := New(base, WithBackoff(Backoff{}), WithObserver(func(context.Context, Attempt) {}))
	req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte(`{"q":1}`))
	call := func() {
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v", resp, err)
		}
	}
	for range 100_000 { // warm up: pools, the first of everything
		call()
	}
	before := heapAfterGC()
	for range 100_000 {
		call()
	}
	growth := heapAfterGC() - before
	t.Logf("heap after 100,000 more retried calls: %+d bytes", growth)
	if growth > 256<<10 {
		t.Errorf("the heap grew by %d bytes over 100,000 calls, want it flat (under 256 KiB of the runtime's own noise)", growth)
	}
}

func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first one's finalizers let go
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestStreamRetryAllocs: with WithStreamRetry, a success that is not an
// event stream costs a header check and allocates nothing (R16, R26); a
// healthy stream's read ahead allocates its body (the bytes read ahead)
// and, with a first token's bound, its timer on the clock.
func TestStreamRetryAllocs(t *testing.T) {
	const opening = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	body := &replayBody{data: opening}
	for _, tc := range []struct {
		name       string
		stream     bool
		firstToken time.Duration
		max        float64
	}{
		{"JSON", false, 2 * time.Second, 0},
		{"a stream, no bound", true, 0, 1},
		{"a stream, 2 s bound", true, 2 * time.Second, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
			if tc.stream {
				resp.Header = http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}
			}
			base := roundTripperFunc(func(*http.Request) (*http.Response, error) {
				body.off = 0
				resp.Body = body
				return resp, nil
			})
			tr := New(base, WithStreamRetry(tc.firstToken))
			req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/messages", nil)
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > tc.max {
				t.Errorf("allocates %v times per call, want %v at most", allocs, tc.max)
			}
		})
	}
}

// replayBody is a body a test can read again: rewound by setting off.
type replayBody struct {
	data string
	off  int
}

func (b *replayBody) Read(p []byte) (int, error) {
	if b.off == len(b.data) {
		return 0, io.EOF
	}
	n := copy(p, b.data[b.off:])
	b.off += n
	return n, nil
}

func (b *replayBody) Close() error { return nil }
