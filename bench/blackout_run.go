package bench

// The outage run itself: the replicas, the open-loop schedule, the report.

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Blackout runs cfg against row: row.Replicas replicas (each over a base
// transport of its own, BaseTransport), then a fresh provider, whose start
// is the run's; then call i starts at i ÷ Rate on a goroutine of its own,
// through replica i mod Replicas, whatever the calls before it are doing,
// until Duration, and the run waits for every call to end. A call is a
// POST of a small chat request through an http.Client, with a context
// deadline of cfg.Timeout, its body read to the end; it is ok iff it got a
// 200.
func Blackout(row BlackoutRow, cfg BlackoutConfig) BlackoutReport {
	clients := make([]*http.Client, max(row.Replicas, 1))
	for i := range clients {
		base := BaseTransport(cfg.Rate/len(clients) + 1)
		defer base.CloseIdleConnections()
		clients[i] = &http.Client{Transport: row.Wrap(base)}
	}
	p := newBlackoutProvider(cfg)
	defer func() {
		p.CloseClientConnections()
		p.Close()
	}()
	calls := cfg.open(clients, p.url, p.start)
	r := BlackoutReport{Row: row.Name, Config: cfg, DownRequests: p.down.Load(), Conns: p.conns.Load()}
	r.tally(calls)
	return r
}

// open starts the calls on c's schedule from start and returns them once
// they have all ended, in the order they started.
func (c BlackoutConfig) open(clients []*http.Client, url string, start time.Time) []blackoutCall {
	n := int(int64(c.Duration) * int64(c.Rate) / int64(time.Second))
	calls := make([]blackoutCall, n)
	var wg sync.WaitGroup
	for i := range n {
		// The schedule is fixed: a late call does not move the next one.
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(c.Rate))))
		wg.Go(func() {
			t0 := time.Now()
			status, err := call(context.Background(), clients[i%len(clients)], url, chatRequest, c.Timeout)
			calls[i] = blackoutCall{start: t0.Sub(start), took: time.Since(t0), status: status, err: err}
		})
	}
	wg.Wait()
	return calls
}
