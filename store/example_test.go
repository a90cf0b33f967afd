package store_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// A backend with compare-and-swap, as etcd, DynamoDB's conditional
// writes, memcached's cas or a SQL row's version column give: a value and
// its version per key, and a write that succeeds only over the version
// read.
type casMap struct {
	mu sync.Mutex
	m  map[string]entry
}

type entry struct {
	val     []byte
	version int64
	expires time.Time
}

func (c *casMap) load(key string, now time.Time) ([]byte, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	if now.After(e.expires) {
		return nil, e.version // expired: nothing, but the version stands
	}
	return e.val, e.version
}

func (c *casMap) compareAndSwap(key string, version int64, val []byte, expires time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[key].version != version {
		return false
	}
	c.m[key] = entry{val: val, version: version + 1, expires: expires}
	return true
}

// casStore is a Store over the casMap: read, Apply, write back over the
// version read, again on a conflict. Its Listen hears only this process's
// Applies; a Store shared across processes publishes to the others (a
// pub/sub channel, a notification, a poll of keys changed lately).
type casStore struct {
	db        *casMap
	now       func() time.Time // the backend's clock, never the caller's
	mu        sync.Mutex
	listeners map[*func(string, store.State)]bool
}

func (s *casStore) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	for {
		if err := ctx.Err(); err != nil {
			return store.State{}, err
		}
		val, version := s.db.load(key, s.now())
		var rec store.Record
		_ = rec.UnmarshalBinary(val) // junk, or nothing: the zero Record
		now := s.now()
		res := store.Apply(&rec, now, ops)
		if len(ops) > 0 {
			b, _ := rec.MarshalBinary()
			if !s.db.compareAndSwap(key, version, b, rec.Expires(now)) {
				continue // another Apply wrote the key meanwhile: read it again
			}
		}
		st := store.State{Now: now, Record: rec, Result: res}
		if res.Publish {
			s.mu.Lock()
			for f := range s.listeners {
				(*f)(key, store.State{Now: st.Now, Record: st.Clone(), Result: st.Result})
			}
			s.mu.Unlock()
		}
		return st, nil
	}
}

func (s *casStore) Listen(f func(string, store.State)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listeners == nil {
		s.listeners = map[*func(string, store.State)]bool{}
	}
	s.listeners[&f] = true
	return func() { s.mu.Lock(); delete(s.listeners, &f); s.mu.Unlock() }
}

// Example shows a Store over a compare-and-swap map, as a third party
// writes one: a Record read, applied and written back. The requests lane
// is paced 100 ms a send; the second send waits for its slot.
func Example() {
	clk := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	s := &casStore{db: &casMap{m: map[string]entry{}}, now: func() time.Time { return clk }}
	ctx := context.Background()
	_, _ = s.Apply(ctx, "https://api.example.com", []store.Op{{Kind: store.OpRates, Lane: store.Requests,
		Per: float64(100 * time.Millisecond), Rates: "learned"}})
	for range 2 {
		st, _ := s.Apply(ctx, "https://api.example.com", []store.Op{{Kind: store.OpTake, Costs: []float64{1}, Within: time.Second}})
		fmt.Println("took:", st.Took, "wait:", st.Wait)
	}
	// Output:
	// took: true wait: 0s
	// took: true wait: 100ms
}
