package bench

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A server is a loopback httptest server that counts the requests and the
// new TCP connections it sees.
type server struct {
	*httptest.Server
	requests atomic.Int64
	conns    atomic.Int64
}

func newServer(h func(s *server, w http.ResponseWriter, r *http.Request)) *server {
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h(s, w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	return s
}

// BaseTransport is the base every library sends through in the loopback
// scenarios: net/http's default transport, without a proxy, that keeps up
// to idle connections per host.
func BaseTransport(idle int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxIdleConnsPerHost = max(idle, 2)
	return t
}

// CompletionBody is what the happy-path server answers: a small chat
// completion, as an LLM API sends it.
var CompletionBody = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1764500000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`)

// NewCompletionServer starts a loopback server that answers every request
// with 200 and CompletionBody.
func NewCompletionServer() *httptest.Server {
	return newServer(func(_ *server, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(CompletionBody)))
		w.Write(CompletionBody)
	}).Server
}

// PostResult is one large POST that fails with 503 on its first try and
// succeeds on its second.
type PostResult struct {
	Lib        string
	Size       int64   // bytes of the request body
	TriesSeen  int     // requests the server saw
	BytesSeen  []int64 // body bytes the server read, per try
	Status     int     // status handed to the caller; 0 with an error
	Err        string  // the error handed to the caller, if any
	Allocated  uint64  // bytes the process allocated during the call (runtime TotalAlloc delta)
	PeakHeap   int64   // highest heap (live and not yet swept objects) during the call, less the heap before it
	PeakRSS    int64   // VmHWM after the call less VmRSS before it (high-water mark reset first); -1 if unknown
	Samples    int     // heap samples taken during the call
	PayloadLen int64   // the caller's body, allocated before the measurement starts
}

// Post sends one POST of size bytes (a *bytes.Reader body, so
// http.NewRequest sets GetBody) through lib over a loopback server that reads
// every body to the end and answers 503 to the first try, 200 after. It
// measures the memory the call takes: run it in a fresh process so that
// nothing else allocates meanwhile (cmd/report does).
func Post(lib Lib, size int) (PostResult, error) {
	res := PostResult{Lib: lib.Name, Size: int64(size), PeakRSS: -1}
	var mu sync.Mutex
	srv := newServer(func(s *server, w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		mu.Lock()
		res.BytesSeen = append(res.BytesSeen, n)
		first := len(res.BytesSeen) == 1
		mu.Unlock()
		if r.URL.Path == "/warmup" {
			return
		}
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	defer srv.Close()
	base := BaseTransport(2)
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: lib.Wrap(base, Zero)}

	if err := warmUp(client, srv); err != nil {
		return res, err
	}
	mu.Lock()
	res.BytesSeen = nil
	mu.Unlock()
	srv.requests.Store(0)

	payload := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size] // touched, so it is resident
	res.PayloadLen = int64(len(payload))
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/files", bytes.NewReader(payload))
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")

	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	heap0 := heapObjects()
	rss0 := procStatus("VmRSS")
	if resetPeakRSS() != nil {
		rss0 = -1
	}
	sampler := startHeapSampler()

	resp, err := client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		res.Status = resp.StatusCode
	} else {
		res.Err = err.Error()
	}

	peak, samples := sampler.stop()
	res.Samples = samples
	runtime.ReadMemStats(&after)
	if hwm := procStatus("VmHWM"); hwm >= 0 && rss0 >= 0 {
		res.PeakRSS = hwm - rss0
	}
	res.Allocated = after.TotalAlloc - before.TotalAlloc
	res.PeakHeap = int64(peak) - int64(heap0)
	res.TriesSeen = int(srv.requests.Load())
	runtime.KeepAlive(payload)
	return res, nil
}

// warmUp sends one small POST through client: the connection, the
// libraries' lazy set-up.
func warmUp(client *http.Client, srv *server) error {
	resp, err := client.Post(srv.URL+"/warmup", "application/octet-stream", bytes.NewReader(make([]byte, 1024)))
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

// heapSampler samples the heap on a goroutine of its own while a call runs,
// every 200 µs, keeping the peak.
type heapSampler struct {
	done    chan struct{} // closed by stop
	sampled chan struct{} // closed when the goroutine has ended
	peak    uint64
	samples int
}

func startHeapSampler() *heapSampler {
	s := &heapSampler{done: make(chan struct{}), sampled: make(chan struct{})}
	go func() {
		defer close(s.sampled)
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			if h := heapObjects(); h > s.peak {
				s.peak = h
			}
			s.samples++
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peak and how many samples it took.
func (s *heapSampler) stop() (peak uint64, samples int) {
	close(s.done)
	<-s.sampled
	return s.peak, s.samples
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// procStatus returns a size field of /proc/self/status in bytes, -1 when
// there is none (not Linux).
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n << 10
				}
			}
		}
	}
	return -1
}

// resetPeakRSS sets VmHWM back to the current RSS (Linux 4.0+).
func resetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// OutageResult is a full outage of a loopback server, every try answered
// 503, met by many callers at once.
type OutageResult struct {
	Lib       string
	Callers   int
	Calls     int           // calls made, Callers * calls each
	Tries     int64         // requests the server saw
	NewConns  int64         // TCP connections the server accepted
	Errors    int           // calls that returned an error rather than the 503
	Wall      time.Duration // the whole scenario
	FirstErr  string        // the text of one such error
	Responses int           // calls that returned a response (the 503)
}

// Amplification is tries per call: 1 means no retries at all, 3 means every
// call was tried three times.
func (r OutageResult) Amplification() float64 { return float64(r.Tries) / float64(r.Calls) }

// Outage sends callers*each GET requests through one instance of lib (so a
// Quota or budget is shared by them all), callers at a time, with no backoff,
// to a loopback server that answers 503 to everything.
func Outage(lib Lib, callers, each int) OutageResult {
	srv := newServer(func(_ *server, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
	})
	base := BaseTransport(callers)
	client := &http.Client{Transport: lib.Wrap(base, Zero)}
	res := OutageResult{Lib: lib.Name, Callers: callers, Calls: callers * each}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				resp, err := client.Get(srv.URL + "/v1/chat/completions")
				mu.Lock()
				if err != nil {
					res.Errors++
					if res.FirstErr == "" {
						res.FirstErr = err.Error()
					}
				} else {
					res.Responses++
				}
				mu.Unlock()
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	res.Wall = time.Since(start)
	res.Tries = srv.requests.Load()
	res.NewConns = srv.conns.Load()
	base.CloseIdleConnections()
	srv.CloseClientConnections()
	srv.Close()
	return res
}

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
