package retryhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"sync"
	"testing"
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
	if got := idemSnap(r); !reflect.DeepEqual(got, s) {
		t.Errorf("caller's request changed:\n got %+v\nwant %+v", got, s)
	}
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
			clk := newFakeClock()
			body := []byte(`{"model":"m"}`)
			base := newScript(status(http.StatusServiceUnavailable), status(http.StatusBadGateway), status(http.StatusOK))
			tr := New(base, WithClock(clk), WithBackoff(noJitter), WithIdempotencyKey())
			req := newRequest(t, context.Background(), tc.method, "https://api.example.com/v1/chat", body)
			req.Method = tc.method // NewRequest turns "" into "GET"
			req.Header.Set("Authorization", "Bearer sk-test")
			before := idemSnap(req)

			r := drive(t, tr, clk, req)
			if r.err != nil {
				t.Fatal(r.err)
			}
			r.resp.Body.Close()

			if got := base.tries(); got != 3 {
				t.Fatalf("tries = %d, want 3", got)
			}
			first := base.sent[0].req.Header.Values("Idempotency-Key")
			for i, s := range base.sent {
				keys := s.req.Header.Values("Idempotency-Key")
				switch {
				case !tc.wantKey && len(keys) != 0:
					t.Errorf("try %d: Idempotency-Key = %q, want none for %q", i+1, keys, tc.method)
				case tc.wantKey && len(keys) != 1:
					t.Errorf("try %d: Idempotency-Key = %q, want exactly one", i+1, keys)
				case tc.wantKey && !idemKeyForm.MatchString(keys[0]):
					t.Errorf("try %d: Idempotency-Key = %q, want 32 lowercase hex digits", i+1, keys[0])
				case tc.wantKey && keys[0] != first[0]:
					t.Errorf("try %d: Idempotency-Key = %q, want %q as on the first try", i+1, keys[0], first[0])
				}
				if !bytes.Equal(s.body, body) {
					t.Errorf("try %d: body = %q, want %q", i+1, s.body, body)
				}
				if got := s.req.Header.Get("Authorization"); got != "Bearer sk-test" {
					t.Errorf("try %d: Authorization = %q, want the caller's", i+1, got)
				}
			}
			before.diff(t, req)
		})
	}
}

func TestIdempotencyKeyCallersOwnKept(t *testing.T) {
	clk := newFakeClock()
	base := newScript(status(http.StatusServiceUnavailable), status(http.StatusTooManyRequests), status(http.StatusOK))
	tr := New(base, WithClock(clk), WithBackoff(noJitter), WithIdempotencyKey())
	req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte("{}"))
	req.Header.Set("Idempotency-Key", "order-42")
	before := idemSnap(req)

	r := drive(t, tr, clk, req)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	for i, s := range base.sent {
		if got := s.req.Header.Values("Idempotency-Key"); !reflect.DeepEqual(got, []string{"order-42"}) {
			t.Errorf("try %d: Idempotency-Key = %q, want [order-42]", i+1, got)
		}
	}
	before.diff(t, req)
}

func TestIdempotencyKeyOffByDefault(t *testing.T) {
	clk := newFakeClock()
	base := newScript(status(http.StatusServiceUnavailable), status(http.StatusOK))
	tr := New(base, WithClock(clk), WithBackoff(noJitter))
	req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", []byte("{}"))
	r := drive(t, tr, clk, req)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.resp.Body.Close()
	for i, s := range base.sent {
		if got := s.req.Header.Values("Idempotency-Key"); len(got) != 0 {
			t.Errorf("try %d: Idempotency-Key = %q without WithIdempotencyKey, want none", i+1, got)
		}
	}
}

// A request made without a Header map still gets its key, and keeps no map.
func TestIdempotencyKeyNilHeader(t *testing.T) {
	base := newScript(status(http.StatusOK))
	tr := New(base, WithClock(newFakeClock()), WithIdempotencyKey())
	req := newRequest(t, context.Background(), http.MethodPost, "https://api.example.com/v1/chat", nil)
	req.Header = nil
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := base.sent[0].req.Header.Get("Idempotency-Key"); !idemKeyForm.MatchString(got) {
		t.Errorf("Idempotency-Key = %q, want 32 lowercase hex digits", got)
	}
	if req.Header != nil {
		t.Errorf("caller's Header = %v, want it left nil", req.Header)
	}
}

// Many calls at once through one Transport: each call keeps one key on every
// try, and no two calls share a key.
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
	// Zero waits: the transport starts no timer, so no clock needs driving.
	tr := New(base, WithClock(newFakeClock()), WithBackoff(Backoff{}), WithIdempotencyKey())

	var wg sync.WaitGroup
	errs := make(chan error, goroutines*calls)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				id := []byte{byte('a' + g), byte('a' + i)}
				req, err := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat", bytes.NewReader(id))
				if err != nil {
					errs <- err
					return
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					errs <- err
					continue
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("RoundTrip: %v", err)
	}

	seen := map[string]string{}
	for id, keys := range byCall {
		if len(keys) != 3 {
			t.Errorf("call %q: %d tries, want 3", id, len(keys))
			continue
		}
		for i, k := range keys {
			if k != keys[0] || !idemKeyForm.MatchString(k) {
				t.Errorf("call %q try %d: key %q, want %q (32 hex) as on its first try", id, i+1, k, keys[0])
			}
		}
		if other, dup := seen[keys[0]]; dup {
			t.Errorf("calls %q and %q share the key %q", other, id, keys[0])
		}
		seen[keys[0]] = id
	}
	if len(byCall) != goroutines*calls {
		t.Errorf("calls seen = %d, want %d", len(byCall), goroutines*calls)
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
	tr := New(faultBase(t), WithClock(newFakeClock()), WithIdempotencyKey())
	req := newRequest(t, context.Background(), http.MethodPost, srv.URL, []byte("{}"))
	req.Header["idempotency-key"] = []string{"order-42"} // not canonical: sent as it is
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tr.CloseIdleConnections()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !reflect.DeepEqual(got[0], []string{"order-42"}) {
		t.Errorf("server saw Idempotency-Key %q, want only the caller's [order-42]", got)
	}
}
