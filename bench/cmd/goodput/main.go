// Command goodput runs the goodput scenario of package bench for every client
// row, one after another, against a provider speaking one or more dialects,
// and prints a markdown table per dialect with the parameters, the machine
// and the targets: issue 16's, or with a token limit (-tokens-rate) issue
// 22's. From bench/:
//
//	go run ./cmd/goodput                          # the full run: R=100/s, B=10, C=64, N=1000, OpenAI's dialect
//	go run ./cmd/goodput -dialect all -runs 3     # every dialect, each row 3 times: ranges over the runs
//	go run ./cmd/goodput -rows cooldown           # only the rows whose name matches
//	go run ./cmd/goodput -latency 800ms -workers 128
//	go run ./cmd/goodput -rate 10 -latency 10s -duration 120s -rows '^retryhttp$|cooldown'
//	go run ./cmd/goodput -calls 200 -workers 16   # a quick try
//	go run ./cmd/goodput -dialect all -tokens-rate 50000 -tokens-burst 50000 -calls 400 -rows 'retries10$'   # issue 22's token limit
//
// Progress goes to stderr, the tables to stdout.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
	"github.com/retryhttp/retryhttp/retryhttptest"
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
	flag.IntVar(&cfg.TokenRate, "tokens-rate", cfg.TokenRate, "T: tokens a second the provider admits, each request costing ceil(len(body) ÷ 4); prompts then run from 100 to 4,000 tokens (0: no token limit)")
	flag.IntVar(&cfg.TokenBurst, "tokens-burst", cfg.TokenBurst, "the token bucket's size (0: T)")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "draws the prompts' sizes with a token limit: the same seed, the same prompts")
	dialects := flag.String("dialect", retryhttptest.OpenAIDialect.String(), "what the provider says: a name, a comma list, or all ("+names(retryhttptest.Dialects())+")")
	runs := flag.Int("runs", 1, "K: run each row K times per dialect and print ranges (min–max) over the runs")
	rows := flag.String("rows", "", "run only the rows whose name matches this regexp")
	flag.IntVar(&cfg.Replicas, "replicas", 0, "K: deal the workers among K replicas, each with its own Transport and Cooldown (0 or 1: one); adds the row retryhttp+cooldown+retries10+redis, whose replicas share one Redis")
	redisAddr := flag.String("redis", "", "the Redis of the +redis row (default: a redis-server started on 127.0.0.1 for the run)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("goodput: ")
	if cfg.Rate <= 0 || cfg.Burst <= 0 || cfg.Workers <= 0 || cfg.Timeout <= 0 || *runs <= 0 {
		log.Fatal("-rate, -burst, -workers, -timeout and -runs must be positive")
	}
	if cfg.Duration == 0 && cfg.Calls <= 0 {
		log.Fatal("-calls must be positive without -duration")
	}
	if cfg.Latency < 0 || cfg.Duration < 0 || cfg.TokenRate < 0 || cfg.TokenBurst < 0 {
		log.Fatal("-latency, -duration, -tokens-rate and -tokens-burst must not be negative")
	}
	ds, err := parseDialects(*dialects)
	if err != nil {
		log.Fatalf("-dialect: %v", err)
	}
	match, err := regexp.Compile(*rows)
	if err != nil {
		log.Fatalf("-rows: %v", err)
	}
	fleet, stopRedis := fleetOf(cfg.Replicas, *redisAddr, match)
	defer stopRedis()
	var libs []bench.Lib
	for _, l := range append(bench.GoodputRows(), fleet...) {
		if match.MatchString(l.Name) {
			libs = append(libs, l)
		}
	}
	if len(libs) == 0 {
		log.Fatalf("no row matches -rows %q", *rows)
	}

	cmd := []string{"go run ./cmd/goodput"}
	flag.Visit(func(f *flag.Flag) { cmd = append(cmd, "-"+f.Name+" "+quote(f.Value.String())) })
	m := bench.NewMachine()
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
				if resetFleet != nil {
					resetFleet()
				}
				r := bench.Goodput(l, c)
				log.Printf("%s, %s: %d ok, %d failed, %d cut, goodput %.3f, token share %.3f, wall %s", d, l.Name, r.OK, r.Failed, r.Cut, r.Goodput(), r.TokenShare(), r.Wall.Round(time.Millisecond))
				s.reports[i] = append(s.reports[i], r)
			}
		}
		sections = append(sections, s)
	}
	loadEnd := bench.LoadAvg()
	write(os.Stdout, cfg, *runs, strings.Join(cmd, " "), started, time.Since(started), m, loadEnd, sections)
}

// section is one dialect's table: reports[i] are the runs of libs[i].
type section struct {
	cfg     bench.GoodputConfig
	libs    []bench.Lib
	reports [][]bench.GoodputReport
}

func parseDialects(s string) ([]retryhttptest.Dialect, error) {
	if s == "all" {
		return retryhttptest.Dialects(), nil
	}
	var ds []retryhttptest.Dialect
	for name := range strings.SplitSeq(s, ",") {
		d, ok := bench.DialectByName(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("no dialect %q (want one of %s, or all)", name, names(retryhttptest.Dialects()))
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

func names(ds []retryhttptest.Dialect) string {
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
	tokens := ""
	if c.TokenRate > 0 {
		tokens = fmt.Sprintf(", %d tokens/s bucket %d", c.TokenRate, c.TokenBurst)
	}
	return fmt.Sprintf("%s, %d workers (%d replicas), %d/s burst %d%s, answers after %s", calls, c.Workers, max(c.Replicas, 1), c.Rate, c.Burst, tokens, c.Latency)
}

// resetFleet, when there is a +redis row, empties its Redis before a row.
var resetFleet func()

// fleetOf is the +redis row when replicas > 1 and rows match it: its
// replicas share the Redis at addr, else one started for the run.
func fleetOf(replicas int, addr string, rows *regexp.Regexp) ([]bench.Lib, func()) {
	f := &bench.Fleet{Addr: addr}
	if replicas <= 1 || !rows.MatchString(f.Lib().Name) {
		return nil, func() {}
	}
	stop := func() {}
	if f.Addr == "" {
		var err error
		if f.Addr, stop, err = bench.StartRedis(); err != nil {
			log.Fatalf("-replicas: %v (install redis-server, or give -redis)", err)
		}
	}
	resetFleet = func() {
		if err := f.Reset(); err != nil {
			log.Fatalf("redis at %s: %v", f.Addr, err)
		}
	}
	return []bench.Lib{f.Lib()}, func() { resetFleet(); stop() }
}
