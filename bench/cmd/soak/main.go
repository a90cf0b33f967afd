// Command soak counts the log lines a fleet writes (issue 32): K replicas,
// each a process of its own with a retryhttp Transport whose Cooldown
// keeps its state on a retryredis Store of its own, all on one
// redis-server that it starts on a free 127.0.0.1 port, against one
// retryhttptest Provider in the OpenAI dialect on 127.0.0.1, whose request
// limit the fleet exceeds (so every call is paced). Every line counts: the
// Transport's and the Store's logger (zap, JSON, at Debug, on stdout) and
// go-redis's own logger (its default, unstructured on stderr, or
// retryredis.RedisLogger into the same zap logger), per level and per
// message, in each second. The scenes, each for -duration:
//
//	a  a healthy paced soak: -workers goroutines a replica, each calling in a closed loop
//	b  the same, with Redis killed at -down-from and started again at -down-until
//	c  a caller's hot loop: the provider asks for -ask-for (Retry-After) from the start,
//	   and one goroutine a replica calls in a tight loop, each call with a Budget of
//	   retryhttp.PublicTierMaxWait, so that every call fails fast
//
// It prints markdown tables: lines a second of each level (the busiest
// second and the mean over the scene) and the messages with the most
// lines, for each scene with go-redis's default logger and with the
// adapter. From bench/:
//
//	go run ./cmd/soak                        # issue 32's run: K=6, 10 s a scene, every scene both ways
//	go run ./cmd/soak -scenes b -go-redis default,adapter
//
// It needs redis-server (Debian's package). Progress goes to stderr, the
// tables to stdout.
package main

import (
	"flag"
	"log"
	"os"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func main() {
	if os.Getenv(replicaEnv) == "1" {
		if err := replicaMain(os.Args[1:]); err != nil {
			log.Fatal(err)
		}
		return
	}
	cfg := defaultConfig
	flag.IntVar(&cfg.k, "k", cfg.k, "replicas, each a process")
	flag.DurationVar(&cfg.duration, "duration", cfg.duration, "how long each scene runs (whole seconds)")
	flag.IntVar(&cfg.workers, "workers", cfg.workers, "goroutines a replica calling in a closed loop (scenes a and b)")
	flag.Float64Var(&cfg.rate, "rate", cfg.rate, "the provider's request limit, a second")
	flag.DurationVar(&cfg.latency, "latency", cfg.latency, "how long the provider takes to answer a success")
	flag.DurationVar(&cfg.downFrom, "down-from", cfg.downFrom, "scene b: Redis killed this long after the start")
	flag.DurationVar(&cfg.downUntil, "down-until", cfg.downUntil, "scene b: and started again this long after the start")
	flag.DurationVar(&cfg.askFor, "ask-for", cfg.askFor, "scene c: the wait the provider asks for")
	flag.IntVar(&cfg.top, "top", cfg.top, "the messages with the most lines reported for each run")
	names := flag.String("scenes", "a,b,c", "the scenes to run, by name")
	modes := flag.String("go-redis", "default,adapter", "go-redis's logger: its default (stderr), the adapter (retryredis.RedisLogger), or both")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("soak: ")
	if err := cfg.check(); err != nil {
		log.Fatal(err)
	}
	picked, adapters, err := pick(*names, *modes)
	if err != nil {
		log.Fatal(err)
	}
	cmd := []string{"go run ./cmd/soak"}
	flag.Visit(func(f *flag.Flag) { cmd = append(cmd, "-"+f.Name+" "+f.Value.String()) })
	env := bench.NewMachine()
	var results []result
	for _, sc := range picked {
		for _, adapter := range adapters {
			r, err := run(cfg, sc, adapter)
			if err != nil {
				log.Fatalf("scene %s: %v", sc.name, err)
			}
			env.Sample()
			log.Printf("%s, go-redis %s: %d ok, %d failed, %d lines, load %s",
				sc.title, modeName(adapter), r.ok, r.failed, r.lines(), bench.LoadAvg())
			results = append(results, r)
		}
	}
	write(os.Stdout, cfg, strings.Join(cmd, " "), env, results)
}

// defaultConfig is issue 32's run.
var defaultConfig = config{
	k: 6, duration: 10 * time.Second, workers: 4, rate: 10, latency: 50 * time.Millisecond,
	downFrom: 2 * time.Second, downUntil: 7 * time.Second, askFor: 60 * time.Second, top: 4,
}

func (c config) check() error {
	switch {
	case c.k <= 0 || c.workers <= 0 || c.rate <= 0 || c.top <= 0:
		return errorf("-k, -workers, -rate and -top must be positive")
	case c.duration < time.Second || c.duration%time.Second != 0:
		return errorf("-duration must be whole seconds, at least one")
	case c.downFrom < 0 || c.downUntil <= c.downFrom || c.downUntil > c.duration:
		return errorf("want 0 ≤ -down-from < -down-until ≤ -duration")
	case c.askFor <= 0:
		return errorf("-ask-for must be positive")
	}
	return nil
}

// pick is the scenes named in names and the loggers named in modes.
func pick(names, modes string) ([]scene, []bool, error) {
	var picked []scene
	for n := range strings.SplitSeq(names, ",") {
		found := false
		for _, sc := range scenes {
			if sc.name == strings.TrimSpace(n) {
				picked, found = append(picked, sc), true
			}
		}
		if !found {
			return nil, nil, errorf("-scenes: no scene %q (a, b or c)", n)
		}
	}
	var adapters []bool
	for m := range strings.SplitSeq(modes, ",") {
		switch strings.TrimSpace(m) {
		case "default":
			adapters = append(adapters, false)
		case "adapter":
			adapters = append(adapters, true)
		default:
			return nil, nil, errorf("-go-redis: %q is neither default nor adapter", m)
		}
	}
	return picked, adapters, nil
}

func modeName(adapter bool) string {
	if adapter {
		return "retryredis.RedisLogger"
	}
	return "default (stderr)"
}
