package main

// The markdown the command prints: a header of the parameters and the
// machine, a table per K, and the fan-out's first second.

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func write(w io.Writer, cfg bench.PriorityConfig, runs int, cmd string, started time.Time, total time.Duration, m *bench.Machine, loadEnd string, sections []section) {
	m.WriteHead(w, started, loadEnd)
	fmt.Fprintf(w, "| provider | retryhttptest's Provider on 127.0.0.1 in the %s dialect: one token bucket, R = %d requests/s, B = %d, full at the start; a request that gets a token is answered 200 after %s, the others 429 at once; a fresh one per run |\n", cfg.Dialect, cfg.Rate, cfg.Burst, cfg.Latency)
	fmt.Fprintf(w, "| people | open loop: %d calls a second for %s (%d calls), each on its own goroutine at a fixed time, with a Budget of %s (`WithBudget(ctx, NewBudget(%s))`) and no deadline; *priority*: no mark (Interactive by its Budget); *fifo*: `WithPriority(ctx, Normal)` |\n", cfg.PeopleRate, cfg.PeopleFor, cfg.People(), cfg.Budget, cfg.Budget)
	fmt.Fprintf(w, "| batch | %d calls started at once at %s (an errgroup's fan-out), no Budget, no deadline; *priority*: `WithPriority(ctx, Background)`; *fifo*: no mark (Normal) |\n", cfg.BatchCalls, cfg.BatchAt)
	fmt.Fprintf(w, "| clients | every call a POST of a small chat request through an http.Client over `retryhttp.New(base, WithCooldown(cd), WithMaxRetries(%d))` (Shaped backoff), its body read to the end; answered iff 200. K=1: one Transport and Cooldown for everyone. K>1: K Transports, each over its own base transport with its own Cooldown, each Cooldown with its own retryredis Store and Redis client on one redis-server on 127.0.0.1 (emptied before each run); the batch on replica 0, the people round robin on the other K−1 |\n", cfg.Retries)
	fmt.Fprintf(w, "| runs | %d of each row per K, the rows taking turns (fifo, priority, fifo, …) |\n", runs)
	fmt.Fprintf(w, "| command | `%s` (from bench/), %s in all |\n", cmd, secs(total))

	for _, s := range sections {
		writeSection(w, s)
	}
	fmt.Fprintf(w, "\n### The fan-out's first second\n\n")
	fmt.Fprintf(w, "| K | row | batch requests at the provider, first 100 ms | first 1 s | 429s in the first 1 s (the batch's) |\n|--:|---|--:|--:|--:|\n")
	for _, s := range sections {
		for i, row := range s.rows {
			rs := s.reports[i]
			count := func(f func(bench.PriorityReport) int) string {
				return span(rs, "%.0f", func(r bench.PriorityReport) float64 { return float64(f(r)) })
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s (%s) |\n", max(s.cfg.Replicas, 1), row.Name,
				count(func(r bench.PriorityReport) int { return r.Batch100ms }),
				count(func(r bench.PriorityReport) int { return r.Batch1s }),
				count(func(r bench.PriorityReport) int { return r.Refused1s }),
				count(func(r bench.PriorityReport) int { return r.Batch429s }))
		}
	}
	fmt.Fprintf(w, "\n*people answered*: of the %d people's calls, those answered 200 (a call handed ErrRateLimited, \"busy\", is not; *busy* counts those). *while the batch drains*: of the people's calls started from the batch's start to its last call's end, those answered 200; *their p99* is theirs, ok or not (a call told \"busy\" counts the time it took to be told), from `Do` to the end of the body; *of those answered*, of the ones answered 200 only. *goodput while it drains*: successes of anyone that ended in that time, a second, over R. *requests per success*: every request the provider received over every call answered 200, people's and the batch's. *429s*: the provider's, to anyone, in the whole run. *Ranges* are min–max over the runs, each column on its own. *targets met*: runs that met all of issue 37's targets, and which were missed in any run.\n", cfg.People())
}

func writeSection(w io.Writer, s section) {
	cfg, t := s.cfg, s.cfg.Targets()
	k := max(cfg.Replicas, 1)
	if k == 1 {
		fmt.Fprintf(w, "\n### K=1: one process, one Cooldown\n\n")
	} else {
		fmt.Fprintf(w, "\n### K=%d on one Redis\n\n", k)
	}
	fmt.Fprintf(w, "Targets (issue 37): people answered ≥ %.2f, while the batch drains ≥ %.2f, their p99 while it drains ≤ %s, the batch all %d, goodput while it drains ≥ %.2f, requests per success ≤ %.2f.\n\n",
		t.People, t.PeopleDraining, secs(t.P99Draining), cfg.BatchCalls, t.Goodput, t.RequestsPerSuccess)
	fmt.Fprintf(w, "| row | people answered | busy | while the batch drains | their p99 while it drains | of those answered | people's p99, all | batch answered | drain | goodput while it drains | requests per success | 429s | targets met |\n")
	fmt.Fprintf(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for i, row := range s.rows {
		rs := s.reports[i]
		count := func(f func(bench.PriorityReport) int) string {
			return span(rs, "%.0f", func(r bench.PriorityReport) float64 { return float64(f(r)) })
		}
		dur := func(f func(bench.PriorityReport) time.Duration) string { return durSpan(rs, f) }
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Name,
			span(rs, "%.3f", bench.PriorityReport.PeopleShare),
			count(func(r bench.PriorityReport) int { return r.PeopleBusy }),
			span(rs, "%.3f", bench.PriorityReport.DrainingShare),
			dur(func(r bench.PriorityReport) time.Duration { return r.DrainingP99 }),
			dur(func(r bench.PriorityReport) time.Duration { return r.AnsweredP99 }),
			dur(func(r bench.PriorityReport) time.Duration { return r.PeopleP99 }),
			count(func(r bench.PriorityReport) int { return r.BatchOK }),
			dur(bench.PriorityReport.Drain),
			span(rs, "%.3f", bench.PriorityReport.Goodput),
			span(rs, "%.3f", bench.PriorityReport.RequestsPerSuccess),
			count(func(r bench.PriorityReport) int { return int(r.Refused) }),
			met(t, rs))
	}
	var errs []string
	for i, row := range s.rows {
		for _, r := range s.reports[i] {
			if r.FirstErr != "" {
				errs = append(errs, fmt.Sprintf("- %s: `%s`", row.Name, r.FirstErr))
				break
			}
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nErrors other than \"busy\", one per row that had any:\n\n%s\n", strings.Join(errs, "\n"))
	}
}

// span is the range of f over the runs (bench.Span).
func span(rs []bench.PriorityReport, format string, f func(bench.PriorityReport) float64) string {
	return bench.Span(rs, format, f)
}

// durSpan is span for durations: "1.39–1.52 s" when both ends have the
// same unit (bench.DurSpan).
func durSpan(rs []bench.PriorityReport, f func(bench.PriorityReport) time.Duration) string {
	return bench.DurSpan(rs, secs, "—", f)
}

// met says in how many runs r met every target, and names the targets
// missed in any, in Missed's order.
func met(t bench.PriorityTargets, rs []bench.PriorityReport) string {
	return bench.Met(rs, t.Missed, []string{"people", "draining", "p99", "batch", "goodput", "req/success"})
}
