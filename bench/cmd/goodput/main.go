// Command goodput runs the goodput scenario of package bench for every client
// row, one after another, against a provider speaking one or more dialects,
// and prints a markdown table per dialect with the parameters, the machine
// and issue 16's targets. From bench/:
//
//	go run ./cmd/goodput                          # the full run: R=100/s, B=10, C=64, N=1000, OpenAI's dialect
//	go run ./cmd/goodput -dialect all -runs 3     # every dialect, each row 3 times: ranges over the runs
//	go run ./cmd/goodput -rows cooldown           # only the rows whose name matches
//	go run ./cmd/goodput -latency 800ms -workers 128
//	go run ./cmd/goodput -rate 10 -latency 10s -duration 120s -rows '^retryhttp$|cooldown'
//	go run ./cmd/goodput -calls 200 -workers 16   # a quick try
//
// Progress goes to stderr, the tables to stdout.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func main() {
	cfg := bench.DefaultGoodput
	flag.IntVar(&cfg.Rate, "rate", cfg.Rate, "R: requests a second the provider admits")
	flag.IntVar(&cfg.Burst, "burst", cfg.Burst, "B: the provider's burst (bucket size)")
	flag.IntVar(&cfg.Workers, "workers", cfg.Workers, "C: concurrent workers")
	flag.IntVar(&cfg.Calls, "calls", cfg.Calls, "N: calls per client row, shared by the workers (unused with -duration)")
	flag.DurationVar(&cfg.Latency, "latency", cfg.Latency, "L: how long the provider takes to answer an admitted request (a 429 answers at once)")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "run each row this long instead of N calls, counting what ends within it (0: N calls)")
	flag.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "each call's context timeout")
	dialects := flag.String("dialect", bench.OpenAIDialect.String(), "what the provider says: a name, a comma list, or all ("+names(bench.Dialects())+")")
	runs := flag.Int("runs", 1, "K: run each row K times per dialect and print ranges (min–max) over the runs")
	rows := flag.String("rows", "", "run only the rows whose name matches this regexp")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("goodput: ")
	if cfg.Rate <= 0 || cfg.Burst <= 0 || cfg.Workers <= 0 || cfg.Timeout <= 0 || *runs <= 0 {
		log.Fatal("-rate, -burst, -workers, -timeout and -runs must be positive")
	}
	if cfg.Duration == 0 && cfg.Calls <= 0 {
		log.Fatal("-calls must be positive without -duration")
	}
	if cfg.Latency < 0 || cfg.Duration < 0 {
		log.Fatal("-latency and -duration must not be negative")
	}
	ds, err := parseDialects(*dialects)
	if err != nil {
		log.Fatalf("-dialect: %v", err)
	}
	match, err := regexp.Compile(*rows)
	if err != nil {
		log.Fatalf("-rows: %v", err)
	}
	var libs []bench.Lib
	for _, l := range bench.GoodputRows() {
		if match.MatchString(l.Name) {
			libs = append(libs, l)
		}
	}
	if len(libs) == 0 {
		log.Fatalf("no row matches -rows %q", *rows)
	}

	cmd := []string{"go run ./cmd/goodput"}
	flag.Visit(func(f *flag.Flag) { cmd = append(cmd, "-"+f.Name+" "+quote(f.Value.String())) })
	m := machine()
	started := time.Now()
	var sections []section
	for _, d := range ds {
		c := cfg
		c.Dialect = d
		s := section{cfg: c, libs: libs, reports: make([][]bench.GoodputReport, len(libs))}
		// Run after run, every row in turn, so that a row's runs spread over
		// the machine's moods instead of meeting one of them together.
		for k := range *runs {
			for i, l := range libs {
				log.Printf("%s, %s, run %d/%d: %s", d, l.Name, k+1, *runs, what(c))
				r := bench.Goodput(l, c)
				log.Printf("%s, %s: %d ok, %d failed, %d cut, goodput %.3f, wall %s", d, l.Name, r.OK, r.Failed, r.Cut, r.Goodput(), r.Wall.Round(time.Millisecond))
				s.reports[i] = append(s.reports[i], r)
			}
		}
		sections = append(sections, s)
	}
	m.loadEnd = loadavg()
	write(os.Stdout, cfg, *runs, strings.Join(cmd, " "), started, time.Since(started), m, sections)
}

// section is one dialect's table: reports[i] are the runs of libs[i].
type section struct {
	cfg     bench.GoodputConfig
	libs    []bench.Lib
	reports [][]bench.GoodputReport
}

func parseDialects(s string) ([]bench.Dialect, error) {
	if s == "all" {
		return bench.Dialects(), nil
	}
	var ds []bench.Dialect
	for name := range strings.SplitSeq(s, ",") {
		d, ok := bench.DialectByName(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("no dialect %q (want one of %s, or all)", name, names(bench.Dialects()))
		}
		if !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	return ds, nil
}

// quote quotes v for a shell when it needs it (a regexp of -rows does).
func quote(v string) string {
	if v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:_-") == "" {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

func names(ds []bench.Dialect) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.String())
	}
	return strings.Join(s, ", ")
}

// what says in a few words what one run does, for the progress lines.
func what(c bench.GoodputConfig) string {
	calls := fmt.Sprintf("%d calls", c.Calls)
	if c.Duration > 0 {
		calls = fmt.Sprintf("for %s", c.Duration)
	}
	return fmt.Sprintf("%s, %d workers, %d/s burst %d, answers after %s", calls, c.Workers, c.Rate, c.Burst, c.Latency)
}

func write(w io.Writer, cfg bench.GoodputConfig, runs int, cmd string, started time.Time, total time.Duration, m env, sections []section) {
	timed := cfg.Duration > 0
	fmt.Fprintf(w, "## Goodput under a rate limit\n\n")
	fmt.Fprintf(w, "| | |\n|---|---|\n")
	fmt.Fprintf(w, "| date | %s |\n", started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "| machine | %s, %d cores; load average %s at start, %s at end |\n", m.cpu, runtime.NumCPU(), m.loadStart, m.loadEnd)
	fmt.Fprintf(w, "| Go | %s %s/%s |\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "| commit | %s |\n", m.commit)
	fmt.Fprintf(w, "| provider | one token bucket on 127.0.0.1: R = %d requests/s, burst B = %d, starts full; a request that gets a token (as it arrives) is answered 200 after L = %s, the others 429 at once; what the answers say about the limit is the dialect's (below) |\n", cfg.Rate, cfg.Burst, cfg.Latency)
	if timed {
		fmt.Fprintf(w, "| clients | C = %d workers each make calls one after another for D = %s; what ends within D counts, the calls running then are cut (neither ok nor failed); %s context per call, no Budget; a fresh provider and base transport per row, rows one after another; %d run(s) of each row per dialect |\n", cfg.Workers, cfg.Duration, cfg.Timeout, runs)
		fmt.Fprintf(w, "| ideal | %d calls ok within D: the ideal client (each worker sends the moment it is free and a token is there; no request refused) |\n", cfg.IdealOK(cfg.Duration))
	} else {
		fmt.Fprintf(w, "| clients | C = %d workers share N = %d POSTs per row; %s context per call, no Budget; a fresh provider and base transport per row, rows one after another; %d run(s) of each row per dialect |\n", cfg.Workers, cfg.Calls, cfg.Timeout, runs)
		fmt.Fprintf(w, "| ideal wall | %s: the ideal client (each worker sends the moment it is free and a token is there; no request refused) ends N calls |\n", secs(cfg.IdealWall()))
	}
	fmt.Fprintf(w, "| command | `%s` (from bench/), %s in all |\n", cmd, secs(total))

	for _, s := range sections {
		writeSection(w, s)
	}

	fmt.Fprintf(w, "\n*goodput*: calls ok over the most the ideal client ends in the same time (the wall; D in a timed run): 1 is as good as any client can do against this provider with these workers and this latency, a slower run is lower. *Ranges* are min–max over the runs, each column on its own (not one run). *requests per success*: requests the provider received over calls ok (a timed run leaves out the requests admitted but not yet answered when it ended: their calls were cut on their way to a success). Latencies are of every call that ended, ok or not, from `Do` to the end of the body (cut calls are not in them). *targets met*: runs that met all four targets, and which targets were missed in any run.\n")
}

func writeSection(w io.Writer, s section) {
	cfg, t := s.cfg, s.cfg.Targets()
	timed := cfg.Duration > 0
	fmt.Fprintf(w, "\n### %s\n\n", cfg.Dialect)
	fmt.Fprintf(w, "Provider: %s.\n\n", cfg.Dialect.Description())
	fmt.Fprintf(w, "Targets (issue 16): ≤ %.1f requests per success, goodput ≥ %.2f, no failed call, p99 ≤ 2 × C / R + L = %s.\n\n", t.RequestsPerSuccess, t.Goodput, secs(t.P99))
	cut, align := "", ""
	if timed {
		cut, align = " cut |", "--:|"
	}
	fmt.Fprintf(w, "| client | calls ok | failed (429 / error / other) |%s requests per success | 429s received | goodput | p50 | p99 | max | wall | TCP conns | targets met |\n", cut)
	fmt.Fprintf(w, "|---|--:|--:|%s--:|--:|--:|--:|--:|--:|--:|--:|---|\n", align)
	for i, l := range s.libs {
		rs := s.reports[i]
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
		fmt.Fprintf(w, " %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			span(rs, "%.2f", bench.GoodputReport.RequestsPerSuccess),
			count(func(r bench.GoodputReport) int { return int(r.Provider.Limited) }),
			span(rs, "%.3f", bench.GoodputReport.Goodput),
			dur(func(r bench.GoodputReport) time.Duration { return r.P50 }),
			dur(func(r bench.GoodputReport) time.Duration { return r.P99 }),
			dur(func(r bench.GoodputReport) time.Duration { return r.Max }),
			dur(func(r bench.GoodputReport) time.Duration { return r.Wall }),
			count(func(r bench.GoodputReport) int { return int(r.Provider.Conns) }),
			met(t, rs))
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

// span is the range of f over the runs, each end written with format: one
// value when both ends read the same, else "min–max".
func span(rs []bench.GoodputReport, format string, f func(bench.GoodputReport) float64) string {
	lo, hi := f(rs[0]), f(rs[0])
	for _, r := range rs[1:] {
		lo, hi = min(lo, f(r)), max(hi, f(r))
	}
	a, b := fmt.Sprintf(format, lo), fmt.Sprintf(format, hi)
	if a == b {
		return a
	}
	return a + "–" + b
}

// durSpan is span for durations: "1.39–1.52 s" when both ends have the same
// unit.
func durSpan(rs []bench.GoodputReport, f func(bench.GoodputReport) time.Duration) string {
	lo, hi := f(rs[0]), f(rs[0])
	for _, r := range rs[1:] {
		lo, hi = min(lo, f(r)), max(hi, f(r))
	}
	a, b := secs(lo), secs(hi)
	if a == b {
		return a
	}
	an, au, _ := strings.Cut(a, " ")
	bn, bu, _ := strings.Cut(b, " ")
	if au == bu {
		return an + "–" + bn + " " + bu
	}
	return a + "–" + b
}

// met says in how many runs r met every target, and names the targets
// missed in any.
func met(t bench.GoodputTargets, rs []bench.GoodputReport) string {
	all := 0
	var missed []string
	for _, r := range rs {
		m := t.Missed(r)
		if len(m) == 0 {
			all++
		}
		missed = append(missed, m...)
	}
	// In Missed's order, once each.
	order := []string{"requests/success", "goodput", "failed", "p99"}
	slices.SortStableFunc(missed, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
	missed = slices.Compact(missed)
	s := fmt.Sprintf("%d/%d", all, len(rs))
	if len(missed) > 0 {
		s += " (" + strings.Join(missed, ", ") + ")"
	}
	return s
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

type env struct{ cpu, commit, loadStart, loadEnd string }

func machine() env {
	e := env{cpu: "unknown CPU", commit: "unknown", loadStart: loadavg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				e.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		e.commit = strings.TrimSpace(string(b))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			e.commit += " (with uncommitted changes)"
		}
	}
	return e
}

// loadavg is the 1, 5 and 15 minute load averages, "?" when unknown.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
