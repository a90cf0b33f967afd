package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/anchor"
)

// Local is the in-process Store: its keys' Records in a map, each under
// a lock of its own, on a clock it is given. One Local shared by several
// Cooldowns of one process (retryhttp.WithStore) shares their state as
// retryredis shares a fleet's, Listen included: it is how a test runs K
// replicas in one process (retryhttptest's fleet, a testing/synctest
// bubble). A key goes once it Expires. The zero Local is not usable; make
// one with NewLocal. Local is safe for concurrent use by multiple
// goroutines.
type Local struct {
	now func() time.Time

	mu        sync.Mutex
	keys      map[string]*localKey
	swept     time.Time
	listeners map[int]func(string, State)
	nextID    int
}

type localKey struct {
	mu      sync.Mutex
	rec     Record
	expires atomic.Int64 // unix ns: the key may go after it
	gone    bool         // swept: look the key up again
}

// sweepEvery is how often, on the Local's clock, an Apply looks for keys
// that expired.
const sweepEvery = time.Second

// NewLocal returns an empty Local on the clock now (nil: time.Now, which
// inside a testing/synctest bubble is the bubble's). Any instant now gives
// works, the Unix epoch where clock.NewMock starts among them: the Local's
// own clock is now's moved by whole seconds to where a Record can hold
// its instants (by nothing from 1971 to 2200), and a Cooldown reads a
// Store's times against the Store's now.
func NewLocal(now func() time.Time) *Local {
	return &Local{now: anchor.New(now).Now, keys: make(map[string]*localKey), listeners: make(map[int]func(string, State))}
}

// Apply applies ops to key's Record with Apply, and hands the State to
// every Listen when its Result has Publish set. It never fails, and it
// does not read ctx.
func (s *Local) Apply(_ context.Context, key string, ops []Op) (State, error) {
	for {
		now := s.now()
		k := s.get(key, now, len(ops) > 0)
		if k == nil {
			return State{Now: now}, nil // nothing of the key, and nothing to apply
		}
		k.mu.Lock()
		if k.gone {
			k.mu.Unlock()
			continue
		}
		now = s.now() // the clock under the key's lock: Applies of a key go in its order
		res := Apply(&k.rec, now, ops)
		k.expires.Store(k.rec.Expires(now).UnixNano())
		st := State{Now: now.Truncate(time.Microsecond), Record: k.rec.Clone(), Result: res}
		k.mu.Unlock()
		if res.Publish {
			s.publish(key, st)
		}
		return st, nil
	}
}

// get returns key's entry, made when create is set; it sweeps the expired
// keys once a sweepEvery.
func (s *Local) get(key string, now time.Time, create bool) *localKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.swept) >= sweepEvery {
		s.swept = now
		for name, k := range s.keys {
			if k.expires.Load() < now.UnixNano() && k.mu.TryLock() {
				k.gone = true
				delete(s.keys, name)
				k.mu.Unlock()
			}
		}
	}
	k := s.keys[key]
	if k == nil && create {
		k = &localKey{}
		k.expires.Store(now.Add(KeepFor).UnixNano())
		s.keys[key] = k
	}
	return k
}

func (s *Local) publish(key string, st State) {
	s.mu.Lock()
	fs := make([]func(string, State), 0, len(s.listeners))
	for _, f := range s.listeners {
		fs = append(fs, f)
	}
	s.mu.Unlock()
	for _, f := range fs {
		f(key, State{Now: st.Now, Record: st.Clone(), Result: st.Result})
	}
}

// Listen calls f with the State after every Apply whose Result has
// Publish set, until stop is called; the Cooldown whose Apply it was
// hears it too, and reads it as nothing new. A nil f is ignored.
func (s *Local) Listen(f func(key string, st State)) (stop func()) {
	if f == nil {
		return func() {}
	}
	s.mu.Lock()
	id := s.nextID
	s.nextID++
	s.listeners[id] = f
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.listeners, id)
		s.mu.Unlock()
	}
}

// Len returns how many keys the Local keeps.
func (s *Local) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

// Reset forgets every key, as a Store flushed does: a table test that
// shares one Local across its rows calls it before each.
func (s *Local) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		k.mu.Lock()
		k.gone = true
		k.mu.Unlock()
	}
	clear(s.keys)
}

// Plant sets key's bytes as a Store that keeps encoded Records would
// hold them: decoded, and junk (bytes that do not decode, a Record out of
// range) is kept as such and read as the zero Record by the next Apply.
// It is for tests of what a Store does with junk (storetest.Harness).
func (s *Local) Plant(key string, b []byte) error {
	var rec Record
	if err := rec.UnmarshalBinary(b); err != nil {
		rec = Record{Seq: 0, Lanes: []Lane{{Per: -1}}} // junk: not Valid
	}
	now := s.now()
	k := s.get(key, now, true)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rec = rec
	k.expires.Store(now.Add(KeepFor).UnixNano())
	return nil
}
