// Command goodput runs the goodput scenario of package bench for every client
// row, one after another, and prints a markdown table with the parameters and
// the machine. From bench/:
//
//	go run ./cmd/goodput                        # the full run: R=100/s, B=10, C=64, N=1000
//	go run ./cmd/goodput -rows cooldown         # only the rows whose name matches
//	go run ./cmd/goodput -calls 200 -workers 16 # a quick try
//
// Progress goes to stderr, the table to stdout.
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
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func main() {
	cfg := bench.DefaultGoodput
	flag.IntVar(&cfg.Rate, "rate", cfg.Rate, "R: requests a second the provider admits")
	flag.IntVar(&cfg.Burst, "burst", cfg.Burst, "B: the provider's burst (bucket size)")
	flag.IntVar(&cfg.Workers, "workers", cfg.Workers, "C: concurrent workers")
	flag.IntVar(&cfg.Calls, "calls", cfg.Calls, "N: calls per client row, shared by the workers")
	flag.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "each call's context timeout")
	rows := flag.String("rows", "", "run only the rows whose name matches this regexp")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("goodput: ")
	if cfg.Rate <= 0 || cfg.Burst <= 0 || cfg.Workers <= 0 || cfg.Calls <= 0 || cfg.Timeout <= 0 {
		log.Fatal("-rate, -burst, -workers, -calls and -timeout must be positive")
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
	flag.Visit(func(f *flag.Flag) { cmd = append(cmd, fmt.Sprintf("-%s %s", f.Name, f.Value)) })
	m := machine()
	started := time.Now()
	var reports []bench.GoodputReport
	for _, l := range libs {
		log.Printf("%s: %d calls, %d workers, %d/s burst %d", l.Name, cfg.Calls, cfg.Workers, cfg.Rate, cfg.Burst)
		r := bench.Goodput(l, cfg)
		log.Printf("%s: %d ok, %d failed, goodput %.3f, wall %s", l.Name, r.OK, r.Failed, r.Goodput(), r.Wall.Round(time.Millisecond))
		reports = append(reports, r)
	}
	m.loadEnd = loadavg()
	write(os.Stdout, cfg, strings.Join(cmd, " "), started, time.Since(started), m, reports)
}

func write(w io.Writer, cfg bench.GoodputConfig, cmd string, started time.Time, total time.Duration, m env, reports []bench.GoodputReport) {
	fmt.Fprintf(w, "## Goodput under a rate limit\n\n")
	fmt.Fprintf(w, "| | |\n|---|---|\n")
	fmt.Fprintf(w, "| date | %s |\n", started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "| machine | %s, %d cores; load average %s at start, %s at end |\n", m.cpu, runtime.NumCPU(), m.loadStart, m.loadEnd)
	fmt.Fprintf(w, "| Go | %s %s/%s |\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "| commit | %s |\n", m.commit)
	fmt.Fprintf(w, "| provider | one token bucket on 127.0.0.1: R = %d requests/s, burst B = %d, starts full; over the limit 429 with `retry-after-ms`, `Retry-After` (whole seconds, at least 1); `x-ratelimit-{limit,remaining,reset}-requests` on every response |\n", cfg.Rate, cfg.Burst)
	fmt.Fprintf(w, "| clients | C = %d workers share N = %d POSTs per row; %s context per call, no Budget; a fresh provider and base transport per row, rows one after another |\n", cfg.Workers, cfg.Calls, cfg.Timeout)
	fmt.Fprintf(w, "| ideal wall | %s ((N − B) / R) |\n", secs(cfg.IdealWall()))
	fmt.Fprintf(w, "| command | `%s` (from bench/), %s in all |\n\n", cmd, secs(total))

	fmt.Fprintf(w, "| client | calls ok | failed (429 / error / other) | requests per success | 429s received | goodput | p50 | p99 | max | wall | TCP conns |\n")
	fmt.Fprintf(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range reports {
		fmt.Fprintf(w, "| %s | %d | %d (%d / %d / %d) | %.2f | %d | %.3f | %s | %s | %s | %s | %d |\n",
			r.Client, r.OK, r.Failed, r.Got429, r.Errors, r.GotOther, r.RequestsPerSuccess(),
			r.Provider.Limited, r.Goodput(), secs(r.P50), secs(r.P99), secs(r.Max), secs(r.Wall), r.Provider.Conns)
	}
	fmt.Fprintf(w, "\n*goodput*: calls ok per second of wall, over R (1 = every token the provider refilled went to a call that succeeded; the burst lifts a run as fast as the limit allows slightly above 1, and a short run far above: read it with *calls ok*). Latencies are of every call, ok or not, from `Do` to the end of the body.\n")
	var errs []string
	for _, r := range reports {
		if r.FirstErr != "" {
			errs = append(errs, fmt.Sprintf("- %s: `%s`", r.Client, r.FirstErr))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nErrors handed back, one per row that returned any:\n\n%s\n", strings.Join(errs, "\n"))
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
