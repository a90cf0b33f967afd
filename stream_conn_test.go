package retryhttp

import (
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What only a real connection shows of streams (R26): over loopback, with
// HTTP/1.1 and HTTP/2, the bytes the caller reads of a stream handed over
// are exactly those the provider sent on that try, by hash; a stream cut
// for want of a first token, or by the caller, is ended on the wire.

// A write is one part of a stream the test server sends: its bytes, after
// a pause, flushed.
type write struct {
	after time.Duration
	data  string
}

// streamServer answers try n with plan[n] (past the end, the last), as
// text/event-stream, flushing each write, and keeps the SHA-256 of what
// each try sent and whether each ended early (its request's context done
// before its last write).
type streamServer struct {
	*httptest.Server
	plan [][]write

	mu     sync.Mutex
	sent   [][32]byte
	cut    []bool
	served chan struct{} // a value each time a handler returns
}

func newStreamServer(t *testing.T, http2 bool, plan ...[]write) *streamServer {
	t.Helper()
	s := &streamServer{plan: plan, served: make(chan struct{}, 64)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if http2 {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (s *streamServer) serve(w http.ResponseWriter, r *http.Request) {
	defer func() { s.served <- struct{}{} }()
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	n := len(s.sent)
	s.sent, s.cut = append(s.sent, [32]byte{}), append(s.cut, false)
	s.mu.Unlock()
	writes := s.plan[min(n, len(s.plan)-1)]
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	h := sha256.New()
	defer func() {
		s.mu.Lock()
		copy(s.sent[n][:], h.Sum(nil))
		s.mu.Unlock()
	}()
	for _, wr := range writes {
		if wr.after > 0 {
			select {
			case <-time.After(wr.after):
			case <-r.Context().Done():
				s.mu.Lock()
				s.cut[n] = true
				s.mu.Unlock()
				return
			}
		}
		if _, err := io.WriteString(w, wr.data); err != nil {
			return
		}
		h.Write([]byte(wr.data))
		w.(http.Flusher).Flush()
	}
}

// tries returns the hash each try sent and whether it ended early, once
// every handler has returned (n of them).
func (s *streamServer) tries(t *testing.T, n int) ([][32]byte, []bool) {
	t.Helper()
	for range n {
		select {
		case <-s.served:
		case <-time.After(10 * time.Second):
			t.Fatalf("the server's handlers did not all return")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][32]byte(nil), s.sent...), append([]bool(nil), s.cut...)
}

// bytewise sends data a byte a flush.
func bytewise(data string) []write {
	ws := make([]write, len(data))
	for i := range data {
		ws[i] = write{data: data[i : i+1]}
	}
	return ws
}

func TestStreamBytesOverLoopback(t *testing.T) {
	d := dialects[0]
	overloaded := d.opening + d.failures[0].event
	var big strings.Builder
	for big.Len() < 1<<20 {
		big.WriteString(ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"token token token"}}`))
	}
	comments := strings.Repeat(": not a token\n", 5000) // 70,000 bytes
	healthy := []write{{data: d.opening}, {after: 5 * time.Millisecond, data: d.token}, {data: d.rest}}
	tests := []struct {
		name  string
		plan  [][]write
		tries int
	}{
		{"a token first", [][]write{healthy}, 1},
		{"an overloaded stream, then a token first", [][]write{{{data: overloaded}}, healthy}, 2},
		{"a byte a flush", [][]write{bytewise(d.whole())}, 1},
		{"ends with no token", [][]write{{{data: d.opening}}}, 1},
		{"64 KiB with no token", [][]write{{{data: comments}, {data: d.token + d.rest}}}, 1},
		{"1 MiB after the first token", [][]write{{{data: d.opening + d.token}, {data: big.String()}, {data: d.rest}}}, 1},
		{"an error split across flushes, then a token", [][]write{bytewise(overloaded), healthy}, 2},
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, tt := range tests {
			t.Run(proto+"/"+tt.name, func(t *testing.T) {
				s := newStreamServer(t, proto == "HTTP/2.0", tt.plan...)
				base := s.Client().Transport.(*http.Transport)
				defer base.CloseIdleConnections()
				tr := New(base, WithStreamRetry(5*time.Second), WithBackoff(Backoff{Base: time.Millisecond}))
				resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, s.URL+"/v1/messages", []byte(`{"stream":true}`)))
				require.NoError(t, err)
				assert.Equal(t, proto, resp.Proto)
				h := sha256.New()
				_, err = io.Copy(h, resp.Body)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				sent, _ := s.tries(t, tt.tries)
				require.Len(t, sent, tt.tries)
				assert.Equal(t, sent[tt.tries-1][:], h.Sum(nil), "the caller's bytes are the last try's, exactly")
			})
		}
	}
}

// TestStreamCutOverLoopback: a stream cut for want of a first token, and
// one whose caller gives up during the read ahead, are ended on the wire:
// the server's handler sees its request end, over HTTP/1.1 and HTTP/2, on
// the first try (the caller's own request: no context of the transport's)
// and on a retry.
func TestStreamCutOverLoopback(t *testing.T) {
	d := dialects[1]
	stalled := []write{{data: d.opening}, {after: time.Minute, data: d.token}}
	healthy := []write{{data: d.opening}, {after: 5 * time.Millisecond, data: d.token}, {data: d.rest}}
	overloaded := []write{{data: d.opening + d.failures[0].event}}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto+"/first token", func(t *testing.T) {
			s := newStreamServer(t, proto == "HTTP/2.0", stalled, healthy)
			base := s.Client().Transport.(*http.Transport)
			defer base.CloseIdleConnections()
			tr := New(base, WithStreamRetry(100*time.Millisecond), WithBackoff(Backoff{Base: time.Millisecond}))
			start := time.Now()
			resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodPost, s.URL, nil))
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, d.whole(), string(got))
			assert.Less(t, time.Since(start), 5*time.Second)
			_, cut := s.tries(t, 2)
			assert.Equal(t, []bool{true, false}, cut, "the stalled try ended on the wire")
		})
		for _, tt := range []struct {
			name  string
			plan  [][]write
			tries int
		}{
			{"caller on the first try", [][]write{stalled}, 1},
			{"caller on a retry", [][]write{overloaded, stalled}, 2},
		} {
			t.Run(proto+"/"+tt.name, func(t *testing.T) {
				s := newStreamServer(t, proto == "HTTP/2.0", tt.plan...)
				base := s.Client().Transport.(*http.Transport)
				defer base.CloseIdleConnections()
				tr := New(base, WithStreamRetry(0), WithBackoff(Backoff{Base: time.Millisecond}))
				ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
				defer cancel()
				resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, s.URL, nil))
				require.Nil(t, resp)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				_, cut := s.tries(t, tt.tries)
				assert.True(t, cut[tt.tries-1], "the try ended on the wire")
			})
		}
	}
}
