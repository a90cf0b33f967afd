package bench

// Tests of the outage scenario: the report's arithmetic worked
// by hand, and a 2 s run of the retryhttp rows that checks only what must
// hold whatever the timing: a circuit sends a provider that is down a
// small part of what retries send it, fails its calls sooner, and lets a
// call through once the provider is back. The targets are measured by
// cmd/outage, never asserted here.

import (
	"errors"
	"math"
	"net/http"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBlackoutTally(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	cfg := BlackoutConfig{DownFrom: ms(100), DownUntil: ms(200), After: ms(100)}
	r := BlackoutReport{Config: cfg, DownRequests: 3}
	r.tally([]blackoutCall{
		{start: ms(50), took: ms(1), status: http.StatusOK},                  // before: counts nowhere but Calls
		{start: ms(100), took: ms(2), status: http.StatusServiceUnavailable}, // down, failed in 2 ms
		{start: ms(150), took: ms(60), status: http.StatusOK},                // down, a retry carried it: ok 10 ms after the return
		{start: ms(199), took: ms(1), err: errors.New("reset")},              // down, failed in 1 ms
		{start: ms(200), took: ms(30), status: http.StatusOK},                // after, ok 230 ms in: not the first
		{start: ms(250), took: ms(1), err: errors.New("refused")},            // after, failed
		{start: ms(300), took: ms(1), status: http.StatusOK},                 // past the After window
	})
	assert.Equal(t, 7, r.Calls)
	assert.Equal(t, 3, r.DownCalls)
	assert.Equal(t, 1, r.DownOK)
	assert.Equal(t, 3, r.Failed)
	assert.Equal(t, "reset", r.FirstErr)
	assert.Equal(t, []time.Duration{ms(1), ms(2)}, r.FailTimes)
	assert.Equal(t, ms(1), r.FailP50())
	assert.Equal(t, ms(2), r.FailP99())
	assert.Equal(t, ms(10), r.FirstOK)
	assert.Equal(t, 1.0, r.PerCall())
	assert.Equal(t, 0.5, r.AfterShare())
	assert.Equal(t, ms(301), r.Wall)
	assert.Equal(t, []string{"per call", "p50", "share ok"}, BlackoutTargets{PerCall: 0.5, RefusedP50: ms(1) - 1, FirstOK: ms(10), AfterShare: 0.6}.Missed(r))
	assert.Empty(t, BlackoutTargets{}.Missed(r))

	none := BlackoutReport{Config: cfg}
	none.tally(nil)
	assert.Equal(t, time.Duration(-1), none.FirstOK)
	assert.True(t, math.IsNaN(none.PerCall()))
	assert.Equal(t, []string{"per call", "first ok", "share ok"}, BlackoutTargets{PerCall: 1, FirstOK: time.Second, AfterShare: 0.1}.Missed(none))
}

// TestBlackout runs a small outage, 200 calls a second for 2 s and the
// provider down from 0.3 s to 0.8 s, against retryhttp's defaults and its
// circuit (in one process, on both faults, and 8 replicas on one Redis
// when redis-server is installed), all at once.
func TestBlackout(t *testing.T) {
	cfg := BlackoutConfig{Rate: 200, Duration: 2 * time.Second, DownFrom: 300 * time.Millisecond,
		DownUntil: 800 * time.Millisecond, Timeout: 10 * time.Second, After: time.Second}
	var f *Fleet
	if _, err := exec.LookPath("redis-server"); err == nil {
		addr, stop, err := StartRedis()
		require.NoError(t, err)
		defer stop()
		f = &Fleet{Addr: addr, Prefix: "retryhttp:outage:"}
		defer func() { require.NoError(t, f.Reset()) }()
	} else {
		t.Log("redis-server is not installed: no fleet row")
	}
	row := func(name string) BlackoutRow {
		t.Helper()
		for _, r := range BlackoutRows(f) {
			if r.Name == name {
				return r
			}
		}
		t.Fatalf("no row %q", name)
		return BlackoutRow{}
	}
	reset := cfg
	reset.Fault = FaultReset
	type run struct {
		row BlackoutRow
		cfg BlackoutConfig
	}
	circuit := row("retryhttp+circuit, K=1")
	runs := []run{{row("retryhttp (defaults)"), cfg}, {circuit, cfg}, {circuit, reset}}
	if f != nil {
		runs = append(runs, run{row("retryhttp+circuit+redis, K=8"), cfg})
	}
	reports := make([]BlackoutReport, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Go(func() { reports[i] = Blackout(r.row, r.cfg) })
	}
	wg.Wait()

	// 0.5 s is shorter than the defaults' two backoffs (400 ms and 800 ms,
	// each ±20%): every call rides it out, at a cost of one try or more
	// each.
	defaults := reports[0]
	t.Logf("%s: %.3f requests per call, %d of %d calls of the outage ok", defaults.Row, defaults.PerCall(), defaults.DownOK, defaults.DownCalls)
	assert.Greater(t, defaults.PerCall(), 1.0, "the defaults retry during the outage")
	assert.Equal(t, defaults.DownCalls, defaults.DownOK, "and ride it out")
	assert.Equal(t, defaults.AfterCalls, defaults.AfterOK, "and every call after the return succeeds")
	first := time.Duration(float64(retryhttp.DefaultBackoff.Base) * (1 - retryhttp.DefaultBackoff.Jitter))
	for i, r := range reports[1:] {
		t.Logf("%s, %s: %.3f requests per call, p50 to fail %s, first ok %s after the return, share ok %.3f",
			r.Row, runs[i+1].cfg.Fault, r.PerCall(), r.FailP50(), r.FirstOK, r.AfterShare())
		assert.Less(t, r.PerCall(), defaults.PerCall()/10, "%s sends a tenth of the retries' requests at most", r.Row)
		assert.Greater(t, len(r.FailTimes), r.DownCalls/2, "%s fails most calls of the outage", r.Row)
		assert.Less(t, r.FailP50(), first, "%s fails them before a first retry would go", r.Row)
		assert.GreaterOrEqual(t, r.FirstOK, time.Duration(0), "%s lets a call through after the return", r.Row)
	}
}
