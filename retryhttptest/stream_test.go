package retryhttptest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// read is one Read of a stream's body, as the test saw it.
type read struct {
	data string
	at   time.Duration // on the Clock, from the request
	err  error
}

// readAll reads body to its first error with a 64-byte buffer, noting when
// each read returned on clk.
func readAll(body io.Reader, clk *retryhttptest.Clock) []read {
	start := clk.Now()
	var reads []read
	buf := make([]byte, 64)
	for {
		n, err := body.Read(buf)
		reads = append(reads, read{string(buf[:n]), clk.Since(start), err})
		if err != nil {
			return reads
		}
	}
}

func TestStreamReadsAChunkARead(t *testing.T) {
	cut := errors.New("cut")
	long := string(make([]byte, 100))
	tests := []struct {
		name  string
		reply retryhttptest.Reply
		want  []read
	}{
		{"no chunks: the end at once", retryhttptest.Stream(), []read{{"", 0, io.EOF}}},
		{"chunks, each after its wait", retryhttptest.Stream(
			retryhttptest.Chunk{Data: "a"},
			retryhttptest.Chunk{After: time.Second, Data: "bc"},
			retryhttptest.Chunk{After: 2 * time.Second, Data: "d"},
		), []read{{"a", 0, nil}, {"bc", time.Second, nil}, {"d", 3 * time.Second, nil}, {"", 3 * time.Second, io.EOF}}},
		{"an empty chunk is a wait", retryhttptest.Stream(
			retryhttptest.Chunk{After: time.Second}, retryhttptest.Chunk{Data: "a"},
		), []read{{"a", time.Second, nil}, {"", time.Second, io.EOF}}},
		{"a chunk longer than the buffer takes two reads", retryhttptest.Stream(retryhttptest.Chunk{Data: long}),
			[]read{{long[:64], 0, nil}, {long[64:], 0, nil}, {"", 0, io.EOF}}},
		{"Split: a byte a read", retryhttptest.Stream(retryhttptest.Split("abc", 1)...),
			[]read{{"a", 0, nil}, {"b", 0, nil}, {"c", 0, nil}, {"", 0, io.EOF}}},
		{"Cut after the chunks", retryhttptest.Stream(retryhttptest.Chunk{After: time.Second, Data: "a"}).Cut(cut),
			[]read{{"a", time.Second, nil}, {"", time.Second, cut}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := retryhttptest.NewClock()
			s := retryhttptest.NewScript(tt.reply).WithClock(clk)
			resp, err := s.RoundTrip(newGet(t.Context()))
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			assert.Equal(t, int64(-1), resp.ContentLength)
			assert.Equal(t, tt.want, readAll(resp.Body, clk))
			assert.Empty(t, clk.Waits(), "a stall is not a wait of the transport")
		})
	}
}

func newGet(ctx context.Context) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/v1/chat", nil)
	return req
}

// TestStreamStallEndsEarly: a stall on the Clock ends at the instant a
// function due on the clock closes the body or ends the request's context
// (a transport's first-token timer), and a stall in real time as soon as
// either happens.
func TestStreamStallEndsEarly(t *testing.T) {
	stall := retryhttptest.Stream(retryhttptest.Chunk{Data: "a"}, retryhttptest.Chunk{After: 30 * time.Second, Data: "b"})
	for _, how := range []string{"close", "cancel"} {
		t.Run(how+" on the Clock", func(t *testing.T) {
			clk := retryhttptest.NewClock()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp, err := retryhttptest.NewScript(stall).WithClock(clk).RoundTrip(newGet(ctx))
			require.NoError(t, err)
			defer resp.Body.Close()
			end := func() { resp.Body.Close() }
			want := error(nil)
			if how == "cancel" {
				end = cancel
				want = context.Canceled
			}
			clk.AfterFunc(2*time.Second, end)
			reads := readAll(resp.Body, clk)
			require.Len(t, reads, 2)
			assert.Equal(t, read{"a", 0, nil}, reads[0])
			assert.Equal(t, 2*time.Second, reads[1].at, "the stall ends at the function's instant")
			if want != nil {
				assert.ErrorIs(t, reads[1].err, want)
			} else {
				assert.ErrorContains(t, reads[1].err, "read on closed response body")
			}
		})
		t.Run(how+" in real time", func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp, err := retryhttptest.NewScript(stall).RoundTrip(newGet(ctx))
			require.NoError(t, err)
			defer resp.Body.Close()
			buf := make([]byte, 8)
			_, err = resp.Body.Read(buf)
			require.NoError(t, err)
			timer := time.AfterFunc(10*time.Millisecond, func() {
				if how == "cancel" {
					cancel()
				} else {
					resp.Body.Close()
				}
			})
			defer timer.Stop()
			start := time.Now()
			_, err = resp.Body.Read(buf)
			assert.Error(t, err)
			assert.Less(t, time.Since(start), 10*time.Second, "a 30 s stall ended when the body was stopped")
		})
	}
}

// TestStreamRealTime: without a Clock, a stall is waited in real time.
func TestStreamRealTime(t *testing.T) {
	s := retryhttptest.NewScript(retryhttptest.Stream(retryhttptest.Chunk{After: 20 * time.Millisecond, Data: "a"}))
	resp, err := s.RoundTrip(newGet(t.Context()))
	require.NoError(t, err)
	defer resp.Body.Close()
	start := time.Now()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "a", string(body))
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
}

// TestStreamOpen: a body made Open never ends: after its bytes a Read
// waits for the request's context (moving the Clock to each function due
// on it first) or for Close.
func TestStreamOpen(t *testing.T) {
	clk := retryhttptest.NewClock()
	ctx, cancel := clk.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := retryhttptest.NewScript(retryhttptest.Reply{Body: "x"}.Open().Cut(errors.New("never"))).WithClock(clk).RoundTrip(newGet(ctx))
	require.NoError(t, err)
	defer resp.Body.Close()
	reads := readAll(resp.Body, clk)
	assert.Equal(t, []read{{"x", 0, nil}, {"", 5 * time.Second, context.DeadlineExceeded}}, reads)

	resp, err = retryhttptest.NewScript(retryhttptest.Stream().Open()).RoundTrip(newGet(t.Context()))
	require.NoError(t, err)
	timer := time.AfterFunc(10*time.Millisecond, func() { resp.Body.Close() })
	defer timer.Stop()
	_, err = resp.Body.Read(make([]byte, 1))
	assert.ErrorContains(t, err, "read on closed response body")
}

func TestSplitAndEvent(t *testing.T) {
	assert.Equal(t, []retryhttptest.Chunk{{Data: "ab"}, {Data: "cd"}, {Data: "e"}}, retryhttptest.Split("abcde", 2))
	assert.Equal(t, []retryhttptest.Chunk{{Data: "a"}}, retryhttptest.Split("a", 0))
	assert.Empty(t, retryhttptest.Split("", 3))
	assert.Equal(t, "event: ping\ndata: {}\n\n", retryhttptest.Event("ping", "{}"))
	assert.Equal(t, "data: a\ndata: b\n\n", retryhttptest.Event("", "a\nb"))
}
