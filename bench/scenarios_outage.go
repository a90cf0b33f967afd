package bench

import (
	"io"
	"net/http"
	"sync"
	"time"
)

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
