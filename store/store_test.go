package store_test

import (
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
