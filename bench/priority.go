package bench

// People and a batch on one limit (issue 37, R27): people's calls arrive
// open loop, each with the public tier's Budget, at a provider that admits
// R requests a second; a while in, a batch fans out a few thousand calls at
// once, with no Budget and no deadline. What it measures is who the limit
// serves while the batch drains (the people first, when the batch is
// marked Background), and whether the fan-out storms the provider or is
// paced from its first try. cmd/priority runs the rows and prints the
// tables.

import (
	"math"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// PriorityConfig is one run of the priority scenario.
type PriorityConfig struct {
	Rate    int                   // R: requests a second the provider admits
	Burst   int                   // B: its bucket's size
	Dialect retryhttptest.Dialect // what the provider says; the zero Dialect is OpenAI's
	Latency time.Duration         // how long the provider takes to answer an admitted request; 0: at once

	PeopleRate int           // people's calls started a second, open loop
	PeopleFor  time.Duration // people's calls are started for this long, from the run's start
	Budget     time.Duration // each person's call carries a Budget of this (R8); no deadline

	BatchCalls int           // the batch: calls started at once, with no Budget and no deadline
	BatchAt    time.Duration // when, from the run's start

	Retries int // WithMaxRetries of every Transport

	// Replicas (K): 0 or 1, one Transport and Cooldown for everyone; more,
	// K Transports each with its own Cooldown on one Store (a Fleet's
	// Redis), the batch on the first, the people dealt round robin among
	// the other K − 1.
	Replicas int
}

// DefaultPriority is issue 37's run: R=100/s, B=10, OpenAI's headers,
// answers at once; 30 people a second for 30 s, each with the public
// tier's Budget (10 s); 2,000 batch calls at 2 s; 10 retries.
var DefaultPriority = PriorityConfig{Rate: 100, Burst: 10, PeopleRate: 30, PeopleFor: 30 * time.Second,
	Budget: 10 * time.Second, BatchCalls: 2000, BatchAt: 2 * time.Second, Retries: 10}

// People is the number of people's calls a run starts.
func (c PriorityConfig) People() int {
	return int(int64(c.PeopleFor) * int64(c.PeopleRate) / int64(time.Second))
}

// PriorityTargets are issue 37's targets for one K; a zero field is no
// target. Every batch call must end ok.
type PriorityTargets struct {
	People, PeopleDraining float64       // shares of people answered: at least
	P99Draining            time.Duration // people's p99 while the batch drains: at most
	Goodput                float64       // while the batch drains: at least
	RequestsPerSuccess     float64       // at most
}

// Targets returns issue 37's targets for c: one process, or K on Redis.
func (c PriorityConfig) Targets() PriorityTargets {
	if c.Replicas > 1 {
		return PriorityTargets{People: 0.99, PeopleDraining: 0.99, P99Draining: 1500 * time.Millisecond, Goodput: 0.93, RequestsPerSuccess: 1.15}
	}
	return PriorityTargets{People: 0.99, PeopleDraining: 0.99, P99Draining: time.Second, Goodput: 0.95, RequestsPerSuccess: 1.1}
}

// Missed names the targets r misses ("people", "draining", "p99",
// "batch", "goodput", "req/success"), in that order; none when it meets
// them all.
func (t PriorityTargets) Missed(r PriorityReport) []string {
	var missed []string
	if !(r.PeopleShare() >= t.People) {
		missed = append(missed, "people")
	}
	if !(r.DrainingShare() >= t.PeopleDraining) {
		missed = append(missed, "draining")
	}
	if r.DrainingP99 > t.P99Draining {
		missed = append(missed, "p99")
	}
	if r.BatchOK < r.Config.BatchCalls {
		missed = append(missed, "batch")
	}
	if !(r.Goodput() >= t.Goodput) {
		missed = append(missed, "goodput")
	}
	if !(r.RequestsPerSuccess() <= t.RequestsPerSuccess) {
		missed = append(missed, "req/success")
	}
	return missed
}

// A PriorityRow is how the calls are marked: Marked is issue 37's R27 row
// (the batch WithPriority Background, the people Interactive by their
// Budget); not Marked is first come first served (the batch unmarked, so
// Normal, and the people WithPriority Normal).
type PriorityRow struct {
	Name   string
	Marked bool
}

// PriorityRows are the rows of issue 37: "fifo", then "priority".
func PriorityRows() []PriorityRow {
	return []PriorityRow{{Name: "fifo"}, {Name: "priority", Marked: true}}
}

// PriorityReport is one run of one row.
type PriorityReport struct {
	Row    string
	Config PriorityConfig

	People, PeopleOK int // people's calls started, and those that got a 200
	PeopleBusy       int // of the others, those handed ErrRateLimited ("busy")
	PeopleOther      int // those handed anything else: another status or error

	BatchOK     int // batch calls that got a 200 (of Config.BatchCalls)
	Batch429    int // batch calls handed back a 429 (their retries ran out)
	BatchOther  int // batch calls handed back anything else
	FirstErr    string
	BatchStart  time.Duration // from the run's start: the fan-out began
	BatchEnd    time.Duration // from the run's start: the last batch call ended
	PeopleP99   time.Duration // of every person's call, ok or not
	BatchP50    time.Duration // of the batch's calls
	BatchMax    time.Duration
	LatePeople  int           // people's calls started after the end of PeopleFor + 1 s (the schedule fell behind)
	Draining    int           // people's calls started while the batch drained: [BatchStart, BatchEnd]
	DrainingOK  int           // of those, the ones answered 200
	DrainingP99 time.Duration // of those, ok or not, from Do to the end of the body
	AnsweredP99 time.Duration // of those answered 200 only
	BusyP50     time.Duration // of the people's calls told "busy", from Do to the error: how fast they were turned away
	DrainingSuc int           // successes of anyone that ended while the batch drained

	Requests, Refused int64                       // what the provider received, and answered 429, as it noted them
	Admitted          int64                       // answered 200
	Provider          retryhttptest.ProviderStats // the provider's own counts, which Requests and Refused match

	// The fan-out's first moments, from BatchStart, as the provider saw
	// them: batch requests that reached it in the first 100 ms and the
	// first second, and 429s it answered (to anyone, and to the batch) in
	// the first second.
	Batch100ms, Batch1s  int
	Refused1s, Batch429s int

	RefusedBySecond []int // 429s by the second of the run they were answered in

	Wall time.Duration // from the run's start to the last call's end
}

// PeopleShare is the share of people's calls answered 200.
func (r PriorityReport) PeopleShare() float64 { return share(r.PeopleOK, r.People) }

// DrainingShare is the share of people's calls started while the batch
// drained that were answered 200.
func (r PriorityReport) DrainingShare() float64 { return share(r.DrainingOK, r.Draining) }

// Drain is from the batch's start to its last call's end.
func (r PriorityReport) Drain() time.Duration { return r.BatchEnd - r.BatchStart }

// Goodput is the successes a second, of anyone, that ended while the batch
// drained, over the provider's rate: 1 is every request the provider could
// admit in that time admitted and answered (a bucket's burst may take it
// a hair past 1).
func (r PriorityReport) Goodput() float64 {
	d := r.Drain().Seconds()
	if d <= 0 || r.Config.Rate <= 0 {
		return 0
	}
	return float64(r.DrainingSuc) / d / float64(r.Config.Rate)
}

// RequestsPerSuccess is all the requests the provider received over all
// the calls answered 200, people's and the batch's; +Inf when none was.
func (r PriorityReport) RequestsPerSuccess() float64 {
	ok := r.PeopleOK + r.BatchOK
	if ok == 0 {
		return math.Inf(1)
	}
	return float64(r.Requests) / float64(ok)
}

func share(n, of int) float64 {
	if of == 0 {
		return math.NaN()
	}
	return float64(n) / float64(of)
}

// p99Of is the nearest-rank 99th percentile of ds (0 when empty).
func p99Of(ds []time.Duration) time.Duration {
	return percentile(slices.Sorted(slices.Values(ds)), 0.99)
}
