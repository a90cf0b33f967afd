package retryhttp

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// A Store keeps a Cooldown's state of every key: the hold, the schedule and
// the rates of each of its lanes (R24). The default keeps it in the
// process; WithStore shares it with every process whose Cooldown has a
// Store on the same backend (retryredis keeps it on Redis), so that K
// replicas of a backend sharing one provider account together send at the
// provider's rate, not K times it, and each hears what any of them heard.
//
// The pacing policy stays in the Cooldown, in Go: a Store only applies, to
// one key at a time and atomically, the few steps that must not race (a
// send's slot on every lane at once, a hold that only extends, a rate
// written over the version it was computed from), on its own clock. A
// Store is safe for concurrent use by multiple goroutines.
type Store interface {
	// Apply applies ops to key's state, in order and atomically, at the
	// Store's now, and returns the state after them (StoreState.Seq 0 and
	// no lanes when it has nothing of the key and ops is empty). Every op's
	// effect is that of the in-process Store's (see StoreOp). On an error
	// the Cooldown goes on, for that call, with what its process knows:
	// the ops may have taken effect or not (a Store that timed out cannot
	// tell), and both are safe, since a Store's state is only ever a
	// schedule more or less full and a hold at most as long as asked.
	Apply(ctx context.Context, key string, ops []StoreOp) (StoreState, error)
	// Listen calls f, until stop is called, with the state of a key that
	// another process has limited or held, soon after it did (for
	// retryredis, by Redis's pub/sub), so that this process paces a key
	// that it did not hear limited itself. f must not block. A Store
	// that is not shared never calls it.
	Listen(f func(key string, s StoreState)) (stop func())
}

// A StoreOpKind says what a StoreOp does.
type StoreOpKind uint8

// The kinds of StoreOp.
const (
	// StoreTake gives a send its slot on every lane it counts against,
	// if its wait is shorter than Within (StoreState.Wait, Took, Refused).
	StoreTake StoreOpKind = iota + 1
	// StoreHold moves the lane's hold on to For from now, forward only,
	// moving on the sends already waiting past the old hold (Refuse: the
	// hold refuses sends until it ends).
	StoreHold
	// StoreCorrect sets the lane's schedule by the provider's count: its
	// bucket is full again For from now, as of the send whose Take left
	// the lane's Next at Mark and its Moved at Moved (a zero Mark: a send
	// that was not paced, which only moves Next later).
	StoreCorrect
	// StoreUntake gives back the Charge of a send whose Take left the
	// lane's Next at Mark, if no slot was given after it.
	StoreUntake
	// StoreRates sets the lane's Per, Burst and Rates when its Version is
	// Version, and then increments it; else it leaves them and sets
	// StoreState.Stale. A Per that grows stretches the schedule of the
	// sends waiting by as much (see StoreLane.setRates).
	StoreRates
	// StoreLimited records that the provider limited the lane now.
	StoreLimited
)

// A StoreOp is one step of an Apply. Its Kind says which fields it reads;
// Lane (0 requests, 1 tokens, 2 input tokens, 3 output tokens) is every
// kind's but StoreTake's. An op whose Lane or values are out of range
// (a negative cost, a NaN) is read as 0 or left out, never a panic.
type StoreOp struct {
	Kind StoreOpKind
	Lane int

	Costs  [4]float64    // StoreTake: the send's units on each lane (0: it does not count against it)
	Within time.Duration // StoreTake: take only a wait shorter than this (0 or less: only none)
	Retry  bool          // StoreTake: a retry, which goes before the sends waiting

	For    time.Duration // StoreHold, StoreCorrect: from the Store's now
	Refuse bool          // StoreHold
	Mark   time.Time     // StoreCorrect, StoreUntake: the lane's Next after the send's Take, as the Store returned it
	Moved  time.Duration // StoreCorrect: the lane's Moved after that Take
	Charge float64       // StoreUntake: what the Take charged the lane, in ns

	Version    uint64  // StoreRates: the lane's Version the rates were computed from
	Per, Burst float64 // StoreRates
	Rates      string  // StoreRates
}

// apply applies ops to ks at now: the reference every Store follows.
func (ks *StoreState) apply(now time.Time, ops []StoreOp) {
	ks.Now, ks.Wait, ks.Took, ks.Refused, ks.Stale = now, 0, false, false, false
	if len(ops) == 0 {
		return
	}
	// The Store's clock: a key lost (flushed, expired) and made again
	// still grows its Seq past what was given out before.
	ks.Seq = max(ks.Seq+1, uint64(max(now.UnixNano(), 0)))
	for i := range ops {
		op := &ops[i]
		if op.Kind == StoreTake {
			var costs [numLanes]float64
			for l, c := range op.Costs {
				costs[l] = finite(c)
			}
			ks.Wait, ks.Refused, ks.Took = ks.take(now, costs, op.Within, op.Retry)
			continue
		}
		if op.Lane < 0 || op.Lane >= int(numLanes) {
			continue
		}
		s := &ks.Lanes[op.Lane]
		switch op.Kind {
		case StoreHold:
			s.holdTo(now, now.Add(op.For), op.Refuse)
		case StoreCorrect:
			s.correct(now.Add(op.For), op.Mark, op.Moved)
		case StoreUntake:
			s.untake(op.Mark, finite(op.Charge))
		case StoreRates:
			if s.Version != op.Version {
				ks.Stale = true
				continue
			}
			s.setRates(now, finite(op.Per), finite(op.Burst), op.Rates)
		case StoreLimited:
			s.Limited = now
		}
	}
}

// finite is f when it is a number of 0 or more, else 0.
func finite(f float64) float64 {
	if f != f || f < 0 || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// idle reports whether no lane of ks has anything left to say at now.
func (ks *StoreState) idle(now time.Time) bool {
	for l := range ks.Lanes {
		if !ks.Lanes[l].idle(now) {
			return false
		}
	}
	return true
}

// NewLocalStore returns the in-process Store, the one a Cooldown keeps its
// state in by default, on clk (nil: the real clock). Its ops' effects are
// the reference every Store follows (retryredis's tests hold it to them).
// Given to several Cooldowns of one process with WithStore, it shares their
// state; sharing the Cooldown itself does that more cheaply.
func NewLocalStore(clk clock.Clock) Store {
	if clk == nil {
		clk = clock.New()
	}
	return newMemStore(clk.Now)
}

// memStore is the in-process Store, a Cooldown's default: its keys' states
// in a map, each under a lock of its own, on the Cooldown's clock.
type memStore struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*memKey
}

type memKey struct {
	mu sync.Mutex
	st StoreState
}

func newMemStore(now func() time.Time) *memStore {
	return &memStore{now: now, m: make(map[string]*memKey)}
}

func (s *memStore) Apply(_ context.Context, key string, ops []StoreOp) (StoreState, error) {
	s.mu.Lock()
	k := s.m[key]
	if k == nil {
		if len(ops) == 0 {
			s.mu.Unlock()
			return StoreState{Now: s.now()}, nil
		}
		k = &memKey{}
		s.m[key] = k
	}
	s.mu.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.st.apply(s.now(), ops)
	return k.st, nil
}

func (s *memStore) Listen(func(string, StoreState)) func() { return func() {} }

// forget drops key (its Cooldown no longer watches it: R17's bounded
// memory).
func (s *memStore) forget(key string) {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// reset drops every key.
func (s *memStore) reset() {
	s.mu.Lock()
	clear(s.m)
	s.mu.Unlock()
}
