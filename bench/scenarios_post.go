package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

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
