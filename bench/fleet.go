package bench

// A fleet sharing one provider limit (issue 23): K replicas, each with its
// own Transport, Cooldown and Redis client, whose Cooldowns keep their
// state in one Redis (retryredis), against one provider.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryredis"
)

// A Fleet makes the replicas' Stores on one Redis and closes them.
type Fleet struct {
	Addr   string
	Prefix string // of every Redis key (retryredis.WithPrefix); "" is retryredis's default

	mu      sync.Mutex
	closers []func()
}

// Lib is the row "retryhttp+cooldown+retries10+redis": a replica whose
// Cooldown keeps its state on f's Redis, with a Redis client of its own.
func (f *Fleet) Lib() Lib {
	return Lib{Name: "retryhttp+cooldown+retries10+redis", Retries: true, Wrap: func(base http.RoundTripper, b Backoff) http.RoundTripper {
		cd := f.Cooldown()
		return retryhttp.New(base, append(retryhttpOptions(b), retryhttp.WithCooldown(cd), retryhttp.WithMaxRetries(10))...)
	}}
}

// Cooldown is one replica's Cooldown, with opts, keeping its state on f's
// Redis under f's Prefix through a Store and a Redis client of its own;
// Reset closes all three.
func (f *Fleet) Cooldown(opts ...retryhttp.CooldownOption) *retryhttp.Cooldown {
	rdb := redis.NewClient(&redis.Options{Addr: f.Addr})
	var so []retryredis.Option
	if f.Prefix != "" {
		so = append(so, retryredis.WithPrefix(f.Prefix))
	}
	store := retryredis.NewStore(rdb, so...)
	cd := retryhttp.NewCooldown(nil, append([]retryhttp.CooldownOption{retryhttp.WithStore(store)}, opts...)...)
	f.mu.Lock()
	f.closers = append(f.closers, func() { _ = cd.Close(); _ = store.Close(); _ = rdb.Close() })
	f.mu.Unlock()
	return cd
}

// Reset closes the Cooldowns and Stores made so far and empties the Redis,
// so that the next row starts clean.
func (f *Fleet) Reset() error {
	f.mu.Lock()
	closers := f.closers
	f.closers = nil
	f.mu.Unlock()
	for _, c := range closers {
		c()
	}
	rdb := redis.NewClient(&redis.Options{Addr: f.Addr})
	defer rdb.Close()
	return rdb.FlushAll(context.Background()).Err()
}

// StartRedis starts a redis-server on a free 127.0.0.1 port, with no
// persistence, and returns its address and what stops it.
func StartRedis() (addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return StartRedisAt(port)
}

// StartRedisAt starts a redis-server on 127.0.0.1:port, as StartRedis
// does: to start one again where one was stopped (a Redis restarted).
func StartRedisAt(port int) (addr string, stop func(), err error) {
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("redis-server: %w", err)
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if rdb.Ping(context.Background()).Err() == nil {
			return addr, stop, nil
		}
	}
	stop()
	return "", nil, errors.New("redis-server did not answer PING within 5 s")
}
