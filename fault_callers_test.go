package retryhttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A 429 storm: many callers at once, every call throttled twice with
// Retry-After before it gets through. Each wait is the server's ask.
func TestFaultThrottleStorm(t *testing.T) {
	ttNoLeak(t)
	const goroutines, calls = 16, 4
	var (
		mu    sync.Mutex
		tries = map[string]int{}
	)
	srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Call")
		mu.Lock()
		tries[id]++
		n := tries[id]
		mu.Unlock()
		if n <= 2 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok")
	})
	// The callers share the kit's Clock, on which their waits overlap and
	// take no time. (A wait counts from its response, so on a shared clock a
	// caller's timer may be shorter than its wait by what others moved the
	// clock meanwhile: the waits asserted are the ones decided.)
	var waits []time.Duration // what each retry waits: the server's ask
	tr := New(faultBase(t), WithClock(newClock()), WithBackoff(Backoff{Base: 10 * time.Millisecond}),
		WithObserver(func(_ context.Context, a Attempt) {
			if a.Outcome == Retrying {
				mu.Lock()
				waits = append(waits, a.Wait)
				mu.Unlock()
			}
		}))

	ctx, cancel := context.WithCancel(context.Background())
	watchdog := time.AfterFunc(10*time.Second, cancel)
	defer watchdog.Stop()
	var wg sync.WaitGroup
	statuses := make(chan string, goroutines*calls)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				req.Header.Set("X-Call", fmt.Sprint(g, "-", i))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					statuses <- err.Error()
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses <- strconv.Itoa(resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		assert.Equal(t, "200", s, "how a call ended")
	}
	assert.Len(t, waits, 2*goroutines*calls, "waits: two per call")
	for _, d := range waits {
		if !assert.Equal(t, 2*time.Second, d, "a wait: the server's ask") {
			break
		}
	}
	tr.CloseIdleConnections()
	srv.waitNoConns(t)
}

// callEnd is how one call of TestFaultManyCallers ended: the status of the
// response handed back (err nil, or what was wrong with its body), or the
// error RoundTrip returned (status 0).
type callEnd struct {
	status int
	err    error
}

// countCallEnds checks how each call of TestFaultManyCallers ended (a 200, or
// an exhausted 503, 429 or *Error) and counts the ends by status, "error" for
// an *Error. An end that is neither is reported and not counted.
func countCallEnds(t *testing.T, results <-chan callEnd) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for o := range results {
		if o.err == nil {
			assert.Contains(t, []int{200, 503, 429}, o.status, "a call's status: 200, or an exhausted 503 or 429")
			counts[strconv.Itoa(o.status)]++
			continue
		}
		var e *Error
		if !assert.ErrorAs(t, o.err, &e, "a call's end: a response or an exhausted *Error") {
			continue
		}
		assert.Equal(t, Exhausted, e.Reason, "%v", o.err)
		assert.Equal(t, 3, e.Tries, "%v", o.err)
		assert.Error(t, e.Err, "the cause")
		assert.NotErrorAs(t, e.Err, new(*Error), "an *Error inside an *Error")
		assert.NotErrorIs(t, o.err, context.Canceled, "a call cut by the 10 s watchdog")
		counts["error"]++
	}
	return counts
}

// 32 goroutines x 10 calls through one Transport against a server that fails
// a share of its tries in every way it can: each call ends in a response or a
// typed *Error, and every connection is closed in the end.
func TestFaultManyCallers(t *testing.T) {
	ttNoLeak(t)
	const goroutines, calls = 32, 10
	var n atomic.Int64
	srv := newFaultServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch k := n.Add(1); {
		case k%7 == 3:
			faultReset(t, w)
		case k%5 == 1:
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		case k%11 == 4:
			http.Error(w, "slow down", http.StatusTooManyRequests)
		default:
			io.WriteString(w, "ok")
		}
	})
	// Zero waits: the transport starts no timer. The Quota is big enough
	// never to refuse; it is here to be shared by every caller under the
	// race detector.
	tr := New(faultBase(t), WithBackoff(Backoff{}), WithIdempotencyKey(), WithQuota(NewQuota(1e6, 0.1)))

	ctx, cancel := context.WithCancel(context.Background())
	watchdog := time.AfterFunc(10*time.Second, cancel)
	defer watchdog.Stop()
	results := make(chan callEnd, goroutines*calls)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				var body io.Reader
				method := http.MethodGet
				if (g+i)%2 == 1 {
					method, body = http.MethodPost, strings.NewReader(`{"prompt":"hi"}`)
				}
				req, _ := http.NewRequestWithContext(ctx, method, srv.URL, body)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					results <- callEnd{err: err}
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && string(b) != "ok" {
					err = fmt.Errorf("200 with body %q", b)
				}
				results <- callEnd{status: resp.StatusCode, err: err}
			}
		}()
	}
	wg.Wait()
	close(results)

	counts := countCallEnds(t, results)
	total := 0
	for _, c := range counts {
		total += c
	}
	t.Logf("%d calls, %d tries: %v", total, n.Load(), counts)
	assert.Equal(t, goroutines*calls, total, "calls ended")
	assert.NotZero(t, counts["200"], "calls that succeeded")
	assert.Greater(t, n.Load(), int64(goroutines*calls), "tries the server saw: more than the calls, retries")
	tr.CloseIdleConnections()
	srv.waitNoConns(t)
}
