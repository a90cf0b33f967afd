package retryhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of WithIdempotencyKey (R11).

var idemKeyForm = regexp.MustCompile(`^[0-9a-f]{32}$`)

// idemSnapshot is what a caller can see of its request: RoundTrip must leave
// all of it as it was (R1).
type idemSnapshot struct {
	method, url, host string
	header            http.Header
	body              io.ReadCloser
	contentLength     int64
	hasGetBody        bool
}

func idemSnap(r *http.Request) idemSnapshot {
	return idemSnapshot{
		method: r.Method, url: r.URL.String(), host: r.Host,
		header: r.Header.Clone(), body: r.Body,
		contentLength: r.ContentLength, hasGetBody: r.GetBody != nil,
	}
}

func (s idemSnapshot) diff(t *testing.T, r *http.Request) {
	t.Helper()
	assert.Equal(t, s, idemSnap(r), "the caller's request, after RoundTrip")
}

func TestIdempotencyKeyByMethod(t *testing.T) {
	for _, tc := range []struct {
		method  string
		wantKey bool
	}{
		{http.MethodPost, true},
		{http.MethodPatch, true},
		{"PURGE", true}, // any method but the six idempotent ones
		{"QUERY", true}, // even one a server might treat as safe
		{"post", true},  // methods are case-sensitive: "post" is not POST
		{http.MethodGet, false},
		{http.MethodHead, false},
		{http.MethodOptions, false},
		{http.MethodTrace, false},
		{http.MethodPut, false},
		{http.MethodDelete, false},
		{"", false}, // net/http reads "" as GET
	} {
		t.Run("method "+tc.method, func(t *testing.T) {
			const body = `{"model":"m"}`
			_, script, tr := scripted(replies{reply(503), reply(502), reply(200)}, WithIdempotencyKey())
			req := newRequest(t, context.Background(), tc.method, "https://api.example.com/v1/chat", []byte(body))
			req.Method = tc.method // NewRequest turns "" into "GET"
			req.Header.Set("Authorization", "Bearer sk-test")
			before := idemSnap(req)

			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()

			reqs := script.Requests()
			require.Len(t, reqs, 3, "tries")
			first := reqs[0].Header.Values("Idempotency-Key")
			if tc.wantKey {
				require.Len(t, first, 1, "exactly one key")
				assert.Regexp(t, idemKeyForm, first[0], "32 lowercase hex digits")
			}
			for i, r := range reqs {
				if tc.wantKey {
					assert.Equal(t, first, r.Header.Values("Idempotency-Key"), "try %d: the first try's key", i+1)
				} else {
					assert.Empty(t, r.Header.Values("Idempotency-Key"), "try %d: no key for %q", i+1, tc.method)
				}
				assert.Equal(t, body, string(r.Body), "try %d: body", i+1)
				assert.Equal(t, "Bearer sk-test", r.Header.Get("Authorization"), "try %d: the caller's Authorization", i+1)
			}
			before.diff(t, req)
		})
	}
}

func TestIdempotencyKeyCallersOwnKept(t *testing.T) {
	_, script, tr := scripted(replies{reply(503), reply(429), reply(200)}, WithIdempotencyKey())
	req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte("{}"))
	req.Header.Set("Idempotency-Key", "order-42")
	before := idemSnap(req)

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	reqs := script.Requests()
	require.Len(t, reqs, 3, "tries")
	for i, r := range reqs {
		assert.Equal(t, []string{"order-42"}, r.Header.Values("Idempotency-Key"), "try %d", i+1)
	}
	before.diff(t, req)
}

func TestIdempotencyKeyOffByDefault(t *testing.T) {
	_, script, tr := scripted(replies{reply(503), reply(200)})
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte("{}")))
	require.NoError(t, err)
	resp.Body.Close()
	reqs := script.Requests()
	require.Len(t, reqs, 2, "tries")
	for i, r := range reqs {
		assert.Empty(t, r.Header.Values("Idempotency-Key"), "try %d, without WithIdempotencyKey", i+1)
	}
}

// A request made without a Header map still gets its key, and keeps no map.
func TestIdempotencyKeyNilHeader(t *testing.T) {
	_, script, tr := scripted(replies{reply(200)}, WithIdempotencyKey())
	req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", nil)
	req.Header = nil
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	reqs := script.Requests()
	require.Len(t, reqs, 1, "tries")
	assert.Regexp(t, idemKeyForm, reqs[0].Header.Get("Idempotency-Key"), "32 lowercase hex digits")
	assert.Nil(t, req.Header, "the caller's Header, left nil")
}

// Many calls at once through one Transport: each call keeps one key on every
// try, and no two calls share a key. (A Script answers tries in the order
// they come, whatever the call: each call's three tries need a base of their
// own.)
func TestIdempotencyKeyPerCallConcurrent(t *testing.T) {
	const goroutines, calls = 16, 8
	var (
		mu     sync.Mutex
		byCall = map[string][]string{} // call id (its body) -> key of each try
	)
	base := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		id, _ := io.ReadAll(r.Body)
		r.Body.Close()
		mu.Lock()
		byCall[string(id)] = append(byCall[string(id)], r.Header.Get("Idempotency-Key"))
		n := len(byCall[string(id)])
		mu.Unlock()
		if n < 3 {
			return respond(http.StatusServiceUnavailable, "busy"), nil
		}
		return respond(http.StatusOK, "ok"), nil
	})
	// Zero waits: the transport starts no timer.
	tr := New(base, WithBackoff(Backoff{}), WithIdempotencyKey())

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				id := []byte{byte('a' + g), byte('a' + i)}
				req, err := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat", bytes.NewReader(id))
				if !assert.NoError(t, err) {
					return
				}
				if resp, err := tr.RoundTrip(req); assert.NoError(t, err, "RoundTrip") {
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()

	assert.Len(t, byCall, goroutines*calls, "calls seen")
	seen := map[string]string{} // key -> call
	for id, keys := range byCall {
		if !assert.Len(t, keys, 3, "call %q: tries", id) {
			continue
		}
		assert.Regexp(t, idemKeyForm, keys[0], "call %q", id)
		assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys, "call %q: its first try's key on every try", id)
		assert.NotContains(t, seen, keys[0], "call %q shares its key with call %q", id, seen[keys[0]])
		seen[keys[0]] = id
	}
}

// A caller's own key is kept whatever the spelling of its header name: HTTP
// field names are case-insensitive, and net/http sends a name set straight
// into the map as it is. A second, random key would reach the server first
// (net/http writes header names sorted), so it would replace the caller's.
func TestIdempotencyKeyCallersOwnKeyAnySpelling(t *testing.T) {
	ttNoLeak(t)
	var (
		mu  sync.Mutex
		got [][]string
	)
	srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Values("Idempotency-Key"))
		mu.Unlock()
	})
	tr := New(faultBase(t), WithIdempotencyKey())
	req := newRequest(t, context.Background(), http.MethodPost, srv.URL, []byte("{}"))
	req.Header["idempotency-key"] = []string{"order-42"} // not canonical: sent as it is
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	tr.CloseIdleConnections()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, [][]string{{"order-42"}}, got, "the server saw only the caller's key")
}

// A spelling of Idempotency-Key with no value in a hand-built map is no key
// of the caller's (R11): the call gets one.
func TestIdempotencyKeyEmptyIsNone(t *testing.T) {
	_, script, tr := scripted(replies{reply(503), reply(200)}, WithIdempotencyKey())
	req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte("{}"))
	req.Header["idempotency-key"] = []string{}
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	reqs := script.Requests()
	require.Len(t, reqs, 2, "tries")
	key := reqs[0].Header.Get("Idempotency-Key")
	assert.Regexp(t, idemKeyForm, key, "32 lowercase hex digits")
	assert.Equal(t, key, reqs[1].Header.Get("Idempotency-Key"), "the same key on the retry")
}
