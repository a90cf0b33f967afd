// Command hotloop is the new user's hot loop (issue 36): K replicas, each a
// goroutine calling in a tight loop, each call with a Budget of
// retryhttp.PublicTierMaxWait (so every call fails fast), against one
// model on 127.0.0.1 that answers every request 429 with Retry-After: 60.
// The Cooldown should hold every call after the first answer: what it
// measures is the requests that reach the held model, with no Store and
// on a redis-server (at retryredis's default bound of 30 ms, at 500 ms,
// and with Redis down the whole run), on a machine it loads itself
// (-load busy processes, as the new user's 2-core machine was). Each
// replica has a Transport, a Cooldown and (on Redis) a Store and a client
// of its own. It prints a markdown table. From bench/:
//
//	go run ./cmd/hotloop                     # K=6, 10 s a row, 2 busy processes
//	go run ./cmd/hotloop -load 0 -runs 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/bench"
	"github.com/retryhttp/retryhttp/retryredis"
	"github.com/retryhttp/retryhttp/store"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

const burnEnv = "HOTLOOP_BURN"

func main() {
	if os.Getenv(burnEnv) == "1" {
		burn()
	}
	k := flag.Int("k", 6, "replicas, each a goroutine in a tight loop")
	duration := flag.Duration("duration", 10*time.Second, "how long each row runs")
	load := flag.Int("load", 2, "busy processes loading the machine while the rows run")
	runs := flag.Int("runs", 1, "runs of each row")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("hotloop: ")
	redis.SetLogger(retryredis.RedisLogger(nil)) // go-redis's own lines: the Redis-down row dials and fails a million times
	m := bench.NewMachine()
	stop := startLoad(*load)
	defer stop()
	addr, stopRedis, err := bench.StartRedis()
	if err != nil {
		log.Fatal(err)
	}
	defer stopRedis()
	fmt.Printf("`go run ./cmd/hotloop -k %d -duration %v -load %d -runs %d` (from bench/); commit %s; %s, %d CPUs; load average %s at the start\n\n",
		*k, *duration, *load, *runs, m.Commit, m.CPU, runtime.NumCPU(), m.LoadStart)
	fmt.Println("| store | run | calls | requests to the held model | a second | Store Applies | \"Store failing\" lines | \"working again\" lines |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rows(addr) {
		for run := 1; run <= *runs; run++ {
			res := r.run(*k, *duration)
			m.Sample()
			fmt.Printf("| %s | %d | %d | %d | %.1f | %d | %d | %d |\n", r.name, run, res.calls, res.requests,
				float64(res.requests)/duration.Seconds(), res.applies, res.failing, res.back)
			flushRedis(addr)
		}
	}
	lo, hi := m.LoadRange()
	fmt.Printf("\nThe 1-minute load average went from %s to %s over the rows; %s at the end.\n", lo, hi, bench.LoadAvg())
}

// row is one way to run the replicas' Cooldowns.
type row struct {
	name  string
	store func() (store.Store, func()) // nil: no Store
}

func rows(addr string) []row {
	onRedis := func(addr string, bound time.Duration) func() (store.Store, func()) {
		return func() (store.Store, func()) {
			rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: time.Second})
			var opts []retryredis.Option
			if bound > 0 {
				opts = append(opts, retryredis.WithTimeout(bound))
			}
			s := retryredis.NewStore(rdb, opts...)
			return s, func() { _ = s.Close(); _ = rdb.Close() }
		}
	}
	return []row{
		{"none", nil},
		{"Redis, 30 ms bound (the default)", onRedis(addr, 0)},
		{"Redis, 500 ms bound", onRedis(addr, 500*time.Millisecond)},
		{"Redis down the whole run", onRedis(closedPort(), 0)},
	}
}

type result struct {
	calls, requests, applies int64
	failing, back            int
}

// counted counts a replica's Applies; a pointer of its own, so that each
// replica is a process of its own to the circuit.
type counted struct {
	store.Store
	n *atomic.Int64
}

func (c *counted) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	c.n.Add(1)
	return c.Store.Apply(ctx, key, ops)
}

func (r row) run(k int, d time.Duration) result {
	var requests, calls, applies atomic.Int64
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Header().Set("Retry-After", "60")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"type":"requests","message":"Rate limit reached"}}`))
	}))
	defer model.Close()
	core, logs := observer.New(zapcore.InfoLevel)
	var wg sync.WaitGroup
	var closers []func()
	end := time.Now().Add(d)
	for range k {
		var opts []retryhttp.CooldownOption
		if r.store != nil {
			s, closeIt := r.store()
			closers = append(closers, closeIt)
			opts = append(opts, retryhttp.WithStore(&counted{s, &applies}))
		}
		cd := retryhttp.NewCooldown(nil, opts...)
		closers = append(closers, func() { _ = cd.Close() })
		hc := &http.Client{Transport: retryhttp.New(&http.Transport{}, retryhttp.WithCooldown(cd), retryhttp.WithLogger(zap.New(core)))}
		wg.Go(func() {
			for time.Now().Before(end) {
				calls.Add(1)
				ctx := retryhttp.WithBudget(context.Background(), retryhttp.NewBudget(retryhttp.PublicTierMaxWait))
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, model.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o"}`))
				if resp, err := hc.Do(req); err == nil {
					_ = resp.Body.Close()
				} else if !errors.Is(err, retryhttp.ErrRateLimited) {
					log.Printf("%s: %v", r.name, err)
				}
			}
		})
	}
	wg.Wait()
	for _, c := range closers {
		c()
	}
	return result{calls: calls.Load(), requests: requests.Load(), applies: applies.Load(),
		failing: logs.FilterMessageSnippet("Store failing").Len(), back: logs.FilterMessageSnippet("Store working again").Len()}
}

// closedPort is an address of 127.0.0.1 where nothing listens.
func closedPort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func flushRedis(addr string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	_ = rdb.FlushAll(context.Background()).Err()
}

// startLoad starts n busy processes (this command again, spinning), and
// returns what stops them.
func startLoad(n int) func() {
	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), burnEnv+"=1")
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	return func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}

// burn spins one core until it is killed.
func burn() {
	runtime.GOMAXPROCS(1)
	x := 0
	for {
		x++
	}
}
