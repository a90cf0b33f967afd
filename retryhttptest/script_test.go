package retryhttptest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// get sends one request straight to rt, with no transport in between.
func get(t *testing.T, rt http.RoundTripper) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://api.example.com/v1/models", nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func TestScriptAnswersInOrderThenRepeatsTheLast(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		replies []retryhttptest.Reply
		want    []string // "status body" or the error, per try
	}{
		{"no replies: 200, every time", nil, []string{"200 ", "200 ", "200 "}},
		{"zero Reply is 200", []retryhttptest.Reply{{}}, []string{"200 ", "200 "}},
		{"in order, then the last again",
			[]retryhttptest.Reply{retryhttptest.Status(503), {Body: "a"}, {Status: 201, Body: "b"}},
			[]string{"503 ", "200 a", "201 b", "201 b"}},
		{"Err wins over Status and Body",
			[]retryhttptest.Reply{{Status: 200, Body: "x", Err: boom}, retryhttptest.Fail(syscall.ECONNRESET)},
			[]string{"boom", "connection reset by peer", "connection reset by peer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := retryhttptest.NewScript(tt.replies...)
			var got []string
			for range tt.want {
				code, body, err := get(t, s)
				if err != nil {
					got = append(got, err.Error())
					continue
				}
				got = append(got, strconv.Itoa(code)+" "+body)
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, len(tt.want), s.Len())
		})
	}
}

func TestScriptResponse(t *testing.T) {
	r := retryhttptest.Status(429, "Retry-After", "2", "X-Trace", "a", "X-Trace", "b")
	r.Body = "slow down"
	s := retryhttptest.NewScript(r)
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
	resp, err := s.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "429 Too Many Requests", resp.Status)
	assert.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "HTTP/1.1", resp.Proto)
	assert.Equal(t, int64(len("slow down")), resp.ContentLength)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"))
	assert.Equal(t, []string{"a", "b"}, resp.Header.Values("X-Trace"))
	assert.Same(t, req, resp.Request)

	// Every response has its own headers: changing one changes no other.
	resp.Header.Set("Retry-After", "999")
	resp2, err := s.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "2", resp2.Header.Get("Retry-After"))
	assert.Equal(t, "2", r.Header.Get("Retry-After"))
}

// TestStatusWithoutHeaders: a Reply made by Status without headers is the
// Reply literal, so that a table of them compares as written.
func TestStatusWithoutHeaders(t *testing.T) {
	assert.Equal(t, retryhttptest.Reply{Status: 429}, retryhttptest.Status(429))
	assert.Equal(t, retryhttptest.Reply{Status: 503, Header: http.Header{"Retry-After": {"2"}}}, retryhttptest.Status(503, "Retry-After", "2"))
}

func TestStatusPanicsOnANameWithoutValue(t *testing.T) {
	assert.PanicsWithValue(t, `retryhttptest: Status: header "Retry-After" has no value`, func() {
		//lint:ignore SA5012 the odd count is the point
		//nolint:staticcheck // the odd count is the point
		retryhttptest.Status(429, "Retry-After")
	})
}

func TestScriptRecordsRequests(t *testing.T) {
	clk := retryhttptest.NewClock()
	s := retryhttptest.NewScript().WithClock(clk)
	req, _ := http.NewRequest(http.MethodPost, "https://user:pw@api.example.com/v1/chat?key=k", strings.NewReader(`{"q":1}`))
	req.Header.Set("Authorization", "Bearer sk")
	body := &closeSpy{Reader: req.Body}
	req.Body = body
	_, err := s.RoundTrip(req)
	require.NoError(t, err)
	clk.Add(time.Second)
	_, err = s.RoundTrip(&http.Request{Method: http.MethodGet, URL: req.URL, Body: http.NoBody})
	require.NoError(t, err)

	req.Header.Set("Authorization", "changed") // the Script kept a copy
	got := s.Requests()
	require.Len(t, got, 2)
	assert.Equal(t, retryhttptest.Request{
		Method: http.MethodPost, URL: "https://user:pw@api.example.com/v1/chat?key=k",
		Header: http.Header{"Authorization": {"Bearer sk"}}, Body: []byte(`{"q":1}`), At: clk.Now().Add(-time.Second),
	}, got[0])
	assert.True(t, body.closed, "the body was closed")
	assert.Nil(t, got[1].Body)
	assert.Equal(t, time.Second, got[1].At.Sub(got[0].At))
}

func TestScriptStampsRealTimeWithoutClock(t *testing.T) {
	s := retryhttptest.NewScript()
	before := time.Now()
	_, _, err := get(t, s)
	require.NoError(t, err)
	at := s.Requests()[0].At
	assert.False(t, at.Before(before) || at.After(time.Now()))
}

type closeSpy struct {
	io.Reader
	closed bool
}

func (c *closeSpy) Close() error { c.closed = true; return nil }

// A body that fails to read fails the try with that error, as net/http
// would; the try uses up its reply and the Request keeps what was read.
func TestScriptBodyReadError(t *testing.T) {
	s := retryhttptest.NewScript(retryhttptest.Status(503), retryhttptest.Status(200))
	bad := &closeSpy{Reader: io.MultiReader(strings.NewReader("half"), iotest.ErrReader(io.ErrClosedPipe))}
	req, _ := http.NewRequest(http.MethodPut, "https://api.example.com/v1/files", nil)
	req.Body = bad
	_, err := s.RoundTrip(req)
	require.ErrorIs(t, err, io.ErrClosedPipe)
	assert.True(t, bad.closed)
	assert.Equal(t, []byte("half"), s.Requests()[0].Body)

	code, _, err := get(t, s)
	require.NoError(t, err)
	assert.Equal(t, 200, code, "the failed try used up the 503")
}

func TestScriptDoesNotSendWhenContextEnded(t *testing.T) {
	s := retryhttptest.NewScript()
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("user left")
	cancel(cause)
	body := &closeSpy{Reader: strings.NewReader("x")}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/", body)
	_, err := s.RoundTrip(req)
	assert.ErrorIs(t, err, cause)
	assert.True(t, body.closed)
	assert.Zero(t, s.Len(), "nothing was sent")
}

func TestReplyCut(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"given error", syscall.ECONNRESET, syscall.ECONNRESET},
		{"nil is unexpected EOF", nil, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := retryhttptest.NewScript(retryhttptest.Reply{Body: "data: hel"}.Cut(tt.err))
			for range 2 { // the reply is served again, whole again
				req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
				resp, err := s.RoundTrip(req)
				require.NoError(t, err)
				assert.Equal(t, int64(-1), resp.ContentLength)
				got, err := io.ReadAll(resp.Body)
				assert.ErrorIs(t, err, tt.want)
				assert.Equal(t, "data: hel", string(got))
				require.NoError(t, resp.Body.Close())
			}
		})
	}
}

// Hang on a context that can never end would block the test for ever.
func TestHangPanicsOnAContextThatNeverEnds(t *testing.T) {
	s := retryhttptest.NewScript(retryhttptest.Hang())
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
	assert.Panics(t, func() { _, _ = s.RoundTrip(req) })
}

// Without a *Clock, Hang blocks until the context ends in real time.
func TestHangWithoutClock(t *testing.T) {
	s := retryhttptest.NewScript(retryhttptest.Hang())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/", nil)
	_, err := s.RoundTrip(req)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// With a *Clock, Hang moves the clock itself until the context ends.
func TestHangMovesTheClock(t *testing.T) {
	clk := retryhttptest.NewClock()
	start := clk.Now()
	s := retryhttptest.NewScript(retryhttptest.Hang()).WithClock(clk)
	ctx, cancel := clk.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clk.AfterFunc(10*time.Second, func() {}) // someone else's: runs on the way
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/", nil)
	_, err := s.RoundTrip(req)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 30*time.Second, clk.Since(start))
	assert.Empty(t, clk.Waits())
}

// One Script (and one Clock) used by many goroutines at once: run with
// -race. Each try gets exactly one reply, and each reply goes to one try.
func TestScriptConcurrentUse(t *testing.T) {
	const n, tries = 16, 25
	replies := make([]retryhttptest.Reply, n*tries)
	for i := range replies {
		replies[i] = retryhttptest.Reply{Body: strconv.Itoa(i)}
	}
	clk := retryhttptest.NewClock()
	s := retryhttptest.NewScript(replies...).WithClock(clk)
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tries {
				req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/", bytes.NewReader([]byte("q")))
				resp, err := s.RoundTrip(req)
				if !assert.NoError(t, err) {
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				seen[string(body)]++
				mu.Unlock()
				_ = s.Requests()
				_ = s.Len()
				clk.Add(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	assert.Len(t, seen, n*tries, "every reply was served once")
	reqs := s.Requests()
	require.Len(t, reqs, n*tries)
	for i := 1; i < len(reqs); i++ {
		assert.False(t, reqs[i].At.Before(reqs[i-1].At), "in order of arrival")
		assert.Equal(t, []byte("q"), reqs[i].Body)
	}
}
