package retryredis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// R27 across a fleet on a real redis-server: a provider on 127.0.0.1 that
// states its limit, two requests a second (a slot every 510 ms, the 2%
// slack), so that what is asserted holds whatever the machine's load up to
// a stall of a second.

// priorityFleet is two replicas (a Cooldown each, on s when it is not
// nil) calling one provider, and the order the provider got their calls.
type priorityFleet struct {
	url   string
	reps  [2]*retryhttp.Transport
	mu    sync.Mutex
	order []string
}

func newPriorityFleet(t *testing.T, stores [2]*Store) *priorityFleet {
	t.Helper()
	p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{Requests: retryhttptest.Limit{Rate: 2, Size: 1}})
	f := &priorityFleet{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.order = append(f.order, r.Header.Get("X-Call"))
		f.mu.Unlock()
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	f.url = hs.URL
	for i := range f.reps {
		var opts []retryhttp.CooldownOption
		if stores[i] != nil {
			opts = append(opts, retryhttp.WithStore(stores[i]))
		}
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		f.reps[i] = retryhttp.New(base, retryhttp.WithCooldown(retryhttp.NewCooldown(nil, opts...)), retryhttp.WithMaxRetries(0))
	}
	return f
}

// call makes a call named name on replica i with priority p.
func (f *priorityFleet) call(t *testing.T, i int, name string, p retryhttp.Priority) {
	ctx, cancel := context.WithTimeout(retryhttp.WithPriority(context.Background(), p), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/v1/chat", nil)
	require.NoError(t, err)
	req.Header.Set("X-Call", name)
	resp, err := f.reps[i].RoundTrip(req)
	if assert.NoError(t, err, name) {
		resp.Body.Close()
		if name != "prime" { // a replica's first call may meet a 429: it learns the key then
			assert.Equal(t, http.StatusOK, resp.StatusCode, name)
		}
	}
}

// batchThenPerson primes the key on replicas b and i, starts a batch of 4
// Background calls on replica b, and, once they wait, a person's
// Interactive call on replica i: the order the provider got the batch and
// the person.
func (f *priorityFleet) batchThenPerson(t *testing.T, b, i int) []string {
	f.call(t, b, "prime", retryhttp.Normal) // its answer states the limit
	if i != b {
		f.call(t, i, "prime", retryhttp.Normal) // paced, once the fleet's push came; else its 429 arms the key
	}
	var wg sync.WaitGroup
	for _, name := range []string{"b1", "b2", "b3", "b4"} {
		wg.Go(func() { f.call(t, b, name, retryhttp.Background) })
		time.Sleep(10 * time.Millisecond) // in that order
	}
	time.Sleep(100 * time.Millisecond)
	f.call(t, i, "person", retryhttp.Interactive)
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(f.order), func(s string) bool { return s == "prime" })
}

// TestPriorityAcrossTheFleet: one replica's Interactive call goes before
// the batch another replica's calls wait in, on one Redis; the batch's
// first may have gone already (its slot was due), the other three wait
// for the person's. With Redis down, each process keeps its own order: the
// person's call on the batch's replica goes before the batch waiting.
func TestPriorityAcrossTheFleet(t *testing.T) {
	t.Run("on Redis", func(t *testing.T) {
		srv := sharedRedis(t)
		prefix := testPrefix(t)
		var stores [2]*Store
		for i := range stores {
			stores[i] = newStore(t, srv.client(t), WithPrefix(prefix))
		}
		order := newPriorityFleet(t, stores).batchThenPerson(t, 0, 1)
		require.Len(t, order, 5)
		assert.LessOrEqual(t, slices.Index(order, "person"), 1, "the person before the batch: %v", order)
	})
	t.Run("with Redis down", func(t *testing.T) {
		srv := ownRedis(t)
		var stores [2]*Store
		for i := range stores {
			stores[i] = newStore(t, srv.client(t), WithPrefix(testPrefix(t)), WithBreaker(1, time.Minute))
		}
		srv.kill()
		order := newPriorityFleet(t, stores).batchThenPerson(t, 0, 0)
		require.Len(t, order, 5)
		assert.LessOrEqual(t, slices.Index(order, "person"), 1, "the person before the batch: %v", order)
	})
}
