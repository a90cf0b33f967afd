package bench

// Tests of the priority harness (issue 37): the report's arithmetic on
// calls worked by hand, and a CI-sized run of each row that checks only
// that it ends and that its counts agree with each other. Who goes first
// is measured by cmd/priority, never asserted here.

import (
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPriorityTally counts calls and arrivals worked by hand: the drain's
// window is from the batch's start to its last call's end, both ends in.
func TestPriorityTally(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	busy := &retryhttp.Error{Reason: retryhttp.OutOfTime, Err: retryhttp.ErrRateLimited}
	people := []priorityCall{
		{start: ms(0), end: ms(10), status: 200},                             // before the batch
		{start: ms(1000), end: ms(1200), status: 200},                        // at its start: draining, ok, its success in the window
		{start: ms(1500), end: ms(11500), err: fmt.Errorf("post: %w", busy)}, // draining, busy
		{start: ms(2900), end: ms(3100), status: 200},                        // draining, ok, its success after the window
		{start: ms(3500), end: ms(3600), err: errors.New("reset")},           // after the batch
	}
	batch := []priorityCall{
		{start: ms(1000), end: ms(1500), status: 200},
		{start: ms(1000), end: ms(3000), status: 200},
		{start: ms(1001), end: ms(2000), status: 429},
	}
	arrivals := []arrival{
		{at: ms(0), status: 200},
		{at: ms(1000), batch: true, status: 200},
		{at: ms(1050), batch: true, status: 429},
		{at: ms(1099), status: 429},
		{at: ms(1100), batch: true, status: 200},
		{at: ms(1999), batch: true, status: 429},
		{at: ms(2000), batch: true, status: 200},
		{at: ms(2500), batch: true}, // the client left
	}
	r := PriorityReport{Config: PriorityConfig{Rate: 10, PeopleFor: 3 * time.Second, BatchCalls: 3}, BatchStart: ms(1000)}
	r.tally(people, batch, arrivals)

	assert.Equal(t, 5, r.People)
	assert.Equal(t, 3, r.PeopleOK)
	assert.Equal(t, 1, r.PeopleBusy)
	assert.Equal(t, 1, r.PeopleOther)
	assert.Equal(t, "reset", r.FirstErr)
	assert.Equal(t, 0, r.LatePeople)
	assert.Equal(t, []int{2, 1, 0}, []int{r.BatchOK, r.Batch429, r.BatchOther})
	assert.Equal(t, ms(3000), r.BatchEnd)
	assert.Equal(t, ms(2000), r.Drain())
	assert.Equal(t, ms(11500), r.Wall)
	assert.Equal(t, 3, r.Draining)
	assert.Equal(t, 2, r.DrainingOK)
	assert.Equal(t, ms(10000), r.DrainingP99) // the busy one's 10 s
	assert.Equal(t, ms(200), r.AnsweredP99)
	assert.Equal(t, ms(10000), r.BusyP50)
	assert.Equal(t, []int{0, 3}, r.RefusedBySecond)
	assert.Equal(t, 3, r.DrainingSuc) // a person's at 1.2 s and the batch's at 1.5 and 3 s
	assert.InDelta(t, 3.0/2/10, r.Goodput(), 1e-12)
	assert.InDelta(t, 0.6, r.PeopleShare(), 1e-12)
	assert.InDelta(t, 2.0/3, r.DrainingShare(), 1e-12)
	assert.Equal(t, []int64{8, 4, 3}, []int64{r.Requests, r.Admitted, r.Refused})
	assert.InDelta(t, 8.0/5, r.RequestsPerSuccess(), 1e-12)
	assert.Equal(t, 2, r.Batch100ms)
	assert.Equal(t, 4, r.Batch1s) // the arrival at 2 s is a second after the start: out
	assert.Equal(t, 3, r.Refused1s)
	assert.Equal(t, 2, r.Batch429s)

	t.Run("targets", func(t *testing.T) {
		assert.Equal(t, []string{"people", "draining", "p99", "batch", "goodput", "req/success"}, r.Config.Targets().Missed(r))
		k8 := PriorityConfig{Replicas: 8}
		assert.Equal(t, PriorityTargets{People: 0.99, PeopleDraining: 0.99, P99Draining: 1500 * time.Millisecond, Goodput: 0.93, RequestsPerSuccess: 1.15}, k8.Targets())
		assert.Equal(t, 900, DefaultPriority.People())
	})
}

// smallPriority is a CI-sized run: 45 people over 1.5 s, a batch of 100
// at 0.5 s, on issue 37's provider.
func smallPriority() PriorityConfig {
	c := DefaultPriority
	c.PeopleFor, c.BatchCalls, c.BatchAt = 1500*time.Millisecond, 100, 500*time.Millisecond
	return c
}

// checkPriorityCounts checks that r's counts agree with each other and
// with the provider's own.
func checkPriorityCounts(t *testing.T, r PriorityReport) {
	t.Helper()
	c := r.Config
	assert.Equal(t, c.People(), r.People)
	assert.Equal(t, r.People, r.PeopleOK+r.PeopleBusy+r.PeopleOther, "people: every call ok, busy or other")
	assert.Equal(t, c.BatchCalls, r.BatchOK+r.Batch429+r.BatchOther, "batch: every call ok, 429 or other")
	assert.Equal(t, r.Provider.Requests, r.Requests, "the provider's notes and its counts")
	assert.Equal(t, r.Provider.Refused, r.Refused)
	assert.Equal(t, r.Provider.Admitted, r.Admitted)
	assert.GreaterOrEqual(t, r.Admitted, int64(r.PeopleOK+r.BatchOK), "every success was admitted")
	assert.LessOrEqual(t, r.Admitted+r.Refused, r.Requests, "each request admitted, refused, or left by its client")
	assert.LessOrEqual(t, r.BatchStart, r.BatchEnd)
	assert.LessOrEqual(t, r.DrainingOK, r.Draining)
	assert.LessOrEqual(t, r.Draining, r.People)
	assert.LessOrEqual(t, r.DrainingSuc, r.PeopleOK+r.BatchOK)
	assert.LessOrEqual(t, r.Batch100ms, r.Batch1s)
	assert.LessOrEqual(t, int64(r.Batch1s), r.Requests)
	assert.LessOrEqual(t, r.Batch429s, r.Refused1s)
	assert.LessOrEqual(t, int64(r.Refused1s), r.Refused)
	assert.GreaterOrEqual(t, r.Batch1s, 1, "the fan-out reached the provider in its first second")
}

// TestPriorityRuns runs each row once in one process, and the priority
// row in two replicas on one real Redis when redis-server is installed:
// each ends, and its counts agree.
func TestPriorityRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of real time")
	}
	cfg := smallPriority()
	for _, row := range PriorityRows() {
		t.Run(row.Name, func(t *testing.T) {
			r := Priority(row, cfg, nil)
			t.Logf("%s: people %d/%d ok, batch %d/%d ok, %d requests, %d 429s", row.Name, r.PeopleOK, r.People, r.BatchOK, cfg.BatchCalls, r.Requests, r.Refused)
			checkPriorityCounts(t, r)
		})
	}
	t.Run("priority, K=2 on Redis", func(t *testing.T) {
		if _, err := exec.LookPath("redis-server"); err != nil {
			t.Skip("redis-server is not installed (apt-get install -y redis-server; .ci/run installs it)")
		}
		addr, stop, err := StartRedis()
		require.NoError(t, err)
		defer stop()
		f := &Fleet{Addr: addr}
		defer func() { require.NoError(t, f.Reset()) }()
		c := cfg
		c.Replicas = 2
		r := Priority(PriorityRow{Name: "priority", Marked: true}, c, func() *retryhttp.Cooldown { return f.Cooldown() })
		t.Logf("K=2: people %d/%d ok, batch %d/%d ok, %d requests, %d 429s", r.PeopleOK, r.People, r.BatchOK, c.BatchCalls, r.Requests, r.Refused)
		checkPriorityCounts(t, r)
	})
}
