package bench

// The streams run itself: the workers, their calls, the report.

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Streams runs cfg against row: a fresh provider, a fresh base transport
// (BaseTransport(cfg.Workers)) under the row's client, then cfg.Workers
// workers that make cfg.Calls calls in all, each one after another, each
// with a context deadline of cfg.Timeout. A call is completed iff its
// caller read a whole answer with no error.
func Streams(row StreamsRow, cfg StreamsConfig) StreamsReport {
	p := newStreamProvider(cfg)
	defer func() {
		p.CloseClientConnections()
		p.Close()
	}()
	base := BaseTransport(cfg.Workers)
	defer base.CloseIdleConnections()
	client := row.client(base, cfg, p.URL)

	start := time.Now()
	calls := make([]streamCall, cfg.Calls)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < cfg.Calls; i = int(next.Add(1) - 1) {
				ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
				t0 := time.Now()
				ttft, whole, err := client(ctx, t0)
				cancel()
				calls[i] = streamCall{ttft: ttft, whole: whole, err: err}
			}
		})
	}
	wg.Wait()
	r := StreamsReport{Row: row.Name, Config: cfg, Calls: len(calls), Wall: time.Since(start), Requests: p.requests.Load()}
	p.mu.Lock()
	r.Failed = maps.Clone(p.failed)
	p.mu.Unlock()
	r.tally(calls)
	return r
}

// streamCall is one call, as its worker saw it.
type streamCall struct {
	ttft  time.Duration // 0: no token reached the caller
	whole bool
	err   error
}

func (r *StreamsReport) tally(calls []streamCall) {
	for _, k := range calls {
		if k.whole {
			r.Completed++
		}
		if k.ttft > 0 {
			r.TTFTs = append(r.TTFTs, k.ttft)
		}
		if k.err != nil && r.FirstErr == "" {
			r.FirstErr = k.err.Error()
		}
	}
	slices.Sort(r.TTFTs)
}
