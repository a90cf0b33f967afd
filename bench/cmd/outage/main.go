// Command outage runs the outage scenario of package bench (issue 30) for
// every client row, one after another: calls arrive open loop at a provider
// that fails for a while, with 503 or by resetting connections, then comes
// back; it prints a markdown table per fault with the parameters, the
// machine and the targets. From bench/:
//
//	go run ./cmd/outage                     # issue 30's run: 200 calls/s for 10 s, down from 2 s to 7 s, both faults
//	go run ./cmd/outage -runs 3             # each row 3 times: ranges over the runs
//	go run ./cmd/outage -rows circuit       # only the rows whose name matches
//	go run ./cmd/outage -fault reset -duration 4s -down-from 1s -down-until 2s
//
// The row of 8 replicas on one Redis needs redis-server (one is started on
// a free 127.0.0.1 port for the run) or -redis. Progress goes to stderr,
// the tables to stdout.
package main

import (
	"flag"
	"log"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func main() {
	cfg := bench.DefaultBlackout
	flag.IntVar(&cfg.Rate, "rate", cfg.Rate, "calls started a second, open loop")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long calls are started")
	flag.DurationVar(&cfg.DownFrom, "down-from", cfg.DownFrom, "the provider fails from this long after the start")
	flag.DurationVar(&cfg.DownUntil, "down-until", cfg.DownUntil, "until this long after the start")
	flag.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "each call's context deadline")
	flag.DurationVar(&cfg.After, "after", cfg.After, "the window after the return the share ok is judged over")
	faults := flag.String("fault", "all", "how the provider fails: 503, reset or all")
	runs := flag.Int("runs", 1, "run each row this many times per fault and print ranges (min–max) over the runs")
	rows := flag.String("rows", "", "run only the rows whose name matches this regexp")
	redisAddr := flag.String("redis", "", "the Redis of the +redis row (default: a redis-server started on 127.0.0.1 for the run)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("outage: ")
	if cfg.Rate <= 0 || cfg.Duration <= 0 || cfg.Timeout <= 0 || cfg.After <= 0 || *runs <= 0 {
		log.Fatal("-rate, -duration, -timeout, -after and -runs must be positive")
	}
	if cfg.DownFrom < 0 || cfg.DownUntil <= cfg.DownFrom {
		log.Fatal("want 0 ≤ -down-from < -down-until")
	}
	fs := map[string][]bench.Fault{"503": {bench.Fault503}, "reset": {bench.FaultReset}, "all": {bench.Fault503, bench.FaultReset}}[*faults]
	if fs == nil {
		log.Fatalf("-fault %q: want 503, reset or all", *faults)
	}
	match, err := regexp.Compile(*rows)
	if err != nil {
		log.Fatalf("-rows: %v", err)
	}
	fleet, stop := fleetOf(*redisAddr, match)
	defer stop()
	var picked []bench.BlackoutRow
	for _, r := range bench.BlackoutRows(fleet) {
		if match.MatchString(r.Name) {
			picked = append(picked, r)
		}
	}
	if len(picked) == 0 {
		log.Fatalf("no row matches -rows %q", *rows)
	}

	cmd := []string{"go run ./cmd/outage"}
	flag.Visit(func(f *flag.Flag) { cmd = append(cmd, "-"+f.Name+" "+quote(f.Value.String())) })
	m := bench.NewMachine()
	started := time.Now()
	var tables []table
	for _, f := range fs {
		c := cfg
		c.Fault = f
		t := table{cfg: c, rows: picked, reports: make([][]bench.BlackoutReport, len(picked))}
		// Run after run, every row in turn, so that a row's runs spread over
		// the machine's moods instead of meeting one of them together.
		for k := range *runs {
			for i, row := range picked {
				if fleet != nil {
					if err := fleet.Reset(); err != nil {
						log.Fatalf("redis at %s: %v", fleet.Addr, err)
					}
				}
				r := bench.Blackout(row, c)
				m.Sample()
				log.Printf("%s, run %d/%d, %s: %.4f per call, p50 %s, first ok %s, share ok %.3f, load %s",
					f, k+1, *runs, row.Name, r.PerCall(), r.FailP50(), r.FirstOK, r.AfterShare(), bench.LoadAvg())
				t.reports[i] = append(t.reports[i], r)
			}
		}
		tables = append(tables, t)
	}
	loadEnd := bench.LoadAvg()
	write(os.Stdout, cfg, *runs, strings.Join(cmd, " "), started, time.Since(started), m, loadEnd, tables)
}

// table is one fault's table: reports[i] are the runs of rows[i].
type table struct {
	cfg     bench.BlackoutConfig
	rows    []bench.BlackoutRow
	reports [][]bench.BlackoutReport
}

// fleetOf is the Fleet of the +redis row when rows match it, on the Redis
// at addr or else one started for the run, and what stops it; nil when no
// such row runs.
func fleetOf(addr string, rows *regexp.Regexp) (*bench.Fleet, func()) {
	f := &bench.Fleet{Addr: addr, Prefix: "retryhttp:outage:"}
	all := bench.BlackoutRows(f)
	if !rows.MatchString(all[len(all)-1].Name) {
		return nil, func() {}
	}
	stop := func() {}
	if f.Addr == "" {
		var err error
		if f.Addr, stop, err = bench.StartRedis(); err != nil {
			log.Fatalf("the +redis row: %v (install redis-server, give -redis, or leave the row out with -rows)", err)
		}
	}
	return f, func() { _ = f.Reset(); stop() }
}

// quote quotes v for a shell when it needs it (a regexp of -rows does).
func quote(v string) string {
	if v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:_-") == "" {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
