package retryredis

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// slogLines is a slog Logger writing JSON, and what it wrote so far.
type slogLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *slogLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *slogLines) entries(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(s.buf.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func newSlogLines() (*slogLines, *slog.Logger) {
	s := &slogLines{}
	return s, slog.New(slog.NewJSONHandler(s, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fakeNow is a clock a test moves.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time      { return f.t }
func (f *fakeNow) add(d time.Duration) { f.t = f.t.Add(d) }
func withClock(r *RedisLog) (*fakeNow, *RedisLog) {
	f := &fakeNow{t: time.Unix(1_800_000_000, 0)}
	r.now = f.now
	return f, r
}

const dialFormat = "redis: connection pool: failed to dial after %d attempts: %v"

func TestRedisLogSamplesByFormat(t *testing.T) {
	lines, l := newSlogLines()
	clk, r := withClock(RedisSlog(l))
	ctx := context.Background()
	for range 50 { // one second's flood: one entry
		r.Printf(ctx, dialFormat, 5, "dial tcp 127.0.0.1:1: connect: connection refused")
		clk.add(10 * time.Millisecond)
	}
	r.Printf(ctx, "redis: failed to close connection: %v", "EOF") // another format: its own entry
	clk.add(600 * time.Millisecond)
	r.Printf(ctx, dialFormat, 5, "refused") // a second after the first: written, standing for 50
	r.Printf(ctx, dialFormat, 5, "refused") // held again

	got := lines.entries(t)
	require.Len(t, got, 3)
	assert.Equal(t, "WARN", got[0]["level"])
	assert.Equal(t, "redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:1: connect: connection refused", got[0]["msg"])
	assert.Equal(t, "go-redis", got[0]["logger"])
	assert.Equal(t, dialFormat, got[0]["format"])
	assert.NotContains(t, got[0], "count", "the first of a second stands for itself")
	assert.Equal(t, "redis: failed to close connection: EOF", got[1]["msg"])
	assert.NotContains(t, got[1], "count")
	assert.Equal(t, "redis: connection pool: failed to dial after 5 attempts: refused", got[2]["msg"])
	assert.EqualValues(t, 50, got[2]["count"], "itself and the 49 left out")
}

func TestRedisLogVerbOnlyFormats(t *testing.T) {
	lines, l := newSlogLines()
	_, r := withClock(RedisSlog(l))
	ctx := context.Background()
	// go-redis's maintenance notifications: every line is "%s".
	r.Printf(ctx, "%s", "conn[12] unrelaxed timeout after deadline")
	r.Printf(ctx, "%s", "conn[345] unrelaxed timeout after deadline") // the same kind, another id: held
	r.Printf(ctx, "%s", "circuit breaker opened for endpoint a:1 after 3 failures")
	r.Printf(ctx, "%+v", "handoff failed")
	got := lines.entries(t)
	require.Len(t, got, 3)
	assert.Equal(t, "conn[12] unrelaxed timeout after deadline", got[0]["msg"])
	assert.Equal(t, "circuit breaker opened for endpoint a:1 after 3 failures", got[1]["msg"])
	assert.Equal(t, "handoff failed", got[2]["msg"])

	assert.True(t, hasWords("redis: %d attempts"))
	assert.True(t, hasWords("%5.2f%% done"))
	assert.False(t, hasWords("%s"))
	assert.False(t, hasWords("%-10s %[1]q: %%"))
	assert.Equal(t, redisKind("%s", "conn[1] x 22"), redisKind("%s", "conn[987] x 3"))
	assert.NotEqual(t, redisKind("%s", "conn[1] x"), redisKind("%s", "conn[1] y"))
	assert.LessOrEqual(t, len(redisKind("%s", strings.Repeat("a", 500))), len("text:")+80)
}

func TestRedisLogZap(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	clk, r := withClock(RedisLogger(zap.New(core, zap.AddCaller()).Named("svc")))
	for range 3 {
		r.Printf(context.Background(), dialFormat, 5, "refused")
	}
	clk.add(time.Second)
	r.Printf(context.Background(), dialFormat, 5, "refused")
	all := logs.All()
	require.Len(t, all, 2)
	for _, e := range all {
		assert.Equal(t, zapcore.WarnLevel, e.Level)
		assert.Equal(t, "svc.go-redis", e.LoggerName)
		assert.False(t, e.Caller.Defined, "no caller: it would be this package")
		assert.Equal(t, dialFormat, e.ContextMap()["format"])
	}
	assert.NotContains(t, all[0].ContextMap(), "count")
	assert.EqualValues(t, 3, all[1].ContextMap()["count"])
}

func TestRedisLogNil(t *testing.T) {
	var nilLog *RedisLog
	for _, r := range []*RedisLog{RedisLogger(nil), RedisSlog(nil), RedisSlog(&slog.Logger{}), nilLog} {
		r.Printf(context.Background(), dialFormat, 5, "refused") // writes nothing, no panic
	}
	lines, l := newSlogLines()
	RedisSlog(l).Printf(nil, "redis: %s", "a nil context") //nolint:staticcheck // go-redis never passes nil; a RedisLog takes it
	assert.Len(t, lines.entries(t), 1)
}

// TestRedisLogFromGoRedis: given to redis.SetLogger, a RedisLog gets
// go-redis's own line of a failed dial. The logger is the process's, so
// other tests' lines may come too: only the dial's is looked for.
func TestRedisLogFromGoRedis(t *testing.T) {
	lines, l := newSlogLines()
	redis.SetLogger(RedisSlog(l))
	defer logging.Enable() // go-redis's default logger back

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 2, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	start := time.Now()
	for range 3 {
		require.Error(t, rdb.Ping(context.Background()).Err())
	}
	took := time.Since(start)
	var dials []map[string]any
	for _, e := range lines.entries(t) {
		if e["format"] == dialFormat {
			dials = append(dials, e)
		}
	}
	require.NotEmpty(t, dials)
	if took < redisSampleEvery {
		require.Len(t, dials, 1, "three failed dials within a second: one entry")
	}
	assert.Equal(t, "WARN", dials[0]["level"])
	assert.Contains(t, dials[0]["msg"], "redis: connection pool: failed to dial after 2 attempts: ")
	assert.Contains(t, dials[0]["msg"], addr)
}

// TestRedisLogPastItsBound: with more kinds of line than a RedisLog
// remembers (redisMaxKinds+20, each three times a second for five
// seconds, in turn or three in a row), it writes about one entry a second
// for each, and every line is counted once: the counts written, and those
// the last entries write, add up to the lines taken. (It forgot
// everything at redisMaxKinds: lines in turn were all written, and the
// counts of lines in a row were lost.)
func TestRedisLogPastItsBound(t *testing.T) {
	const kinds, perSecond, seconds = redisMaxKinds + 20, 3, 5
	orders := map[string]func(i int) int{
		"in turn":  func(i int) int { return i % kinds },
		"in a row": func(i int) int { return i / perSecond % kinds },
	}
	for name, order := range orders {
		clk, r := withClock(RedisLogger(zap.NewNop()))
		step := time.Second / (kinds * perSecond)
		taken, written, counted := 0, 0, 0
		take := func(kind string) bool {
			taken++
			n, ok := r.take(kind)
			if ok {
				written++
				counted += n
			}
			return ok
		}
		for i := range kinds * perSecond * seconds {
			take("kind " + itoa(order(i)))
			clk.add(step)
		}
		assert.LessOrEqual(t, written, (kinds+1)*(seconds+1), "%s: about an entry a second for each", name)
		clk.add(redisSampleEvery) // each once more: what each held comes out
		for k := range kinds {
			take("kind " + itoa(k))
		}
		clk.add(redisSampleEvery) // and a kind never seen: what the last entries left
		assert.True(t, take("a new kind"))
		assert.Equal(t, taken, counted, "%s: every line counted once", name)
	}
}
