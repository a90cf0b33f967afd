package retryredis

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process hears that another armed a key by push within one round trip
// of the arming, and by the index's poll within a second when the message
// is lost; never of its own Applies (R24).

type heardKey struct {
	key string
	st  store.State
	at  time.Time
}

// listener records what a Store's Listen hears.
type listener struct {
	mu    sync.Mutex
	heard []heardKey
	ch    chan heardKey
}

func listen(s *Store) (*listener, func()) {
	l := &listener{ch: make(chan heardKey, 64)}
	stop := s.Listen(func(key string, st store.State) {
		h := heardKey{key, st, time.Now()}
		l.mu.Lock()
		l.heard = append(l.heard, h)
		l.mu.Unlock()
		select {
		case l.ch <- h:
		default:
		}
	})
	return l, stop
}

func (l *listener) next(t *testing.T, within time.Duration) heardKey {
	t.Helper()
	select {
	case h := <-l.ch:
		return h
	case <-time.After(within):
		t.Fatalf("heard nothing within %v", within)
		return heardKey{}
	}
}

func (l *listener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.heard)
}

var holdOps = []store.Op{{Kind: store.OpHold, For: 2 * time.Second}, {Kind: store.OpLimited}}

func TestListenHearsAPushWithinARoundTrip(t *testing.T) {
	srv := sharedRedis(t)
	prefix := testPrefix(t)
	a := newStore(t, srv.client(t), WithPrefix(prefix), WithTimeout(time.Second))
	b := newStore(t, srv.client(t), WithPrefix(prefix), WithTimeout(time.Second))
	heardA, _ := listen(a)
	heardB, _ := listen(b)
	time.Sleep(100 * time.Millisecond) // subscribed, and the first poll done
	// A take is no news: nothing is pushed.
	_, err := a.Apply(context.Background(), "quiet", paced)
	require.NoError(t, err)
	for i := range 5 {
		start := time.Now()
		st, err := a.Apply(context.Background(), "k", holdOps)
		rtt := time.Since(start)
		require.NoError(t, err)
		h := heardB.next(t, time.Second)
		t.Logf("arming %d: the Apply took %v; heard %v after it began", i, rtt, h.at.Sub(start))
		assert.Less(t, h.at.Sub(start), 2*rtt+5*time.Millisecond, "within one round trip of the arming")
		assert.Equal(t, "k", h.key)
		assert.Equal(t, st.Seq, h.st.Seq, "the state the arming left")
		assert.Equal(t, st.Lane(0).Until, h.st.Lane(0).Until)
		assert.Equal(t, st.Now, h.st.Now, "on Redis's clock, with its now")
	}
	time.Sleep(pollEvery + 200*time.Millisecond) // and a poll passes
	assert.Zero(t, heardA.count(), "a Store does not hear its own Applies, pushed or polled")
	assert.Equal(t, 5, heardB.count(), "the poll does not deliver again what the push did")
}

func TestListenPollCatchesAMissedMessage(t *testing.T) {
	srv := sharedRedis(t)
	prefix := testPrefix(t)
	a := newStore(t, srv.client(t), WithPrefix(prefix), WithTimeout(time.Second))
	a.channel = "" // its messages are lost: only the index tells
	b := newStore(t, srv.client(t), WithPrefix(prefix), WithTimeout(time.Second))
	heardB, stop := listen(b)
	time.Sleep(100 * time.Millisecond)
	var worst time.Duration
	for range 3 {
		start := time.Now()
		st, err := a.Apply(context.Background(), "k", holdOps)
		require.NoError(t, err)
		h := heardB.next(t, 2*time.Second)
		worst = max(worst, h.at.Sub(start))
		assert.Equal(t, st.Seq, h.st.Seq)
	}
	t.Logf("heard by the poll at worst %v after the arming", worst)
	assert.Less(t, worst, time.Second, "within a second in any case")
	stop()
	_, err := a.Apply(context.Background(), "k", holdOps)
	require.NoError(t, err)
	time.Sleep(pollEvery + 200*time.Millisecond)
	assert.Equal(t, 3, heardB.count(), "stopped: heard no more")
}

func TestListenStartedLaterHearsTheKeysArmedLately(t *testing.T) {
	srv := sharedRedis(t)
	prefix := testPrefix(t)
	a := newStore(t, srv.client(t), WithPrefix(prefix))
	_, err := a.Apply(context.Background(), "k", holdOps)
	require.NoError(t, err)
	b := newStore(t, srv.client(t), WithPrefix(prefix))
	heardB, _ := listen(b)
	h := heardB.next(t, time.Second)
	assert.Equal(t, "k", h.key)
	assert.True(t, h.st.Lane(0).Until.After(h.st.Now))
}

func TestListenAfterClose(t *testing.T) {
	srv := sharedRedis(t)
	s := NewStore(srv.client(t), WithPrefix(testPrefix(t)))
	_, _ = listen(s)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	stop := s.Listen(func(string, store.State) { t.Error("called after Close") })
	stop()
	s.Listen(nil)()
	_, err := s.Apply(context.Background(), "k", paced)
	assert.NoError(t, err, "a Store closed still applies")
}

// A replica's Cooldown hears of another's 429 by the push: its key is
// held at once, though this replica never called the provider.
func TestCooldownHearsAnotherReplica(t *testing.T) {
	srv := sharedRedis(t)
	prefix := testPrefix(t)
	a := retryhttp.NewCooldown(nil, retryhttp.WithStore(newStore(t, srv.client(t), WithPrefix(prefix))))
	b := retryhttp.NewCooldown(nil, retryhttp.WithStore(newStore(t, srv.client(t), WithPrefix(prefix))))
	time.Sleep(100 * time.Millisecond) // subscribed
	base := retryhttptest.NewScript(retryhttptest.Status(429, "Retry-After", "20"))
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/chat", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	resp, err := retryhttp.New(base, retryhttp.WithCooldown(a), retryhttp.WithMaxRetries(0)).RoundTrip(req.WithContext(ctx))
	require.NoError(t, err)
	_ = resp.Body.Close()
	for i := 0; b.Until("https://api.example.com").IsZero(); i++ { // at most 10 s of tries, whatever the load
		require.Less(t, i, 10000, "replica b never heard")
		time.Sleep(time.Millisecond)
	}
	t.Logf("replica b held %v after replica a's 429 began", time.Since(start))
	assert.InDelta(t, float64(20*time.Second), float64(time.Until(b.Until("https://api.example.com"))), float64(time.Second))
}

// TestListenPollCountsForTheBreaker: with Redis stalled and only
// a Listen running (no Apply at all), the poll's timeouts are Redis
// failing: the breaker opens and says so once (the poll's own timeout was
// read as a caller's context ending, and the breaker never heard of it).
func TestListenPollCountsForTheBreaker(t *testing.T) {
	srv := ownRedis(t)
	log, logs := logsOf(t)
	s := newStore(t, srv.client(t), WithLogger(log))
	stop := s.Listen(func(string, store.State) {})
	defer stop()
	time.Sleep(50 * time.Millisecond) // The first poll, on a Redis that answers
	require.False(t, s.br.isOpen())

	srv.stop()
	defer srv.resume() // before the Store's Close, which the test's cleanup runs
	deadline := time.Now().Add(5 * time.Second)
	for count(logs, msgFailing) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.True(t, s.br.isOpen(), "the polls' timeouts opened the breaker")
	assert.Equal(t, 1, count(logs, msgFailing), "and it said so")
	time.Sleep(2 * pollEvery) // probes that fail again
	assert.Equal(t, 1, count(logs, msgFailing), "once")
}
