// Command streams runs the streams scenario of package bench (issue 38) for
// every client row, one after another: 64 workers make 1,000 streamed calls
// to a provider on 127.0.0.1 that streams each answer as server-sent
// events (its first token at 200 ms, then a token every 20 ms for 1 s) and
// fails some streams after their 200: 30% with an overloaded error after
// their opening event, or 10% stalled 30 s before their first token, or
// none. It prints a markdown table per fault, in Anthropic's and OpenAI's
// dialects, with the parameters, the machine and the targets. From bench/:
//
//	go run ./cmd/streams                        # issue 38's run: every fault, both dialects, every row
//	go run ./cmd/streams -fault overloaded      # one fault
//	go run ./cmd/streams -rows 'retryhttp' -dialect openai
//	go run ./cmd/streams -calls 200 -stall 5s   # a shorter run
//
// Progress goes to stderr, the tables to stdout.
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
	cfg := bench.DefaultStreams
	flag.IntVar(&cfg.Workers, "workers", cfg.Workers, "calls at once")
	flag.IntVar(&cfg.Calls, "calls", cfg.Calls, "calls in all, per row")
	flag.DurationVar(&cfg.TTFT, "ttft", cfg.TTFT, "a healthy stream's time to first token")
	flag.DurationVar(&cfg.TokenEvery, "token-every", cfg.TokenEvery, "then a token every")
	flag.IntVar(&cfg.Tokens, "tokens", cfg.Tokens, "tokens a stream")
	flag.DurationVar(&cfg.Stall, "stall", cfg.Stall, "how long a stalled stream stalls before its first token")
	flag.DurationVar(&cfg.FirstToken, "first-token", cfg.FirstToken, "WithStreamRetry's bound, in the rows that set it")
	flag.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "each call's context deadline")
	flag.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "of the draws of which streams fail")
	overloaded := flag.Float64("overloaded", 0.3, "share of the streams that fail overloaded, in the overloaded table")
	stalled := flag.Float64("stalled", 0.1, "share of the streams that stall, in the stall table")
	faults := flag.String("fault", "all", "none, overloaded, stall or all")
	dialects := flag.String("dialect", "all", "anthropic, openai or all")
	rows := flag.String("rows", "", "run only the rows whose name matches this regexp (the bare row always runs: the targets compare with it)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("streams: ")
	if cfg.Workers <= 0 || cfg.Calls <= 0 || cfg.Tokens <= 0 || cfg.Timeout <= 0 {
		log.Fatal("-workers, -calls, -tokens and -timeout must be positive")
	}
	fs := map[string][]bench.StreamFault{"none": {bench.NoFault}, "overloaded": {bench.FaultOverloaded}, "stall": {bench.FaultStall},
		"all": {bench.NoFault, bench.FaultOverloaded, bench.FaultStall}}[*faults]
	ds := map[string][]bench.StreamDialect{"anthropic": {bench.StreamAnthropic}, "openai": {bench.StreamOpenAI},
		"all": {bench.StreamAnthropic, bench.StreamOpenAI}}[*dialects]
	if fs == nil || ds == nil {
		log.Fatalf("-fault %q, -dialect %q: see -help", *faults, *dialects)
	}
	match, err := regexp.Compile(*rows)
	if err != nil {
		log.Fatalf("-rows: %v", err)
	}
	shares := map[bench.StreamFault]float64{bench.FaultOverloaded: *overloaded, bench.FaultStall: *stalled}

	cmd := []string{"go run ./cmd/streams"}
	flag.Visit(func(f *flag.Flag) { cmd = append(cmd, "-"+f.Name+" "+quote(f.Value.String())) })
	m := bench.NewMachine()
	started := time.Now()
	var tables []table
	for _, f := range fs {
		t := table{fault: f, share: shares[f]}
		for _, d := range ds {
			c := cfg
			c.Dialect, c.Fault, c.Share = d, f, shares[f]
			for _, row := range bench.StreamsRows(d) {
				if row.Name != "bare (net/http)" && !match.MatchString(row.Name) {
					continue
				}
				r := bench.Streams(row, c)
				m.Sample()
				log.Printf("%s, %s, %s: completed %.3f, ttft p50 %s p99 %s, %.3f requests per completed call, %s, load %s",
					f, d, row.Name, r.Share(), ms(r.TTFT(0.5)), ms(r.TTFT(0.99)), r.PerCompleted(), r.Wall.Round(time.Millisecond), bench.LoadAvg())
				t.rows = append(t.rows, result{row: row, report: r})
			}
		}
		tables = append(tables, t)
	}
	write(os.Stdout, cfg, shares, strings.Join(cmd, " "), started, time.Since(started), m, bench.LoadAvg(), tables)
}

// quote quotes v for a shell when it needs it (a regexp of -rows does).
func quote(v string) string {
	if v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:_-") == "" {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
