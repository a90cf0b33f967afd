package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/bench"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain makes the test binary a replica when run did start it as one.
func TestMain(m *testing.M) {
	if os.Getenv(replicaEnv) == "1" {
		if err := replicaMain(os.Args[1:]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestClassify(t *testing.T) {
	assert.Equal(t, lineKey{"warn", "llm transient failure — giving up"},
		classify(`{"level":"warn","ts":"2026-12-03T14:44:46.590Z","msg":"llm transient failure — giving up","count":3}`))
	assert.Equal(t, lineKey{unstructured, "redis: connection pool: failed to dial after # attempts: dial tcp #.#.#.#:#: connect: connection refused"},
		classify("redis: 2026/12/03 14:44:46 pool.go:770: redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:38211: connect: connection refused"))
	assert.Equal(t, lineKey{unstructured, "panic: oops"}, classify("panic: oops"))
	assert.Equal(t, unstructured, classify(`{"not":"a log entry"}`).level)
	assert.Len(t, classify(strings.Repeat("x", 500)).msg, 110+len("…"))
}

func TestTally(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	tl := newTally(start, 3)
	warn := `{"level":"warn","msg":"w"}`
	for i := range 5 {
		tl.add(start.Add(time.Duration(i)*time.Millisecond), warn) // second 0: 5
	}
	tl.add(start.Add(2500*time.Millisecond), warn)          // second 2: 1
	tl.add(start.Add(1200*time.Millisecond), "redis: text") // unstructured, second 1
	tl.add(start.Add(-time.Millisecond), warn)              // before the scene
	tl.add(start.Add(3*time.Second), warn)                  // after it
	by := tl.byLevel()
	assert.Equal(t, rate{lines: 6, max: 5, mean: 2}, by["warn"])
	assert.Equal(t, 1, by[unstructured].lines)
	assert.Equal(t, 2, tl.outside)
	top := tl.top(5)
	require.Len(t, top, 2)
	assert.Equal(t, "w", top[0].msg)
	assert.Equal(t, "redis: text", top[1].msg)
}

// TestSoak runs the scenes short, with 2 replicas: go-redis's default
// logger writes unstructured lines while Redis is down, the adapter none
// (and a Warn entry instead), and the hot loop's give-ups are sampled.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: about 15 s")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (apt-get install -y redis-server; .ci/run installs it)")
	}
	cfg := defaultConfig
	cfg.k, cfg.duration, cfg.downFrom, cfg.downUntil = 2, 3*time.Second, time.Second, 2*time.Second
	var results []result
	for _, c := range []struct {
		sc      scene
		adapter bool
	}{{scenes[1], false}, {scenes[1], true}, {scenes[2], true}} {
		r, err := run(cfg, c.sc, c.adapter)
		require.NoError(t, err)
		results = append(results, r)
	}
	before, after, hot := results[0], results[1], results[2]
	assert.Positive(t, before.ok, "paced calls succeed")
	assert.Positive(t, before.tally.byLevel()[unstructured].lines, "go-redis's default logger: its dial failures on stderr")
	assert.Zero(t, after.tally.byLevel()[unstructured].lines, "the adapter: nothing unstructured")
	var dials int
	for _, m := range after.tally.top(100) {
		if strings.HasPrefix(m.msg, "redis: connection pool: failed to dial") {
			assert.Equal(t, "warn", m.level)
			assert.LessOrEqual(t, m.max, cfg.k, "at most one a second a replica")
			dials += m.lines
		}
	}
	assert.Positive(t, dials, "go-redis's dial failures, through the adapter")

	assert.Zero(t, hot.ok)
	assert.Greater(t, hot.failed, int64(100), "the hot loop fails fast")
	assert.LessOrEqual(t, hot.tally.byLevel()["warn"].max, 2*cfg.k, "the give-ups sampled: a replica's first, then one a second")

	var out bytes.Buffer
	write(&out, cfg, "go test", bench.NewMachine(), results)
	assert.Contains(t, out.String(), "| b: Redis killed, then restarted | retryredis.RedisLogger | ")
	assert.Contains(t, out.String(), "| c | retryredis.RedisLogger | warn | llm transient failure — giving up | ")
}
