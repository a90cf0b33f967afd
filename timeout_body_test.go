package retryhttp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ttStream is a response body that yields the chunks sent to it and, like
// http.Transport's body, fails once the try's context ends.
type ttStream struct {
	ctx    context.Context
	chunks chan string
	buf    string
	closed bool
}

func (s *ttStream) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	if s.buf == "" {
		select {
		case c, ok := <-s.chunks:
			if !ok {
				return 0, io.EOF
			}
			s.buf = c
		case <-s.ctx.Done():
			return 0, s.ctx.Err()
		}
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

func (s *ttStream) Close() error { s.closed = true; return nil }

func TestTryTimeoutNeverCutsStream(t *testing.T) {
	ttNoLeak(t)
	const d = time.Second
	clk := newTimerClock()
	var (
		tryCtx context.Context
		stream *ttStream
		tries  int
	)
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		tries++
		tryCtx = r.Context()
		stream = &ttStream{ctx: r.Context(), chunks: make(chan string, 8)}
		resp := respond(http.StatusOK, "")
		resp.Body, resp.ContentLength = stream, -1
		return resp, nil
	})
	tr := New(base, WithClock(clk), WithTryTimeout(d))
	req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte(`{"stream":true}`))

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err, "the 200")
	start := clk.Now()
	chunks := []string{"data: one\n\n", "data: two\n\n", "data: three\n\n", "data: [DONE]\n\n"}
	var got strings.Builder
	for i, c := range chunks {
		clk.Add(3 * d) // each chunk comes long after the try timeout
		stream.chunks <- c
		buf := make([]byte, len(c))
		_, err := io.ReadFull(resp.Body, buf)
		require.NoError(t, err, "chunk %d, %v after the headers: the stream stays readable", i, clk.Since(start))
		got.Write(buf)
	}
	close(stream.chunks)
	rest, err := io.ReadAll(resp.Body)
	assert.NoError(t, err, "the end of the stream")
	assert.Empty(t, rest, "the end of the stream")
	assert.Equal(t, strings.Join(chunks, ""), got.String())
	assert.Equal(t, 1, tries, "a stream is never retried (R6)")
	assert.NoError(t, tryCtx.Err(), "the try's context, before the body is closed")
	assert.NoError(t, resp.Body.Close())
	assert.True(t, stream.closed, "closing the returned body closes the base's")
	assert.Error(t, tryCtx.Err(), "the try's context, after the body was closed")
	assert.Zero(t, clk.armed(), "per-try timers still armed")
}

// ttDuplex is a 101 Switching Protocols body: readable and writable.
type ttDuplex struct {
	strings.Builder
	closed bool
}

func (d *ttDuplex) Read([]byte) (int, error) { return 0, io.EOF }
func (d *ttDuplex) Close() error             { d.closed = true; return nil }

func TestTryTimeoutKeepsUpgradedBodyWritable(t *testing.T) {
	ttNoLeak(t)
	clk := newClock()
	duplex := &ttDuplex{}
	var tryCtx context.Context
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		tryCtx = r.Context()
		resp := respond(http.StatusSwitchingProtocols, "")
		resp.Body = duplex
		return resp, nil
	})
	tr := New(base, WithClock(clk), WithTryTimeout(time.Second))
	req := newRequest(t, context.Background(), http.MethodGet, "https://api.example.com/v1/realtime", nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	w, ok := resp.Body.(io.ReadWriteCloser)
	require.True(t, ok, "the 101's body is a %T, want an io.ReadWriteCloser as net/http gives", resp.Body)
	_, err = io.WriteString(w, "hello")
	assert.NoError(t, err, "a write through the body")
	assert.Equal(t, "hello", duplex.String(), "what the write reached")
	w.Close()
	assert.True(t, duplex.closed, "after Close: the base's body, closed")
	assert.Error(t, tryCtx.Err(), "after Close: the try's context, ended")
}
