package main

// The markdown the command prints: a header of the parameters and the
// machine, then a table per fault.

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func write(w io.Writer, cfg bench.BlackoutConfig, runs int, cmd string, started time.Time, total time.Duration, m *bench.Machine, loadEnd string, tables []table) {
	fmt.Fprintf(w, "## An outage (issue 30)\n\n")
	m.WriteHead(w, started, loadEnd)
	fmt.Fprintf(w, "| provider | an httptest server on 127.0.0.1 that answers a small chat completion 200 at once, but from %s to %s after the start (as a request arrives) fails: 503 at once, or reads the request and resets the connection (hijack, SO_LINGER 0, close); a fresh one per row |\n", secs(cfg.DownFrom), secs(cfg.DownUntil))
	fmt.Fprintf(w, "| calls | open loop: %d a second for %s (%d calls), each on its own goroutine at a fixed time whatever the others do, a POST of a small chat request through an http.Client, its body read to the end; a %s context deadline each; ok iff 200 |\n", cfg.Rate, secs(cfg.Duration), int(int64(cfg.Duration)*int64(cfg.Rate)/int64(time.Second)), secs(cfg.Timeout))
	fmt.Fprintf(w, "| clients | each row its own base transports (net/http's default, no proxy, one pool per replica); K replicas get the calls round robin, each its own Transport (and Quota, Cooldown or breaker); rows one after another, %d run(s) of each row per fault |\n", runs)
	fmt.Fprintf(w, "| command | `%s` (from bench/), %s in all |\n", cmd, secs(total))
	for _, t := range tables {
		writeTable(w, t)
	}
	fmt.Fprintf(w, "\n*requests per call*: requests that reached the provider during the outage over the calls started during it. *time to fail*: from `Do` to the end, of the calls started during the outage that failed (all of them, or all but those a retry carried past the return: see *failed*). *first success*: from the provider's return to the first 200 any call got. *share ok*: of the calls started in the %s after the return, those that got a 200. *Ranges* are min–max over the runs, each column on its own. *targets met*: runs that met all the row's targets, and which were missed in any run; — is a row with no target.\n", secs(cfg.After))
}

func writeTable(w io.Writer, t table) {
	c := t.cfg
	fmt.Fprintf(w, "\n### %s\n\n", map[bench.Fault]string{bench.Fault503: "503 during the outage", bench.FaultReset: "Connections reset during the outage"}[c.Fault])
	fmt.Fprintf(w, "| client | K | requests per call | time to fail p50 | p99 | failed (of started) | first success | share ok | targets met |\n")
	fmt.Fprintf(w, "|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	var errs []string
	for i, row := range t.rows {
		rs := t.reports[i]
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s (%s) | %s | %s | %s |\n", row.Name, max(row.Replicas, 1),
			span(rs, "%.4f", bench.BlackoutReport.PerCall),
			durSpan(rs, "—", failed(bench.BlackoutReport.FailP50)), durSpan(rs, "—", failed(bench.BlackoutReport.FailP99)),
			span(rs, "%.0f", func(r bench.BlackoutReport) float64 { return float64(len(r.FailTimes)) }),
			span(rs, "%.0f", func(r bench.BlackoutReport) float64 { return float64(r.DownCalls) }),
			durSpan(rs, "none", func(r bench.BlackoutReport) time.Duration { return r.FirstOK }),
			span(rs, "%.3f", bench.BlackoutReport.AfterShare), met(row.Targets, rs))
		for _, r := range rs {
			if r.FirstErr != "" {
				errs = append(errs, fmt.Sprintf("- %s: `%s`", row.Name, cut(r.FirstErr, 200)))
				break
			}
		}
	}
	fmt.Fprintf(w, "\nTargets (issue 30): one process ≤ 0.012 requests per call, p50 of a refused call ≤ 100 µs, first success ≤ Open + 150 ms, share ok ≥ 0.97; 8 replicas on one Redis ≤ 0.015, first success ≤ Open + 250 ms, share ok ≥ 0.95 (Open = 1 s).\n")
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nErrors handed back, one per row that returned any:\n\n%s\n", strings.Join(errs, "\n"))
	}
}

// failed is f, or -1 for a run in which no call failed during the outage.
func failed(f func(bench.BlackoutReport) time.Duration) func(bench.BlackoutReport) time.Duration {
	return func(r bench.BlackoutReport) time.Duration {
		if len(r.FailTimes) == 0 {
			return -1
		}
		return f(r)
	}
}

// cut is s cut to n bytes at most, "…" marking a cut (failsafe-go's error
// prints a whole response).
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// secs writes d in µs below a millisecond, in ms below a second (to 0.1 ms
// below 10 ms), else in seconds.
func secs(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// span is the range of f over the runs (bench.Span).
func span(rs []bench.BlackoutReport, format string, f func(bench.BlackoutReport) float64) string {
	return bench.Span(rs, format, f)
}

// durSpan is span for durations; a run where f is negative is none,
// which reads as absent when every run is (bench.DurSpan).
func durSpan(rs []bench.BlackoutReport, absent string, f func(bench.BlackoutReport) time.Duration) string {
	return bench.DurSpan(rs, secs, absent, f)
}

// met says in how many runs r met every target of t, and names the
// targets missed in any; — when t is no target.
func met(t bench.BlackoutTargets, rs []bench.BlackoutReport) string {
	if t == (bench.BlackoutTargets{}) {
		return "—"
	}
	return bench.Met(rs, t.Missed, []string{"per call", "p50", "first ok", "share ok"}) // Missed's order
}
