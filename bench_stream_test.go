package retryhttp

// What WithStreamRetry costs a healthy stream (R26): the read ahead to the
// first token, its allocations, and the throughput of the stream once
// handed over. Each benchmark runs the same stream under every transport as
// sub-benchmarks (lib=...), so that -count interleaves them and benchstat
// compares them side by side:
//
//	go test -run '^$' -bench 'Stream' -benchmem -count 6 . | benchstat -col /lib -

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// benchStreamLibs are the transports a stream is read through: the base
// alone, retryhttp without the option, and with it (with no bound on the
// first token, and with one of 2 s, a timer on the clock).
func benchStreamLibs(base http.RoundTripper) []struct {
	name string
	rt   http.RoundTripper
} {
	return []struct {
		name string
		rt   http.RoundTripper
	}{
		{"lib=bare", base},
		{"lib=retryhttp", New(base)},
		{"lib=stream", New(base, WithStreamRetry(0))},
		{"lib=stream+2s", New(base, WithStreamRetry(2*time.Second))},
	}
}

// benchAnthropicStream is a healthy Anthropic stream of 40 tokens: its
// opening, its first token, the rest.
var benchAnthropicStream = func() string {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
	for range 40 {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n")
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.String()
}()

// benchStreamStub answers every request with one event stream, read from
// memory: a benchmark over it measures the transports and nothing else.
type benchStreamStub struct {
	resp *http.Response
	body *strings.Reader
}

func newBenchStreamStub(stream string) *benchStreamStub {
	r := benchResponse(http.StatusOK)
	r.Header = http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}, "Request-Id": {"req_011CPxyz"}}
	return &benchStreamStub{resp: r, body: strings.NewReader(stream)}
}

func (s *benchStreamStub) RoundTrip(*http.Request) (*http.Response, error) {
	s.body.Seek(0, io.SeekStart)
	s.resp.Body = io.NopCloser(s.body)
	return s.resp, nil
}

// BenchmarkStreamReadAhead is a healthy stream read whole through each
// transport, over a stub: lib=stream's ns/op less lib=retryhttp's is the
// read ahead's own cost, and its allocs/op less lib=bare's what it
// allocates (R26: its body, and with a bound the timer).
func BenchmarkStreamReadAhead(b *testing.B) {
	stub := newBenchStreamStub(benchAnthropicStream)
	req := benchPost(b, `{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true}`)
	buf := make([]byte, 32<<10)
	for _, lib := range benchStreamLibs(stub) {
		b.Run(lib.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchAnthropicStream)))
			b.ReportAllocs()
			for b.Loop() {
				resp, err := lib.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkStreamLoopback is the same stream over a loopback connection
// (HTTP/1.1, kept alive): a call as an SDK makes it, allocations included.
func BenchmarkStreamLoopback(b *testing.B) {
	benchStreamOver(b, benchAnthropicStream)
}

// BenchmarkStreamThroughput is a 1 MiB stream over loopback, read whole
// once handed over: its MB/s through the read ahead's body against the
// base's own (R26: at least 0.95 of it), the call included.
func BenchmarkStreamThroughput(b *testing.B) {
	benchStreamOver(b, benchBigStream)
}

// BenchmarkStreamReadAfterHandOver is the same 1 MiB stream from memory,
// timed only from the hand-over to its end: what the read ahead's body
// costs each Read, with no network to hide it in.
func BenchmarkStreamReadAfterHandOver(b *testing.B) {
	stub := newBenchStreamStub(benchBigStream)
	req := benchPost(b, `{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true}`)
	buf := make([]byte, 32<<10)
	for _, lib := range benchStreamLibs(stub) {
		b.Run(lib.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchBigStream)))
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				resp, err := lib.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// benchBigStream is a healthy Anthropic stream of 1 MiB.
var benchBigStream = func() string {
	var big strings.Builder
	opening, _, _ := strings.Cut(benchAnthropicStream, "event: content_block_delta")
	big.WriteString(opening)
	for big.Len() < 1<<20 {
		big.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"tokens, tokens, tokens\"}}\n\n")
	}
	return big.String()
}()

func benchStreamOver(b *testing.B, stream string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	buf := make([]byte, 32<<10)
	for _, lib := range benchStreamLibs(base) {
		b.Run(lib.name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(`{"stream":true}`))
				resp, err := lib.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
