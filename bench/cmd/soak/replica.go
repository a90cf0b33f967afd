package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryredis"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// replicaEnv set to 1 makes the program (or the test binary) one replica:
// a process of its own, as a replica of a backend is, so that go-redis's
// logger, which is the process's, is each replica's.
const replicaEnv = "RETRYHTTP_SOAK_REPLICA"

// statsPrefix starts the line a replica ends with, on stderr: its calls
// that succeeded and failed. It is no log line.
const statsPrefix = "soak-stats "

// A replicaConfig is what a replica is told on its command line.
type replicaConfig struct {
	provider, redis string
	start           time.Time
	duration        time.Duration
	hotLoop         bool // scene c: one goroutine calling in a tight loop, each call with a Budget
	workers         int  // else: this many goroutines, each calling in a closed loop
	adapter         bool // go-redis's lines through retryredis.RedisLogger
}

func parseReplica(args []string) (replicaConfig, error) {
	var c replicaConfig
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	fs.StringVar(&c.provider, "provider", "", "the provider's URL")
	fs.StringVar(&c.redis, "redis", "", "the Redis's address")
	start := fs.Int64("start", 0, "when the scene starts, Unix ns")
	fs.DurationVar(&c.duration, "duration", 0, "how long calls are made")
	fs.BoolVar(&c.hotLoop, "hot-loop", false, "one goroutine in a tight loop, each call with a Budget")
	fs.IntVar(&c.workers, "workers", 4, "goroutines calling in a closed loop")
	fs.BoolVar(&c.adapter, "adapter", false, "go-redis's lines through retryredis.RedisLogger")
	err := fs.Parse(args)
	c.start = time.Unix(0, *start)
	return c, err
}

// replicaMain is one replica: a Transport with a Cooldown on a Store of
// its own, every logger at Debug writing JSON to stdout (go-redis's
// default logger writes to stderr), calling the provider from the start
// for the duration. It ends with its stats line.
func replicaMain(args []string) error {
	c, err := parseReplica(args)
	if err != nil {
		return err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(os.Stdout), zap.DebugLevel))
	defer func() { _ = log.Sync() }()
	if c.adapter {
		redis.SetLogger(retryredis.RedisLogger(log))
	}
	rdb := redis.NewClient(&redis.Options{Addr: c.redis, ContextTimeoutEnabled: true})
	store := retryredis.NewStore(rdb, retryredis.WithLogger(log))
	cd := retryhttp.NewCooldown(nil, retryhttp.WithStore(store))
	base := &http.Transport{MaxIdleConnsPerHost: 64}
	client := &http.Client{Transport: retryhttp.New(base, retryhttp.WithCooldown(cd), retryhttp.WithLogger(log))}

	time.Sleep(time.Until(c.start))
	// The scene's end cancels the calls out; it is no deadline, which a
	// call's wait would be measured against (each call has its own).
	ctx, cancel := context.WithCancel(context.Background())
	defer time.AfterFunc(c.duration, cancel).Stop()
	var ok, failed atomic.Int64
	n := c.workers
	if c.hotLoop {
		n = 1
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				callCtx, done := context.WithTimeout(ctx, callTimeout)
				if c.hotLoop {
					callCtx = retryhttp.WithBudget(callCtx, retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
				}
				err := call(callCtx, client, c.provider)
				done()
				if err == nil {
					ok.Add(1)
				} else if ctx.Err() == nil { // a call the scene's end cut is no failure
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	_ = cd.Close()
	_ = store.Close()
	_ = rdb.Close()
	base.CloseIdleConnections()
	fmt.Fprintf(os.Stderr, "%s%d %d\n", statsPrefix, ok.Load(), failed.Load())
	return nil
}

// callTimeout bounds each call, as a caller's own deadline does.
const callTimeout = 30 * time.Second

var chatBody = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":16}`)

// call makes one chat completion; an error unless it is answered 200.
func call(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(chatBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
