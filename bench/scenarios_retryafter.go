package bench

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// RetryAfterAsk is the wait the Retry-After scenario's server asks for.
const RetryAfterAsk = 2 * time.Second

// RetryAfterResult is how early the libraries came back after a
// `Retry-After: 2`.
type RetryAfterResult struct {
	Lib      string
	Status   int             // 429 or 503: the first try's answer
	Gaps     []time.Duration // per call: the retry's arrival at the server, less the moment the first answer was flushed
	Early    int             // gaps shorter than the ask
	Failures []string        // calls that did not end in 200 after exactly 2 tries
}

// Earliest is the shortest gap (0 when there is none).
func (r RetryAfterResult) Earliest() time.Duration {
	if len(r.Gaps) == 0 {
		return 0
	}
	return r.Gaps[0]
}

// Latest is the longest gap.
func (r RetryAfterResult) Latest() time.Duration {
	if len(r.Gaps) == 0 {
		return 0
	}
	return r.Gaps[len(r.Gaps)-1]
}

// RetryAfter makes, for each lib and each of 429 and 503, perCase calls at
// once to a loopback server that answers each call's first try with that
// status and `Retry-After: 2`, and its second with 200; all of them in the
// same 2-second window, so the scenario costs one real wait in all. Every
// library uses its Shaped backoff (400 ms first), so the server's ask is the
// longer wait. The gap is measured on the server, from the moment its first
// answer was flushed: the retry can only look later than the client meant,
// never earlier.
func RetryAfter(libs []Lib, perCase int) []RetryAfterResult {
	ra := newRetryAfterServer()
	defer ra.Close()

	statuses := []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}
	var (
		wg       sync.WaitGroup
		fmu      sync.Mutex
		failures = map[[2]int][]string{}
	)
	release := make(chan struct{})
	for li, lib := range libs {
		base := BaseTransport(perCase * len(statuses))
		defer base.CloseIdleConnections()
		client := &http.Client{Transport: lib.Wrap(base, Shaped), Timeout: 30 * time.Second}
		for _, st := range statuses {
			for c := range perCase {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-release
					url := fmt.Sprintf("%s/v1/chat/completions?call=%d-%d-%d", ra.URL, li, st, c)
					if fail := getOK(client, url); fail != "" {
						fmu.Lock()
						failures[[2]int{li, st}] = append(failures[[2]int{li, st}], fail)
						fmu.Unlock()
					}
				}()
			}
		}
	}
	close(release)
	wg.Wait()
	results := make([]RetryAfterResult, 0, len(libs)*len(statuses))
	for li, lib := range libs {
		for _, st := range statuses {
			results = append(results, tallyRetryAfter(lib, st, perCase, ra.gaps[[2]int{li, st}], failures[[2]int{li, st}]))
		}
	}
	return results
}

// retryAfterServer answers each call's first try with its status and
// `Retry-After: 2`, and its second with 200, and keeps the gap between
// them per lib and status. A call names itself in its query:
// call=lib-status-n.
type retryAfterServer struct {
	*server
	mu    sync.Mutex
	first map[retryAfterCall]time.Time // when a call's first answer was flushed
	gaps  map[[2]int][]time.Duration   // by lib and status
}

type retryAfterCall struct{ lib, status, call int }

func newRetryAfterServer() *retryAfterServer {
	ra := &retryAfterServer{first: map[retryAfterCall]time.Time{}, gaps: map[[2]int][]time.Duration{}}
	ra.server = newServer(func(_ *server, w http.ResponseWriter, r *http.Request) { ra.serve(w, r) })
	return ra
}

func (ra *retryAfterServer) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var k retryAfterCall
	if _, err := fmt.Sscanf(r.URL.Query().Get("call"), "%d-%d-%d", &k.lib, &k.status, &k.call); err != nil {
		http.Error(w, "bad call", http.StatusBadRequest)
		return
	}
	ra.mu.Lock()
	t1, seen := ra.first[k]
	ra.mu.Unlock()
	if seen {
		ra.mu.Lock()
		ra.gaps[[2]int{k.lib, k.status}] = append(ra.gaps[[2]int{k.lib, k.status}], arrived.Sub(t1))
		ra.mu.Unlock()
		w.Write([]byte("ok"))
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfterAsk/time.Second)))
	w.WriteHeader(k.status)
	w.(http.Flusher).Flush()
	ra.mu.Lock()
	ra.first[k] = time.Now()
	ra.mu.Unlock()
}

// getOK GETs url through client and reads the answer to the end: "" for a
// 200, else what went wrong.
func getOK(client *http.Client, url string) (fail string) {
	resp, err := client.Get(url)
	switch {
	case err != nil:
		fail = err.Error()
	case resp.StatusCode != http.StatusOK:
		fail = "status " + strconv.Itoa(resp.StatusCode)
	}
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return fail
}

// tallyRetryAfter sorts the gaps of one lib and status and counts those
// shorter than the server's ask, and the calls that never came back.
func tallyRetryAfter(lib Lib, status, perCase int, g []time.Duration, failures []string) RetryAfterResult {
	sort.Slice(g, func(i, j int) bool { return g[i] < g[j] })
	r := RetryAfterResult{Lib: lib.Name, Status: status, Gaps: g, Failures: failures}
	for _, d := range g {
		if d < RetryAfterAsk {
			r.Early++
		}
	}
	if n := len(g) + len(r.Failures); n < perCase {
		r.Failures = append(r.Failures, fmt.Sprintf("%d calls never retried", perCase-n))
	}
	return r
}

// A RetryAfterForm is one way a server can say "wait".
type RetryAfterForm struct {
	Name   string
	Header http.Header
	Want   time.Duration // what the server asked for
}

// RetryAfterForms are the forms of R5, relative to now, each asking for
// about 3 s (the dates have one-second resolution, so 2-3 s).
func RetryAfterForms(now time.Time) []RetryAfterForm {
	at := now.Add(3 * time.Second).UTC()
	h := func(kv ...string) http.Header {
		x := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			x.Set(kv[i], kv[i+1])
		}
		return x
	}
	want := at.Truncate(time.Second).Sub(now)
	return []RetryAfterForm{
		{"Retry-After: 3", h("Retry-After", "3"), 3 * time.Second},
		{"Retry-After: 2.5", h("Retry-After", "2.5"), 2500 * time.Millisecond},
		{"retry-after-ms: 3000 (OpenAI, Anthropic)", h("Retry-After-Ms", "3000"), 3 * time.Second},
		{"Retry-After: <IMF-fixdate>", h("Retry-After", at.Format(http.TimeFormat)), want},
		{"Retry-After: <RFC 850 date>", h("Retry-After", at.Format(time.RFC850)), want},
		{"Retry-After: <asctime date>", h("Retry-After", at.Format(time.ANSIC)), want},
		{"Retry-After: \" 3 \" (spaces)", h("Retry-After", " 3 "), 3 * time.Second},
	}
}
