// Command priority runs the priority scenario of package bench (issue 37,
// R27): people's calls open loop, each with the public tier's Budget, and
// a batch's fan-out on the same provider limit, first come first served
// ("fifo") and with the batch marked Background ("priority"), in one
// process and in K replicas sharing one redis-server; it prints a markdown
// table per K with the parameters, the machine and the targets. From
// bench/:
//
//	go run ./cmd/priority                        # issue 37's run: K=1 and K=8, both rows, once
//	go run ./cmd/priority -runs 3                # each row 3 times: ranges over the runs
//	go run ./cmd/priority -replicas 1 -rows priority
//	go run ./cmd/priority -people-for 5s -batch 200 -batch-at 1s   # a quick try
//
// K above 1 needs redis-server (one is started on a free 127.0.0.1 port for
// the run) or -redis. Progress goes to stderr, the tables to stdout.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/bench"
)

func main() {
	cfg := bench.DefaultPriority
	flag.IntVar(&cfg.Rate, "rate", cfg.Rate, "R: requests a second the provider admits")
	flag.IntVar(&cfg.Burst, "burst", cfg.Burst, "B: the provider's bucket")
	flag.DurationVar(&cfg.Latency, "latency", cfg.Latency, "how long the provider takes to answer an admitted request")
	flag.IntVar(&cfg.PeopleRate, "people-rate", cfg.PeopleRate, "people's calls started a second, open loop")
	flag.DurationVar(&cfg.PeopleFor, "people-for", cfg.PeopleFor, "people's calls are started for this long")
	flag.DurationVar(&cfg.Budget, "budget", cfg.Budget, "each person's Budget")
	flag.IntVar(&cfg.BatchCalls, "batch", cfg.BatchCalls, "the batch's calls, started at once")
	flag.DurationVar(&cfg.BatchAt, "batch-at", cfg.BatchAt, "when the batch starts, from the run's start")
	flag.IntVar(&cfg.Retries, "retries", cfg.Retries, "WithMaxRetries of every Transport")
	replicas := flag.String("replicas", "1,8", "K: a comma list; K above 1 puts K replicas on one Redis, the batch on one, the people on the others")
	runs := flag.Int("runs", 1, "run each row this many times per K and print ranges (min–max) over the runs")
	rows := flag.String("rows", "", "run only the rows whose name matches this regexp (fifo, priority)")
	redisAddr := flag.String("redis", "", "the Redis of K above 1 (default: a redis-server started on 127.0.0.1 for the run)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("priority: ")
	if cfg.Rate <= 0 || cfg.Burst <= 0 || cfg.PeopleRate <= 0 || cfg.PeopleFor <= 0 || cfg.Budget <= 0 || cfg.BatchCalls < 0 || cfg.BatchAt < 0 || cfg.Retries < 0 || *runs <= 0 {
		log.Fatal("-rate, -burst, -people-rate, -people-for, -budget and -runs must be positive; -batch, -batch-at and -retries not negative")
	}
	var ks []int
	for s := range strings.SplitSeq(*replicas, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || k < 1 {
			log.Fatalf("-replicas: %q is not a positive integer", s)
		}
		ks = append(ks, k)
	}
	match, err := regexp.Compile(*rows)
	if err != nil {
		log.Fatalf("-rows: %v", err)
	}
	var selected []bench.PriorityRow
	for _, r := range bench.PriorityRows() {
		if match.MatchString(r.Name) {
			selected = append(selected, r)
		}
	}
	if len(selected) == 0 {
		log.Fatalf("no row matches -rows %q", *rows)
	}

	fleet := &bench.Fleet{Addr: *redisAddr}
	for _, k := range ks {
		if k > 1 && fleet.Addr == "" {
			addr, stop, err := bench.StartRedis()
			if err != nil {
				log.Fatalf("-replicas %d: %v (install redis-server, or give -redis)", k, err)
			}
			defer stop()
			fleet.Addr = addr
		}
	}

	cmd := []string{"go run ./cmd/priority"}
	flag.Visit(func(f *flag.Flag) { cmd = append(cmd, "-"+f.Name+" "+quote(f.Value.String())) })
	m := bench.NewMachine()
	started := time.Now()
	sections := runAll(cfg, ks, selected, *runs, fleet, m)
	if fleet.Addr != "" {
		if err := fleet.Reset(); err != nil {
			log.Printf("redis at %s: %v", fleet.Addr, err)
		}
	}
	write(os.Stdout, cfg, *runs, strings.Join(cmd, " "), started, time.Since(started), m, bench.LoadAvg(), sections)
}

// runAll runs every row runs times at each K, run after run, the rows
// taking turns, and returns a section per K. K above 1 runs on fleet's
// Redis, emptied before each run.
func runAll(cfg bench.PriorityConfig, ks []int, rows []bench.PriorityRow, runs int, fleet *bench.Fleet, m *bench.Machine) []section {
	var sections []section
	for _, k := range ks {
		c := cfg
		c.Replicas = k
		s := section{cfg: c, rows: rows, reports: make([][]bench.PriorityReport, len(rows))}
		var cooldown func() *retryhttp.Cooldown
		if k > 1 {
			cooldown = func() *retryhttp.Cooldown { return fleet.Cooldown() }
		}
		for run := range runs {
			for i, row := range rows {
				if k > 1 {
					if err := fleet.Reset(); err != nil {
						log.Fatalf("redis at %s: %v", fleet.Addr, err)
					}
				}
				log.Printf("K=%d, %s, run %d/%d; load %s", k, row.Name, run+1, runs, bench.LoadAvg())
				r := bench.Priority(row, c, cooldown)
				m.Sample()
				progress(k, row, r)
				s.reports[i] = append(s.reports[i], r)
			}
		}
		sections = append(sections, s)
	}
	return sections
}

// progress writes what one run saw to stderr.
func progress(k int, row bench.PriorityRow, r bench.PriorityReport) {
	log.Printf("K=%d, %s: people %d/%d ok (%d busy, %d other), draining %d/%d ok, p99 %s; batch %d/%d ok, drain %s, goodput %.3f; %.3f req/success, %d 429s; fan-out %d in 100 ms, %d in 1 s, %d 429s in 1 s (batch %d); wall %s",
		k, row.Name, r.PeopleOK, r.People, r.PeopleBusy, r.PeopleOther, r.DrainingOK, r.Draining, secs(r.DrainingP99),
		r.BatchOK, r.Config.BatchCalls, secs(r.Drain()), r.Goodput(), r.RequestsPerSuccess(), r.Refused,
		r.Batch100ms, r.Batch1s, r.Refused1s, r.Batch429s, secs(r.Wall))
	log.Printf("K=%d, %s: answered p99 while draining %s, busy p50 %s, batch p50 %s max %s; 429s by second: %s",
		k, row.Name, secs(r.AnsweredP99), secs(r.BusyP50), secs(r.BatchP50), secs(r.BatchMax), bySecond(r.RefusedBySecond))
	if r.FirstErr != "" {
		log.Printf("K=%d, %s: an error: %s", k, row.Name, r.FirstErr)
	}
}

// section is one K's table: reports[i] are the runs of rows[i].
type section struct {
	cfg     bench.PriorityConfig
	rows    []bench.PriorityRow
	reports [][]bench.PriorityReport
}

// bySecond writes the non-zero counts of a run's seconds: "2s:14 3s:1".
func bySecond(n []int) string {
	var s []string
	for i, v := range n {
		if v > 0 {
			s = append(s, fmt.Sprintf("%ds:%d", i, v))
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

// quote quotes v for a shell when it needs it.
func quote(v string) string {
	if v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:_-") == "" {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// secs writes d in ms below a second, else in seconds.
func secs(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
