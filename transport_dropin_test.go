package retryhttp

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFirstTrySendsCallerRequest checks R1 on the happy path: the base gets
// the caller's own request and the response comes back as the base made it.
func TestFirstTrySendsCallerRequest(t *testing.T) {
	want := respond(200, "hello")
	body := want.Body
	var sent *http.Request
	tr := New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return want, nil
	}))
	req := newRequest(t, context.Background(), "GET", "https://api.example.com/v1", nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Same(t, want, resp, "the base's response")
	assert.Same(t, req, sent, "the first try sends the caller's request")
	assert.Equal(t, body, resp.Body, "the response's body, not replaced")
}

// TestRetriesSendClonesAndNeverTouchTheCaller checks R1 and R10 on a POST
// that fails twice: each retry is a new request with the whole body, byte for
// byte, and the caller's request is the same after as before.
func TestRetriesSendClonesAndNeverTouchTheCaller(t *testing.T) {
	payload := make([]byte, 1<<20)
	rand.Read(payload)
	clk := newClock()
	script := retryhttptest.NewScript(reply(503), retryhttptest.Fail(errRefused), reply(200))
	base := &spy{script: script}
	tr := New(base, WithClock(clk))
	req := newRequest(t, context.Background(), "POST", "https://api.example.com/v1/chat", payload)
	req.Header.Set("Content-Type", "application/json")
	before := *req
	beforeHeader := req.Header.Clone()

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	sent := base.sent()
	require.Len(t, sent, 3, "tries")
	for i, r := range script.Requests() {
		assert.True(t, bytes.Equal(payload, r.Body), "try %d sent %d bytes, want the same %d bytes", i+1, len(r.Body), len(payload))
		assert.EqualValues(t, len(payload), sent[i].ContentLength, "try %d: ContentLength", i+1)
	}
	assert.Same(t, req, sent[0], "R1 lets the first try send the caller's request")
	for i, r := range sent[1:] {
		assert.NotSame(t, req, r, "retry %d sends a clone", i+1)
	}
	assert.Equal(t, beforeHeader, req.Header, "the caller's header")
	assert.True(t, req.Body == before.Body && req.URL == before.URL && req.Method == before.Method && req.Context() == before.Context(),
		"the caller's request was modified")
}

// TestBaseContractViolations checks that a base breaking the RoundTripper
// contract cannot make RoundTrip break it.
func TestBaseContractViolations(t *testing.T) {
	get := func() *http.Request {
		return newRequest(t, context.Background(), "GET", "https://api.example.com", nil)
	}
	respBody := &trackedBody{r: bytes.NewReader(nil)}
	both := roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: respBody}, errRefused
	})
	resp, err := New(both, WithMaxRetries(0)).RoundTrip(get())
	assert.Nil(t, resp, "base returning both: only the error")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "base returning both")
	assert.EqualValues(t, 1, respBody.closed.Load(), "the stray response's body is closed")

	neither := roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	resp, err = New(neither, WithMaxRetries(0)).RoundTrip(get())
	assert.Nil(t, resp, "base returning neither")
	assert.ErrorIs(t, err, errNilResponse, "base returning neither")

	nilBody := roundTripperFunc(func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: 204}, nil })
	resp, err = New(nilBody).RoundTrip(get())
	require.NoError(t, err, "base returning a nil Body")
	assert.NotNil(t, resp.Body, "base returning a nil Body: a closable body")

	_, err = New(nil).RoundTrip(nil)
	assert.Error(t, err, "RoundTrip(nil)")
}

// TestCloseIdleConnections checks that the method reaches the base, and that
// the retry path never calls it (R1).
func TestCloseIdleConnections(t *testing.T) {
	base := &idleCounter{Script: retryhttptest.NewScript(reply(503), reply(503), reply(200))}
	tr := New(base, WithClock(newClock()))
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "https://api.example.com", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 3, base.Len(), "tries")
	assert.Zero(t, base.closed, "CloseIdleConnections calls by the retries")
	tr.CloseIdleConnections()
	assert.Equal(t, 1, base.closed, "CloseIdleConnections calls that reached the base")
	New(roundTripperFunc(func(*http.Request) (*http.Response, error) { return nil, nil })).CloseIdleConnections() // no method: no panic
}

type idleCounter struct {
	*retryhttptest.Script
	closed int
}

func (b *idleCounter) CloseIdleConnections() { b.closed++ }

// TestConcurrentUse runs many calls through one Transport at once: every
// call gets its own 503 then its 200 (2 tries each, nothing crossed between
// calls), and every call has its own number (go test -race checks the rest).
func TestConcurrentUse(t *testing.T) {
	const calls = 64
	var tries sync.Map // call id -> *atomic.Int32
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		n, _ := tries.LoadOrStore(r.URL.Path, new(atomic.Int32))
		if n.(*atomic.Int32).Add(1) == 1 {
			return respond(503, "busy"), nil
		}
		return respond(200, "ok"), nil
	})
	var (
		mu      sync.Mutex
		numbers = map[uint64]string{}
	)
	tr := New(base, WithBackoff(Backoff{}), WithObserver(func(_ context.Context, a Attempt) {
		mu.Lock()
		defer mu.Unlock()
		if other, ok := numbers[a.Call]; ok {
			assert.Equal(t, other, a.URL, "two calls share Call %d", a.Call)
		}
		numbers[a.Call] = a.URL
	}))
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com/%d", i), nil)
			resp, err := tr.RoundTrip(req)
			if assert.NoError(t, err) {
				assert.Equal(t, 200, resp.StatusCode)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, numbers, calls, "distinct call numbers")
	tries.Range(func(path, n any) bool {
		assert.EqualValues(t, 2, n.(*atomic.Int32).Load(), "tries of %s", path)
		return true
	})
}

// TestCallNumbersUnique: the sharded call counter never hands out one number
// twice, from many goroutines at once, and its numbers start small: each
// shard's first is its index plus one, so a fresh counter's first number is
// between 1 and the number of shards.
func TestCallNumbersUnique(t *testing.T) {
	for range 50 {
		first := new(callNumbers).next()
		require.True(t, first >= 1 && first <= callShards, "a fresh counter's first number: %d", first)
	}
	var c callNumbers
	const goroutines, each = 8, 2000
	got := make(chan uint64, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				got <- c.next()
			}
		}()
	}
	wg.Wait()
	close(got)
	seen := map[uint64]bool{}
	for n := range got {
		require.False(t, seen[n], "number %d handed out twice", n)
		require.NotZero(t, n)
		seen[n] = true
	}
}
