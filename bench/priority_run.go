package bench

// The priority run itself (issue 37): the provider that notes who reached
// it when, the open-loop people, the batch's fan-out, and the report.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// callHeader says on each request whose call it is, for the provider's
// notes: "person" or "batch". A retry's clone keeps it.
const callHeader = "X-Bench-Call"

// priorityCap ends a run that has not ended on its own: every call still
// running is cancelled (a cancel, not a deadline: a deadline would change
// the order R27 gives), and counted as not answered.
const priorityCap = 10 * time.Minute

// arrival is one request as the provider saw it.
type arrival struct {
	at     time.Duration // from the run's start, as it arrived
	batch  bool
	status int // what the provider answered; 0 when the client left first
}

// notingProvider is bench's provider (retryhttptest's, as Provider) that
// also notes each request's arrival, whose call it is, and its answer.
type notingProvider struct {
	url   string
	start time.Time
	kit   *retryhttptest.Provider
	srv   *server

	mu       sync.Mutex
	arrivals []arrival
}

func newNotingProvider(c PriorityConfig) *notingProvider {
	g := GoodputConfig{Rate: c.Rate, Burst: c.Burst, Dialect: c.Dialect, Latency: c.Latency}
	p := &notingProvider{start: time.Now()}
	p.kit = retryhttptest.NewProvider(g.providerConfig())
	p.srv = newServer(func(_ *server, w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		i := len(p.arrivals)
		p.arrivals = append(p.arrivals, arrival{at: time.Since(p.start), batch: r.Header.Get(callHeader) == "batch"})
		p.mu.Unlock()
		p.kit.ServeHTTP(&statusWriter{ResponseWriter: w, p: p, i: i}, r)
	})
	p.url = p.srv.URL + "/v1/chat/completions"
	return p
}

func (p *notingProvider) close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// statusWriter notes in p's arrival i the status it is given, before the
// answer goes out.
type statusWriter struct {
	http.ResponseWriter
	p     *notingProvider
	i     int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.p.mu.Lock()
		w.p.arrivals[w.i].status = code
		w.p.mu.Unlock()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// priorityCall is one call, as its caller saw it.
type priorityCall struct {
	start, end time.Duration // from the run's start: Do, and the end of the body
	status     int
	err        error
}

// Priority runs cfg with row's marks. Each of the K replicas (cfg.Replicas,
// at least 1) is a Transport over a base transport of its own
// (BaseTransport), with cooldown() as its Cooldown, WithMaxRetries(cfg.
// Retries) and the Shaped backoff; cooldown nil gives each its own
// in-process Cooldown (NewCooldown(nil)). Then a fresh provider, whose
// start is the run's: person i starts at i ÷ PeopleRate on a goroutine of
// its own (through replica 1 + i mod (K−1), or the only one), with a
// Budget of cfg.Budget and no deadline, whatever the calls before it are
// doing, until PeopleFor; at BatchAt the batch's BatchCalls calls start at
// once on goroutines of their own, through replica 0, with no Budget and
// no deadline. The run waits for every call to end. A call is a POST of a
// small chat request through an http.Client, its body read to the end; it
// is answered iff it got a 200.
func Priority(row PriorityRow, cfg PriorityConfig, cooldown func() *retryhttp.Cooldown) PriorityReport {
	k := max(cfg.Replicas, 1)
	clients := make([]*http.Client, k)
	for i := range clients {
		base := BaseTransport(cfg.Rate + cfg.PeopleRate)
		defer base.CloseIdleConnections()
		cd := retryhttp.NewCooldown(nil)
		if cooldown != nil {
			cd = cooldown()
		}
		clients[i] = &http.Client{Transport: retryhttp.New(base, append(retryhttpOptions(Shaped),
			retryhttp.WithCooldown(cd), retryhttp.WithMaxRetries(cfg.Retries))...)}
	}
	personClient := func(i int) *http.Client {
		if k == 1 {
			return clients[0]
		}
		return clients[1+i%(k-1)]
	}

	p := newNotingProvider(cfg)
	defer p.close()
	start := p.start
	run, stop := context.WithCancel(context.Background())
	defer stop()
	capped := time.AfterFunc(priorityCap, stop)
	defer capped.Stop()

	people := make([]priorityCall, cfg.People())
	batch := make([]priorityCall, cfg.BatchCalls)
	var batchStart time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(time.Until(start.Add(cfg.BatchAt)))
		batchStart = time.Since(start)
		ctx := run
		if row.Marked {
			ctx = retryhttp.WithPriority(ctx, retryhttp.Background)
		}
		for j := range batch {
			wg.Go(func() { batch[j] = priorityDo(ctx, clients[0], p.url, "batch", start) })
		}
	})
	for i := range people {
		// The schedule is fixed: a late call does not move the next one.
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(cfg.PeopleRate))))
		wg.Go(func() {
			ctx := retryhttp.WithBudget(run, retryhttp.NewBudget(cfg.Budget))
			if !row.Marked {
				ctx = retryhttp.WithPriority(ctx, retryhttp.Normal)
			}
			people[i] = priorityDo(ctx, personClient(i), p.url, "person", start)
		})
	}
	wg.Wait()

	r := PriorityReport{Row: row.Name, Config: cfg, BatchStart: batchStart}
	p.mu.Lock()
	arrivals := slices.Clone(p.arrivals)
	p.mu.Unlock()
	r.tally(people, batch, arrivals)
	r.Provider = p.kit.Stats()
	return r
}

// priorityDo sends one call of the kind ("person" or "batch") under ctx,
// with no deadline of its own, and reads the answer to the end.
func priorityDo(ctx context.Context, client *http.Client, url, kind string, start time.Time) priorityCall {
	c := priorityCall{start: time.Since(start)}
	c.status, c.err = func() (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(chatRequest))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(callHeader, kind)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, fmt.Errorf("reading the body: %w", err)
		}
		return resp.StatusCode, nil
	}()
	c.end = time.Since(start)
	return c
}

// tally counts the calls and the provider's arrivals into r.
func (r *PriorityReport) tally(people, batch []priorityCall, arrivals []arrival) {
	r.tallyBatch(batch)
	r.tallyPeople(people)
	for _, c := range batch {
		if c.err == nil && c.status == http.StatusOK && r.draining(c.end) {
			r.DrainingSuc++
		}
	}
	r.tallyArrivals(arrivals, len(batch) > 0)
}

// draining reports whether t (from the run's start) is in the batch's
// drain, both ends in.
func (r *PriorityReport) draining(t time.Duration) bool {
	return t >= r.BatchStart && t <= r.BatchEnd
}

// tallyBatch counts the batch's calls, and sets BatchEnd (BatchStart when
// there is no batch).
func (r *PriorityReport) tallyBatch(batch []priorityCall) {
	r.BatchEnd = r.BatchStart
	var took []time.Duration
	for _, c := range batch {
		r.BatchEnd = max(r.BatchEnd, c.end)
		r.Wall = max(r.Wall, c.end)
		took = append(took, c.end-c.start)
		switch {
		case c.err == nil && c.status == http.StatusOK:
			r.BatchOK++
		case c.err == nil && c.status == http.StatusTooManyRequests:
			r.Batch429++
		default:
			r.BatchOther++
			r.noteErr(c)
		}
	}
	sorted := slices.Sorted(slices.Values(took))
	r.BatchP50 = percentile(sorted, 0.5)
	if len(sorted) > 0 {
		r.BatchMax = sorted[len(sorted)-1]
	}
}

// tallyPeople counts the people's calls, after tallyBatch.
func (r *PriorityReport) tallyPeople(people []priorityCall) {
	var all, draining, answered, busy []time.Duration
	r.People = len(people)
	for _, c := range people {
		r.Wall = max(r.Wall, c.end)
		took := c.end - c.start
		all = append(all, took)
		ok := c.err == nil && c.status == http.StatusOK
		switch {
		case ok:
			r.PeopleOK++
		case errors.Is(c.err, retryhttp.ErrRateLimited):
			r.PeopleBusy++
			busy = append(busy, took)
		default:
			r.PeopleOther++
			r.noteErr(c)
		}
		if c.start > r.Config.PeopleFor+time.Second {
			r.LatePeople++
		}
		if r.draining(c.start) {
			r.Draining++
			draining = append(draining, took)
			if ok {
				r.DrainingOK++
				answered = append(answered, took)
			}
		}
		if ok && r.draining(c.end) {
			r.DrainingSuc++
		}
	}
	r.PeopleP99, r.DrainingP99, r.AnsweredP99 = p99Of(all), p99Of(draining), p99Of(answered)
	r.BusyP50 = percentile(slices.Sorted(slices.Values(busy)), 0.5)
}

// tallyArrivals counts what the provider saw: every request and its
// answer, and, when there was a batch, the fan-out's first second.
func (r *PriorityReport) tallyArrivals(arrivals []arrival, batch bool) {
	for _, a := range arrivals {
		r.Requests++
		switch a.status {
		case http.StatusOK:
			r.Admitted++
		case http.StatusTooManyRequests:
			r.Refused++
			sec := int(a.at / time.Second)
			for len(r.RefusedBySecond) <= sec {
				r.RefusedBySecond = append(r.RefusedBySecond, 0)
			}
			r.RefusedBySecond[sec]++
		}
		since := a.at - r.BatchStart
		if !batch || since < 0 || since >= time.Second {
			continue
		}
		if a.batch {
			r.Batch1s++
			if since < 100*time.Millisecond {
				r.Batch100ms++
			}
		}
		if a.status == http.StatusTooManyRequests {
			r.Refused1s++
			if a.batch {
				r.Batch429s++
			}
		}
	}
}

func (r *PriorityReport) noteErr(c priorityCall) {
	if r.FirstErr != "" {
		return
	}
	if c.err != nil {
		r.FirstErr = c.err.Error()
	} else {
		r.FirstErr = fmt.Sprintf("status %d", c.status)
	}
}
