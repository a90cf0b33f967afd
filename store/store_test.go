package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"
	"github.com/retryhttp/retryhttp/store/storetest"
)

// TestLocal runs the kit against the in-process Store: every Open is the
// same Local, as the Cooldowns of one process share one.
func TestLocal(t *testing.T) {
	s := store.NewLocal(nil)
	storetest.Run(t, storetest.Harness{
		Open: func(*testing.T) store.Store { return s },
		Plant: func(t *testing.T, key string, b []byte) {
			t.Helper()
			if err := s.Plant(key, b); err != nil {
				t.Fatal(err)
			}
		},
		Sequences: 2000,
	})
}

// TestExampleStore runs the kit against the Example's Store over a
// compare-and-swap map: a third party's Store, about 50 lines.
func TestExampleStore(t *testing.T) {
	db := &casMap{m: map[string]entry{}}
	s := &casStore{db: db, now: time.Now}
	storetest.Run(t, storetest.Harness{
		Open: func(*testing.T) store.Store { return s },
		Plant: func(t *testing.T, key string, b []byte) {
			db.mu.Lock()
			defer db.mu.Unlock()
			e := db.m[key]
			db.m[key] = entry{val: b, version: e.version + 1, expires: time.Now().Add(time.Hour)}
		},
	})
}

// TestLocalAtEveryInstant: a Local on a clock at the Unix epoch (where
// clock.NewMock starts), before it, or centuries ahead keeps and paces as
// on today's: its own clock is the one given, moved by whole seconds into
// the range a Record holds.
func TestLocalAtEveryInstant(t *testing.T) {
	for _, start := range []time.Time{time.Unix(0, 0), time.Date(1901, 3, 4, 5, 6, 7, 8, time.UTC),
		time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC), time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC)} {
		now := start
		s := store.NewLocal(func() time.Time { return now })
		ctx := context.Background()
		st, err := s.Apply(ctx, "k", []store.Op{{Kind: store.OpHold, Lane: store.Requests, For: 5 * time.Second}})
		if err != nil || !st.Valid(st.Now) || st.Lane(store.Requests).Until.Sub(st.Now) != 5*time.Second {
			t.Fatalf("%v: a hold of 5 s: %+v, %v", start, st, err)
		}
		now = now.Add(time.Second)
		st, _ = s.Apply(ctx, "k", []store.Op{{Kind: store.OpFail, From: 1, Failures: 1, Solo: true}})
		if left := st.Lane(store.Requests).Until.Sub(st.Now); left != 4*time.Second || !st.Circuit.IsOpen() {
			t.Fatalf("%v: a second on: %v of the hold left, circuit %+v", start, left, st.Circuit)
		}
	}
}
