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
)

// Issue 29, item 3: one Store timeout plus clock skew moved the fleet's
// schedule by the skew. The failed take's slot was given by the process's
// own state, on its own clock, and the correction by the count of its
// answer sent that mark to the Store, whose clock is another. A ticket of
// a local take carries no mark (ticketOf). And the other way round: the
// marks of the Store's tickets, in the news a failed take carried, moved
// the process's own schedule by the skew (an hour's wait: the failed call
// refused), and are dropped there (unmarked).

// failOnceStore is a Store that fails the next Apply once told to.
type failOnceStore struct {
	store.Store
	failNext atomic.Bool
}

func (s *failOnceStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	if s.failNext.CompareAndSwap(true, false) {
		return store.State{}, errors.New("store: timeout")
	}
	return s.Store.Apply(ctx, key, ops)
}

// TestHardeningLocalTakeHasNoMark: a Store whose clock is an hour off the
// Cooldown's, the token lane paced by OpenAI's counts; one take fails, its
// send goes on the process's own state (and is not refused), and its
// answer's count, and the counts after it, correct the schedule: the
// Store's Next, and what corrections moved it (Moved), change by no more
// than the counts say (a second), never by the skew.
func TestHardeningLocalTakeHasNoMark(t *testing.T) {
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		t.Run("the Store's clock "+skew.String()+" off", func(t *testing.T) {
			clk := newClock()
			fs := &failOnceStore{Store: store.NewLocal(offsetClock{clk, skew}.Now)}
			cd := NewCooldown(nil, WithStore(fs))
			counts := retryhttptest.Status(200, openAITokens("1000", "500", "500ms")...)
			script := retryhttptest.NewScript(retryhttptest.Status(429, append(openAITokens("1000", "0", "1s"), "Retry-After-Ms", "1")...), counts).WithClock(clk)
			tr := New(script, WithClock(clk), WithCooldown(cd), WithMaxRetries(0))
			call := func() {
				t.Helper()
				ctx, cancel := clk.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				resp, err := tr.RoundTrip(postOf(ctx, 400)) // 100 tokens
				require.NoError(t, err)
				resp.Body.Close()
			}
			next := func() (time.Duration, time.Duration) { // the Store's Next of the token lane, from its now, and its Moved
				st, err := fs.Store.Apply(context.Background(), origin, nil)
				require.NoError(t, err)
				return st.Lane(laneTokens).Next.Sub(st.Now), st.Lane(laneTokens).Moved
			}
			for range 4 { // armed, and paced by the counts
				call()
			}
			s := laneOfEntry(cd, laneTokens)
			require.Positive(t, s.Burst, "the counts state the bucket: corrections have marks")

			fs.failNext.Store(true)
			call() // its take fails: a slot of the process's own state
			before, movedBefore := next()
			for range 3 { // the first take carries its answer's correction
				call()
				after, moved := next()
				assert.Less(t, (after - before).Abs(), time.Minute, "the fleet's schedule moved %v (the skew is %v)", after-before, skew)
				assert.Less(t, (moved - movedBefore).Abs(), time.Minute, "the corrections moved it %v (the skew is %v)", moved-movedBefore, skew)
				before, movedBefore = after, moved
			}
		})
	}
}
