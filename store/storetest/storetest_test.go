package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// The kit's own tests: what it says of a Store that breaks a rule of the
// contract it cannot see in one Apply.

// TestClockOrder: Applies of a key whose nows, in the order the Store
// applied them (by Seq), never go back pass; one applied later at an
// earlier now (a clock read before the key's lock: a transaction's start
// time, taken before another transaction locked the key and went first)
// is reported.
func TestClockOrder(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1_800_000_000, 0).Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name   string
		states []store.State
		ok     bool
	}{
		{"in order", []store.State{{Now: at(0), Record: store.Record{Seq: 1}}, {Now: at(1), Record: store.Record{Seq: 2}}}, true},
		{"the same now", []store.State{{Now: at(1), Record: store.Record{Seq: 2}}, {Now: at(1), Record: store.Record{Seq: 1}}}, true},
		{"delivered out of order", []store.State{{Now: at(5), Record: store.Record{Seq: 3}}, {Now: at(0), Record: store.Record{Seq: 1}},
			{Now: at(2), Record: store.Record{Seq: 2}}}, true},
		{"applied later at an earlier now", []store.State{{Now: at(0), Record: store.Record{Seq: 1}}, {Now: at(9), Record: store.Record{Seq: 2}},
			{Now: at(4), Record: store.Record{Seq: 3}}}, false},
	} {
		err := clockOrder(tc.states)
		if tc.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "before it locked the key") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestListenCheckSaysWhich: a Listen that returns before it listens, and
// one that never hears, each get a message of their own.
func TestListenCheckSaysWhich(t *testing.T) {
	local := store.NewLocal(nil)
	late := &lateListen{Local: local}
	err := listenCheck(late, late, "k")
	if err == nil || !strings.Contains(err.Error(), "returned before it was listening") {
		t.Errorf("a Listen that starts late: %v", err)
	}
	err = listenCheck(local, deaf{local}, "k2")
	if err == nil || !strings.Contains(err.Error(), "none comes at all") {
		t.Errorf("a Listen that never hears: %v", err)
	}
	if err := listenCheck(local, local, "k3"); err != nil {
		t.Errorf("a Local: %v", err)
	}
}

// lateListen is a Local whose Listen starts listening only after the
// first State it publishes: as a subscription that returns before its
// server has confirmed it.
type lateListen struct {
	*store.Local
	mu      sync.Mutex
	pending func(string, store.State)
	started bool
}

func (s *lateListen) Listen(f func(string, store.State)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = f
	return func() {}
}

func (s *lateListen) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	st, err := s.Local.Apply(ctx, key, ops)
	if err == nil && st.Publish {
		s.mu.Lock()
		f, started := s.pending, s.started
		s.started = true
		s.mu.Unlock()
		if started && f != nil {
			f(key, st)
		}
	}
	return st, err
}

// deaf is a Store whose Listen hears nothing.
type deaf struct{ *store.Local }

func (deaf) Listen(func(string, store.State)) func() { return func() {} }
