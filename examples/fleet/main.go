// Command fleet runs K replicas of a backend against one provider account
// (issue 23): one local rate-limited provider (retryhttptest's Provider,
// 100 requests/s, a bucket of 10), K processes' worth of Transports, each
// with a Cooldown of its own, first each on its own, then sharing their
// state on Redis through retryredis. It prints, for each, requests per
// success, goodput, failed calls and p99, beside one replica that makes all
// the calls alone.
//
//	go run ./examples/fleet                     # from the repo root: K=8, the OpenAI dialect
//	go run ./examples/fleet -k 32 -dialect all  # every dialect
//
// Redis is REDIS_ADDR when set, else an embedded server (miniredis, which
// runs retryredis's Lua scripts and pub/sub in the process): it runs with
// no setup and no network but 127.0.0.1.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/retryredis"
)

func main() {
	var o options
	flag.IntVar(&o.replicas, "k", 8, "replicas")
	flag.IntVar(&o.workers, "workers", 4, "workers per replica, each making calls back to back")
	flag.DurationVar(&o.span, "span", 3*time.Second, "how long each run makes calls")
	dialect := flag.String("dialect", "openai", `the provider's dialect: openai, anthropic, retry-after, gemini, bare, or "all"`)
	flag.Parse()
	ds, err := dialects(*dialect)
	if err == nil {
		o.dialects = ds
		err = run(context.Background(), os.Stdout, o, os.Getenv("REDIS_ADDR"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

type options struct {
	replicas, workers int
	span              time.Duration
	dialects          []retryhttptest.Dialect
}

func dialects(name string) ([]retryhttptest.Dialect, error) {
	if name == "all" {
		return retryhttptest.Dialects(), nil
	}
	for _, d := range retryhttptest.Dialects() {
		if d.String() == name {
			return []retryhttptest.Dialect{d}, nil
		}
	}
	return nil, fmt.Errorf("no dialect %q", name)
}

// run runs the fleet on the Redis at addr, or on an embedded one when addr
// is "", and prints a table to w.
func run(ctx context.Context, w io.Writer, o options, addr string) error {
	where, bound := "REDIS_ADDR "+addr+", each op bounded at retryredis's default", retryredis.DefaultTimeout
	if addr == "" {
		// miniredis runs the Lua in Go and compiles it at each call: slower
		// than Redis, so a looser bound (a slow op is not an error here).
		bound = 100 * time.Millisecond
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return err
		}
		defer mr.Close()
		addr, where = mr.Addr(), "an embedded Redis (miniredis), each op bounded at"
	}
	newClient := func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	}
	if err := ping(ctx, newClient()); err != nil {
		return fmt.Errorf("redis at %s: %w", addr, err)
	}
	fmt.Fprintf(w, "K=%d replicas × %d workers, %v a run, against one provider (%d requests/s, a bucket of %d)\nRedis: %s %v\n\n",
		o.replicas, o.workers, o.span, providerRate, providerBurst, where, bound)
	fmt.Fprintf(w, "%-12s %-22s %9s %8s %7s %8s %7s %11s\n", "dialect", "fleet", "req/succ", "goodput", "failed", "p99", "calls", "redis errs")
	for _, d := range o.dialects {
		one := runFleet(ctx, fleet{replicas: 1, workers: o.replicas * o.workers, span: o.span, dialect: d})
		alone := runFleet(ctx, fleet{replicas: o.replicas, workers: o.workers, span: o.span, dialect: d})
		shared := runFleet(ctx, fleet{replicas: o.replicas, workers: o.workers, span: o.span, dialect: d,
			redis: newClient, bound: bound, prefix: fmt.Sprintf("fleet:%s:%d:", d, time.Now().UnixNano())})
		for _, r := range []struct {
			name string
			res  result
		}{{"1 replica, all workers", one}, {fmt.Sprintf("%d, each on its own", o.replicas), alone},
			{fmt.Sprintf("%d, sharing retryredis", o.replicas), shared}} {
			fmt.Fprintf(w, "%-12s %-22s %9.2f %8.2f %7d %8v %7d %11d\n", d, r.name, r.res.perSuccess, r.res.goodput,
				r.res.failed, r.res.p99.Round(time.Millisecond), r.res.calls, r.res.storeErrs)
		}
	}
	fmt.Fprintln(w, "\nreq/succ: requests the provider received per success; goodput: successes within the span")
	fmt.Fprintln(w, "over what the provider can admit in it; p99: of the calls, from Do to the end of the body;")
	fmt.Fprintln(w, "redis errs: Applies that failed or timed out, each run on that replica's own state instead;")
	fmt.Fprintf(w, "failed: calls that ended without a 200, a 429 after all %d retries (WithMaxRetries(%d), as\n", maxRetries, maxRetries)
	fmt.Fprintln(w, "docs/fleet.md recommends for a paced fleet; with the default of 2, replicas each on their own")
	fmt.Fprintln(w, "fail some calls under contention) or an error of the call's 10 s context.")
	return nil
}

func ping(ctx context.Context, c redis.UniversalClient) error {
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}
