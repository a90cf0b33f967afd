package retryhttp

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

// Issue 29, item 7(e): a Store's errors were dropped with no log, so that a
// third-party Store that always failed was invisible. The Cooldown writes
// one Warn entry when its Store starts failing, and one Info when it works
// again, on its logger: never one per failed Apply.

// flakyStore is a store.Local that fails every Apply while down, and
// counts them.
type flakyStore struct {
	*store.Local
	down     atomic.Bool
	failures atomic.Int64
}

var errFlaky = errors.New("flaky: connection refused")

func (s *flakyStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	if s.down.Load() {
		s.failures.Add(1)
		return store.State{}, errFlaky
	}
	return s.Local.Apply(ctx, key, ops)
}

// TestHardeningStoreFailingIsLogged: a Store down for 6 calls (many
// Applies) writes one Warn, with the error's text; back, one Info; down
// again, one Warn more. A reply that cannot be true is the Store failing
// too, and says so.
func TestHardeningStoreFailingIsLogged(t *testing.T) {
	clk := newClock()
	fs := &flakyStore{Local: store.NewLocal(clk.Now)}
	log, logs := logSink()
	cd := NewCooldown(nil, WithStore(fs))
	script := retryhttptest.NewScript(reply(429, "Retry-After", "2"), okReply).WithClock(clk)
	tr := New(script, WithClock(clk), WithCooldown(cd), WithLogger(log))
	calls := func(n int) {
		t.Helper()
		for range n {
			resp, err := tr.RoundTrip(getReq(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
		}
	}
	failing := func() []string {
		var out []string
		for _, e := range logs.All() {
			if e.Message == msgStoreFailing || e.Message == msgStoreBack {
				out = append(out, e.Level.String()+" "+e.Message)
			}
		}
		return out
	}
	warn, info := zapcore.WarnLevel.String()+" "+msgStoreFailing, zapcore.InfoLevel.String()+" "+msgStoreBack

	calls(1) // armed, on a Store that works
	assert.Empty(t, failing(), "a Store that works: nothing")
	fs.down.Store(true)
	calls(6)
	require.GreaterOrEqual(t, fs.failures.Load(), int64(6), "an Apply a call at least")
	assert.Equal(t, []string{warn}, failing(), "one Warn for them all")
	entry := logs.FilterMessage(msgStoreFailing).All()[0]
	assert.Equal(t, errFlaky.Error(), entry.ContextMap()["error"], "with the error's text")
	fs.down.Store(false)
	calls(1)
	assert.Equal(t, []string{warn}, failing(), "not back until it has worked storeSettle")
	clk.Add(storeSettle)
	calls(3)
	assert.Equal(t, []string{warn, info}, failing(), "back: one Info")
	fs.down.Store(true)
	calls(2)
	fs.down.Store(false)
	clk.Add(storeSettle)
	calls(1)
	assert.Equal(t, []string{warn, info, warn, info}, failing(), "each change once")

	t.Run("a reply out of range", func(t *testing.T) {
		log, logs := logSink()
		bad := &editStore{Store: store.NewLocal(clk.Now), edit: func(st *store.State) { st.Wait = -st.Wait - 1 }} // a negative wait: cannot be true
		cd := NewCooldown(nil, WithStore(bad))
		tr := New(retryhttptest.NewScript(reply(429, "Retry-After", "2"), okReply).WithClock(clk), WithClock(clk), WithCooldown(cd), WithLogger(log))
		for range 3 {
			resp, err := tr.RoundTrip(getReq(context.Background()))
			require.NoError(t, err)
			resp.Body.Close()
		}
		got := logs.FilterMessage(msgStoreFailing).All()
		require.Len(t, got, 1)
		assert.Equal(t, errBadReply.Error(), got[0].ContextMap()["error"])
	})
}

// TestStoreFalteringIsLoggedOnce: a Store that fails every other Apply
// (a loaded Redis missing its bound) is failing, said once, not twice an
// Apply; once it has worked for storeSettle, it is back, said once.
func TestStoreFalteringIsLoggedOnce(t *testing.T) {
	clk := newClock()
	fs := &flakyStore{Local: store.NewLocal(clk.Now)}
	log, logs := logSink()
	cd := NewCooldown(nil, WithStore(fs))
	tr := New(retryhttptest.NewScript(reply(429, "Retry-After", "1"), okReply).WithClock(clk), WithClock(clk), WithCooldown(cd), WithLogger(log))
	for i := range 200 {
		fs.down.Store(i%2 == 1)
		clk.Add(50 * time.Millisecond)
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, 1, logs.FilterMessage(msgStoreFailing).Len(), "failing, once")
	assert.Zero(t, logs.FilterMessage(msgStoreBack).Len(), "never working for a second")
	fs.down.Store(false)
	for range 30 {
		clk.Add(50 * time.Millisecond)
		resp, err := tr.RoundTrip(getReq(context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, 1, logs.FilterMessage(msgStoreBack).Len(), "back, once")
}
