package bench

// An outage with an end (issue 30): calls arrive open loop, on a fixed
// schedule whatever the clients do, at a provider that answers at once but
// fails for a while in the middle of the run, with 503 or by resetting the
// connection, and then comes back. What it measures is what a circuit is
// for: how little the clients send a provider that is down, how fast a
// call fails while it is, and how soon after its return the calls succeed
// again. cmd/outage runs every row and prints the tables.

import (
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// A Fault is how the provider fails during the outage.
type Fault int

const (
	// Fault503 answers every request 503 at once.
	Fault503 Fault = iota
	// FaultReset reads the request, then resets the connection: it
	// hijacks it, sets SO_LINGER to 0 and closes it, so the client reads
	// a reset (or an EOF) instead of an answer.
	FaultReset
)

// String is the fault's name in the tables and flags: "503" or "reset".
func (f Fault) String() string {
	if f == FaultReset {
		return "reset"
	}
	return "503"
}

// BlackoutConfig is one run of the outage scenario.
type BlackoutConfig struct {
	Rate     int           // calls started a second, each on its own goroutine, on a fixed schedule
	Duration time.Duration // calls are started for this long; the run then waits for them all
	// DownFrom and DownUntil bound the outage, from the run's start: a
	// request that reaches the provider in [DownFrom, DownUntil) fails as
	// Fault says, any other is answered 200 at once.
	DownFrom, DownUntil time.Duration
	Fault               Fault
	Timeout             time.Duration // each call's context deadline
	After               time.Duration // the window after the return that AfterShare judges
}

// DefaultBlackout is issue 30's run: 200 calls a second for 10 s, the
// provider down from 2 s to 7 s, 10 s a call, the share ok judged over the
// 2 s after the return.
var DefaultBlackout = BlackoutConfig{Rate: 200, Duration: 10 * time.Second,
	DownFrom: 2 * time.Second, DownUntil: 7 * time.Second, Timeout: 10 * time.Second, After: 2 * time.Second}

// down reports whether at (from the start) is in the outage.
func (c BlackoutConfig) down(at time.Duration) bool { return at >= c.DownFrom && at < c.DownUntil }

// BlackoutTargets are issue 30's targets for a row; a zero field is no
// target.
type BlackoutTargets struct {
	PerCall    float64       // requests during the outage per call started in it: at most
	RefusedP50 time.Duration // p50 of the time to fail during the outage: at most
	FirstOK    time.Duration // from the return to the first success: at most
	AfterShare float64       // share ok of the calls started in the After window: at least
}

// Missed names the targets r misses ("per call", "p50", "first ok",
// "share ok"), in that order; none when it meets them all. A row with no
// success after the return misses "first ok".
func (t BlackoutTargets) Missed(r BlackoutReport) []string {
	var missed []string
	if t.PerCall > 0 && !(r.PerCall() <= t.PerCall) {
		missed = append(missed, "per call")
	}
	if t.RefusedP50 > 0 && r.FailP50() > t.RefusedP50 {
		missed = append(missed, "p50")
	}
	if t.FirstOK > 0 && (r.FirstOK < 0 || r.FirstOK > t.FirstOK) {
		missed = append(missed, "first ok")
	}
	if t.AfterShare > 0 && !(r.AfterShare() >= t.AfterShare) {
		missed = append(missed, "share ok")
	}
	return missed
}

// BlackoutReport is one run of one row.
type BlackoutReport struct {
	Row    string
	Config BlackoutConfig

	Calls        int             // calls started
	DownCalls    int             // calls started during the outage
	DownOK       int             // of those, the calls that got a 200 (after the return)
	DownRequests int64           // requests that reached the provider during the outage
	FailTimes    []time.Duration // sorted: from start to end, of the calls started during the outage that failed
	FirstOK      time.Duration   // from the return to the first 200 any call got; -1 when none did
	AfterCalls   int             // calls started in [DownUntil, DownUntil + After)
	AfterOK      int             // of those, the calls that got a 200
	Failed       int             // calls of the whole run that did not get a 200
	FirstErr     string          // the text of one error a call was handed
	Conns        int64           // TCP connections the provider accepted
	Wall         time.Duration   // from the start to the end of the last call
}

// PerCall is the requests the provider got during the outage over the
// calls started during it: 1 is one try a call, 0 sends nothing; NaN when
// no call started during it.
func (r BlackoutReport) PerCall() float64 {
	if r.DownCalls == 0 {
		return math.NaN()
	}
	return float64(r.DownRequests) / float64(r.DownCalls)
}

// FailP50 is the median of FailTimes (0 when none failed).
func (r BlackoutReport) FailP50() time.Duration { return percentile(r.FailTimes, 0.50) }

// FailP99 is the 99th percentile of FailTimes (0 when none failed).
func (r BlackoutReport) FailP99() time.Duration { return percentile(r.FailTimes, 0.99) }

// AfterShare is AfterOK over AfterCalls; NaN when no call started then.
func (r BlackoutReport) AfterShare() float64 {
	if r.AfterCalls == 0 {
		return math.NaN()
	}
	return float64(r.AfterOK) / float64(r.AfterCalls)
}

// blackoutCall is one call, as its goroutine saw it: when it started and
// how long it took, after the run's start.
type blackoutCall struct {
	start, took time.Duration
	status      int
	err         error
}

// tally fills r from the calls.
func (r *BlackoutReport) tally(calls []blackoutCall) {
	c := r.Config
	r.Calls, r.FirstOK = len(calls), -1
	for _, k := range calls {
		ok := k.err == nil && k.status == http.StatusOK
		if !ok {
			r.Failed++
			if k.err != nil && r.FirstErr == "" {
				r.FirstErr = k.err.Error()
			}
		}
		switch {
		case c.down(k.start):
			r.DownCalls++
			if ok {
				r.DownOK++
			} else {
				r.FailTimes = append(r.FailTimes, k.took)
			}
		case k.start >= c.DownUntil && k.start < c.DownUntil+c.After:
			r.AfterCalls++
			if ok {
				r.AfterOK++
			}
		}
		if end := k.start + k.took; ok && end >= c.DownUntil && (r.FirstOK < 0 || end-c.DownUntil < r.FirstOK) {
			r.FirstOK = end - c.DownUntil
		}
		r.Wall = max(r.Wall, k.start+k.took)
	}
	slices.Sort(r.FailTimes)
}

// blackoutProvider is the provider of one run: a loopback server that
// fails as c says during the outage, timed from start, and counts the
// requests that reach it then.
type blackoutProvider struct {
	*server
	url   string
	start time.Time
	down  atomic.Int64 // requests received during the outage
}

// newBlackoutProvider starts the provider; its clock starts now.
func newBlackoutProvider(c BlackoutConfig) *blackoutProvider {
	p := &blackoutProvider{start: time.Now()}
	p.server = newServer(func(_ *server, w http.ResponseWriter, r *http.Request) {
		if !c.down(time.Since(p.start)) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(CompletionBody)))
			w.Write(CompletionBody)
			return
		}
		p.down.Add(1)
		if c.Fault == Fault503 {
			http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic("bench: hijack: " + err.Error())
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not a polite FIN
		}
		_ = conn.Close()
	})
	p.url = p.URL + "/v1/chat/completions"
	return p
}
