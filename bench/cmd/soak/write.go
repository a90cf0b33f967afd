package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/bench"
)

func errorf(format string, v ...any) error { return fmt.Errorf(format, v...) }

// lines is how many lines the replicas wrote in the scene's seconds.
func (r result) lines() int {
	n := 0
	for _, rt := range r.tally.byLevel() {
		n += rt.lines
	}
	return n
}

// write prints the tables of results.
func write(w io.Writer, cfg config, cmd string, env *bench.Machine, results []result) {
	fmt.Fprintf(w, "Logs per second (issue 32) at %s, %s, %s; `%s`; load average %s at the start, %s at the end (1, 5, 15 min), 1-min range %s over the runs.\n\n",
		env.Commit, fmt.Sprintf("%s, %d CPUs", env.CPU, runtime.NumCPU()), time.Now().UTC().Format("2006-01-02"), cmd, env.LoadStart, bench.LoadAvg(), loadRange(env))
	fmt.Fprintf(w, "K=%d replicas, each a process with a Transport, a Cooldown and a retryredis Store of its own, on one redis-server; a retryhttptest Provider (OpenAI dialect) admitting %g requests a second (a bucket of %d), answering a success in %s. %s a scene. Scenes a and b: %d goroutines a replica, each calling in a closed loop; b: Redis killed at %s, started again at %s. Scene c: the provider answers 429 with Retry-After: %d from the start, and one goroutine a replica calls in a tight loop with a Budget of %s. Every logger at Debug; each cell is lines a second of the fleet, in its busiest second / the mean over the scene.\n\n",
		cfg.k, cfg.rate, int64(cfg.rate), cfg.latency, cfg.duration, cfg.workers, cfg.downFrom, cfg.downUntil, int(cfg.askFor/time.Second), retryhttp.PublicTierMaxWait)
	fmt.Fprintln(w, "| scene | go-redis's logger | calls ok / failed | Error | Warn | Info | Debug | unstructured (stderr) | lines |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		by := r.tally.byLevel()
		cells := []string{r.scene.title, modeName(r.adapter), fmt.Sprintf("%d / %d", r.ok, r.failed)}
		for _, l := range levels {
			rt := by[l]
			cells = append(cells, fmt.Sprintf("%d / %.1f", rt.max, rt.mean))
		}
		cells = append(cells, fmt.Sprint(r.lines()))
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w, "\nWarn and unstructured lines of the fleet in each second of the scene:")
	fmt.Fprintln(w, "\n| scene | go-redis's logger | Warn | unstructured (stderr) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, r := range results {
		s := r.tally.series()
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.scene.name, modeName(r.adapter), seconds(s["warn"], r.tally.secs), seconds(s[unstructured], r.tally.secs))
	}
	fmt.Fprintln(w, "\nThe messages with the most lines, each run's (numbers written #):")
	fmt.Fprintln(w, "\n| scene | go-redis's logger | level | message | lines | busiest second | mean a second |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		for _, m := range r.tally.top(cfg.top) {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %d | %.1f |\n", r.scene.name, modeName(r.adapter), m.level,
				strings.ReplaceAll(m.msg, "|", `\|`), m.lines, m.max, m.mean)
		}
	}
	var outside []string
	for _, r := range results {
		if r.tally.outside > 0 {
			outside = append(outside, fmt.Sprintf("%s with %s: %d", r.scene.name, modeName(r.adapter), r.tally.outside))
		}
	}
	if len(outside) > 0 {
		fmt.Fprintf(w, "\nLines after the scenes' seconds (the calls out at the end, canceled: one give-up each), not counted above: %s.\n", strings.Join(outside, "; "))
	}
}

// seconds is a level's series, each second's lines apart.
func seconds(s []int, secs int) string {
	if s == nil {
		s = make([]int, secs)
	}
	f := make([]string, len(s))
	for i, n := range s {
		f[i] = fmt.Sprint(n)
	}
	return strings.Join(f, " ")
}

// loadRange is the 1-minute load average's lowest and highest over the runs.
func loadRange(m *bench.Machine) string {
	low, high := m.LoadRange()
	return low + "–" + high
}
