package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
)

// outage is the demo's last scene: a provider down for a second, then
// back (R25). Four workers call it 200 times; a circuit per model makes
// the calls fail at once while it is down, and each falls back to another
// model, instead of paying three tries each.
func outage() error {
	var got atomic.Int64
	var down atomic.Bool
	primary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got.Add(1)
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable) // Anthropic's 529, Gemini's 503: down, not busy
			return
		}
		_, _ = fmt.Fprint(w, `{"answer":"primary"}`)
	}))
	defer primary.Close()
	fallback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, `{"answer":"fallback"}`)
	}))
	defer fallback.Close()

	cd := retryhttp.NewCooldown(nil, retryhttp.WithCircuit(retryhttp.Circuit{Failures: 5, Open: 300 * time.Millisecond}))
	client := &http.Client{Transport: retryhttp.New(http.DefaultTransport, retryhttp.WithCooldown(cd),
		retryhttp.WithBackoff(retryhttp.Backoff{Base: 50 * time.Millisecond, Factor: 2}))}
	var fellBack, answered atomic.Int64
	call := func() {
		if status, err := get(client, primary.URL); err == nil && status == http.StatusOK {
			answered.Add(1)
			return
		} else if errors.Is(err, retryhttp.ErrUnavailable) {
			if status, err := get(client, fallback.URL); err == nil && status == http.StatusOK {
				fellBack.Add(1)
			}
		}
	}
	down.Store(true)
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				call()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	time.Sleep(time.Second)
	duringOutage := got.Load()
	down.Store(false)
	wg.Wait()
	fmt.Printf("the provider, down for 1 s, got %d requests; %d calls fell back to another model at once, %d were answered by it (%v in all)\n",
		duringOutage, fellBack.Load(), answered.Load(), time.Since(start).Round(100*time.Millisecond))
	fmt.Println("(without the circuit every call would have sent 3 tries to the provider while it was down: the circuit sent 5 and one probe each 300 ms)")
	return nil
}

// get makes one GET and returns its status.
func get(client *http.Client, url string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
