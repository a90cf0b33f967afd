package main

// The markdown the command prints: a header of the parameters and the
// machine, then a table per dialect.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

func write(w io.Writer, cfg bench.GoodputConfig, runs int, cmd string, started time.Time, total time.Duration, m *bench.Machine, loadEnd string, sections []section) {
	timed, tokens := cfg.Duration > 0, cfg.TokenRate > 0
	fmt.Fprintf(w, "## Goodput under a rate limit\n\n")
	m.WriteHead(w, started, loadEnd)
	if tokens {
		fmt.Fprintf(w, "| provider | retryhttptest's Provider on 127.0.0.1, two token buckets, both full at the start: R = %d requests/s (burst B = %d) and T = %d tokens/s (bucket %d), a request costing ceil(len(body) ÷ 4) tokens; a request that has room in both (remaining ≥ cost, as it arrives) is answered 200 after L = %s, the others 429 at once, charging nothing; what the answers say about the limits is the dialect's (below) |\n", cfg.Rate, cfg.Burst, cfg.TokenRate, cfg.TokenBucket(), cfg.Latency)
		fmt.Fprintf(w, "| prompts | call i sends a JSON chat request of 4 × tokens bytes (`\"max_tokens\":1`), its tokens drawn by i from 100 to 4,000 (triangular, mode 400), seed %d: the same prompts for every row and run; mean %.0f tokens over the N calls |\n", cfg.Seed, cfg.MeanPrompt())
	} else {
		fmt.Fprintf(w, "| provider | one token bucket on 127.0.0.1: R = %d requests/s, burst B = %d, starts full; a request that gets a token (as it arrives) is answered 200 after L = %s, the others 429 at once; what the answers say about the limit is the dialect's (below) |\n", cfg.Rate, cfg.Burst, cfg.Latency)
	}
	if timed {
		fmt.Fprintf(w, "| clients | C = %d workers each make calls one after another for D = %s; what ends within D counts, the calls running then are cut (neither ok nor failed); %s context per call, no Budget; a fresh provider and base transport per row, rows one after another; %d run(s) of each row per dialect |\n", cfg.Workers, cfg.Duration, cfg.Timeout, runs)
		fmt.Fprintf(w, "| ideal | %d calls ok within D: the ideal client (each worker sends the moment it is free and the provider has room; no request refused) |\n", cfg.IdealOK(cfg.Duration))
	} else {
		fmt.Fprintf(w, "| clients | C = %d workers share N = %d POSTs per row; %s context per call, no Budget; a fresh provider and base transport per row, rows one after another; %d run(s) of each row per dialect |\n", cfg.Workers, cfg.Calls, cfg.Timeout, runs)
		fmt.Fprintf(w, "| ideal wall | %s: the ideal client (each worker sends the moment it is free and the provider has room; no request refused) ends N calls |\n", secs(cfg.IdealWall()))
	}
	if cfg.Replicas > 1 {
		fmt.Fprintf(w, "| replicas | K = %d: the workers dealt among K replicas, each with its own base transport, Transport and Cooldown; in the +redis row each Cooldown also has its own retryredis Store (and Redis client) on one redis-server on 127.0.0.1, emptied before each row |\n", cfg.Replicas)
	}
	fmt.Fprintf(w, "| command | `%s` (from bench/), %s in all |\n", cmd, secs(total))

	for _, s := range sections {
		writeSection(w, s)
	}

	if tokens {
		fmt.Fprintf(w, "\n*token share*: the tokens of the calls ok over what the token limit gives in the wall (D in a timed run), its bucket plus T × (wall − L): 1 is all of it. *429s received*: by the request limit / by the token limit. *Ranges* are min–max over the runs, each column on its own (not one run). *requests per success*: requests the provider received over calls ok. Latencies are of every call that ended, ok or not, from `Do` to the end of the body. *targets met*: runs that met all four targets of issue 22, and which were missed in any run.\n")
		return
	}
	fmt.Fprintf(w, "\n*goodput*: calls ok over the most the ideal client ends in the same time (the wall; D in a timed run): 1 is as good as any client can do against this provider with these workers and this latency, a slower run is lower. *Ranges* are min–max over the runs, each column on its own (not one run). *requests per success*: requests the provider received over calls ok (a timed run leaves out the requests admitted but not yet answered when it ended: their calls were cut on their way to a success). Latencies are of every call that ended, ok or not, from `Do` to the end of the body (cut calls are not in them). *targets met*: runs that met all four targets, and which targets were missed in any run.\n")
}

func writeSection(w io.Writer, s section) {
	cfg, t := s.cfg, s.cfg.Targets()
	timed, tokens := cfg.Duration > 0, cfg.TokenRate > 0
	fmt.Fprintf(w, "\n### %s\n\n", cfg.Dialect)
	fmt.Fprintf(w, "Provider: %s.\n\n", bench.Describe(cfg.Dialect, tokens))
	cut, align := "", ""
	if timed {
		cut, align = " cut |", "--:|"
	}
	if tokens {
		whole := ""
		if cfg.Dialect == retryhttptest.AnthropicDialect || cfg.Dialect == retryhttptest.RetryAfterDialect {
			whole = " + 1 s (whole seconds only)"
		}
		fmt.Fprintf(w, "Targets (issue 22): ≤ %.1f requests per success, ≥ %.2f of the token limit served, no failed call, p99 ≤ 2 × C × mean prompt ÷ T + L%s = %s.\n\n", t.RequestsPerSuccess, t.TokenShare, whole, secs(t.P99))
		fmt.Fprintf(w, "| client | calls ok | failed (429 / error / other) |%s requests per success | 429s received (requests / tokens) | token share | p50 | p99 | max | wall | targets met |\n", cut)
		fmt.Fprintf(w, "|---|--:|--:|%s--:|--:|--:|--:|--:|--:|--:|---|\n", align)
	} else {
		fmt.Fprintf(w, "Targets (issue 16): ≤ %.1f requests per success, goodput ≥ %.2f, no failed call, p99 ≤ 2 × C / R + L = %s.\n\n", t.RequestsPerSuccess, t.Goodput, secs(t.P99))
		fmt.Fprintf(w, "| client | calls ok | failed (429 / error / other) |%s requests per success | 429s received | goodput | p50 | p99 | max | wall | TCP conns | targets met |\n", cut)
		fmt.Fprintf(w, "|---|--:|--:|%s--:|--:|--:|--:|--:|--:|--:|--:|---|\n", align)
	}
	for i, l := range s.libs {
		writeRow(w, l, s.reports[i], t, timed, tokens)
	}
	if timed {
		writeCooldownTarget(w, s)
	}
	var errs []string
	for i, l := range s.libs {
		for _, r := range s.reports[i] {
			if r.FirstErr != "" {
				errs = append(errs, fmt.Sprintf("- %s: `%s`", l.Name, r.FirstErr))
				break
			}
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nErrors handed back, one per row that returned any:\n\n%s\n", strings.Join(errs, "\n"))
	}
}

// writeRow writes one client's row, each cell the range over its runs rs.
func writeRow(w io.Writer, l bench.Lib, rs []bench.GoodputReport, t bench.GoodputTargets, timed, tokens bool) {
	count := func(f func(bench.GoodputReport) int) string {
		return span(rs, "%.0f", func(r bench.GoodputReport) float64 { return float64(f(r)) })
	}
	dur := func(f func(bench.GoodputReport) time.Duration) string { return durSpan(rs, f) }
	fmt.Fprintf(w, "| %s | %s | %s (%s / %s / %s) |", l.Name,
		count(func(r bench.GoodputReport) int { return r.OK }),
		count(func(r bench.GoodputReport) int { return r.Failed }),
		count(func(r bench.GoodputReport) int { return r.Got429 }),
		count(func(r bench.GoodputReport) int { return r.Errors }),
		count(func(r bench.GoodputReport) int { return r.GotOther }))
	if timed {
		fmt.Fprintf(w, " %s |", count(func(r bench.GoodputReport) int { return r.Cut }))
	}
	fmt.Fprintf(w, " %s |", span(rs, "%.2f", bench.GoodputReport.RequestsPerSuccess))
	if tokens {
		fmt.Fprintf(w, " %s (%s / %s) | %s |",
			count(func(r bench.GoodputReport) int { return int(r.Provider.Refused) }),
			count(func(r bench.GoodputReport) int { return int(r.Provider.RefusedRequests) }),
			count(func(r bench.GoodputReport) int { return int(r.Provider.RefusedTokens) }),
			span(rs, "%.3f", bench.GoodputReport.TokenShare))
	} else {
		fmt.Fprintf(w, " %s | %s |",
			count(func(r bench.GoodputReport) int { return int(r.Provider.Refused) }),
			span(rs, "%.3f", bench.GoodputReport.Goodput))
	}
	fmt.Fprintf(w, " %s | %s | %s | %s |",
		dur(func(r bench.GoodputReport) time.Duration { return r.P50 }),
		dur(func(r bench.GoodputReport) time.Duration { return r.P99 }),
		dur(func(r bench.GoodputReport) time.Duration { return r.Max }),
		dur(func(r bench.GoodputReport) time.Duration { return r.Wall }))
	if !tokens {
		fmt.Fprintf(w, " %s |", count(func(r bench.GoodputReport) int { return int(r.Provider.Conns) }))
	}
	fmt.Fprintf(w, " %s |\n", met(t, rs))
}

// writeCooldownTarget compares, run by run, each Cooldown row with the same
// row without it (retryhttp+cooldown+retries10 with retryhttp+retries10, or
// with retryhttp when that row did not run): issue 16 wants a Cooldown to
// lose no successes against none when answers are slow.
func writeCooldownTarget(w io.Writer, s section) {
	idx := func(name string) int {
		return slices.IndexFunc(s.libs, func(l bench.Lib) bool { return l.Name == name })
	}
	var lines []string
	for i, l := range s.libs {
		if !strings.Contains(l.Name, "+cooldown") {
			continue
		}
		j := idx(strings.Replace(l.Name, "+cooldown", "", 1))
		if j < 0 {
			j = idx(bench.RetryHTTP.Name)
		}
		if j < 0 {
			continue
		}
		held, against := s.reports[i], s.reports[j]
		n := min(len(held), len(against))
		var pairs []string
		kept := 0
		for k := range n {
			if held[k].OK >= against[k].OK {
				kept++
			}
			pairs = append(pairs, fmt.Sprintf("%d vs %d", held[k].OK, against[k].OK))
		}
		lines = append(lines, fmt.Sprintf("- %s against %s: %s calls ok (run by run); no success lost in %d of %d runs", l.Name, s.libs[j].Name, strings.Join(pairs, ", "), kept, n))
	}
	if len(lines) > 0 {
		fmt.Fprintf(w, "\nTarget (issue 16): a Cooldown loses no successes against none.\n\n%s\n", strings.Join(lines, "\n"))
	}
}

// secs writes d in ms below a second (to 0.1 ms below 10 ms), else in seconds.
func secs(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// span is the range of f over the runs (bench.Span).
func span(rs []bench.GoodputReport, format string, f func(bench.GoodputReport) float64) string {
	return bench.Span(rs, format, f)
}

// durSpan is span for durations: "1.39–1.52 s" when both ends have the
// same unit (bench.DurSpan).
func durSpan(rs []bench.GoodputReport, f func(bench.GoodputReport) time.Duration) string {
	return bench.DurSpan(rs, secs, "—", f)
}

// met says in how many runs r met every target, and names the targets
// missed in any, in Missed's order.
func met(t bench.GoodputTargets, rs []bench.GoodputReport) string {
	return bench.Met(rs, t.Missed, []string{"requests/success", "goodput", "token share", "failed", "p99"})
}
