package store

import (
	"context"
	"time"
)

// A Store keeps a Cooldown's state of every key, a Record each, and
// applies a Cooldown's ops to it (R24). Its methods are safe for
// concurrent use by multiple goroutines.
type Store interface {
	// Apply applies ops to key's Record atomically (no other Apply of the
	// key between its read and its write), as the function Apply does, at
	// the Store's now, and returns the State after them. With no ops it
	// only reads: a key it has nothing of is the zero Record, with the
	// Store's now. A key is at most MaxKeyLen bytes, of any value.
	//
	// Read the clock once the key is locked, so that the Applies of a key
	// get their nows in their order: a clock read before the lock (a
	// database's transaction start time, PostgreSQL's now(), rather than
	// its clock_timestamp()) gives a later Apply an earlier now, and the
	// kit's Concurrent check fails. A Store that reads, applies and writes
	// in one transaction holds the key's lock for a round trip: in the
	// burst that follows a hold, every replica's takes of one key queue on
	// it, and a Store that does not group a process's Applies of a key
	// (one transaction for the takes waiting) sees them time out. When the
	// Result's Publish is set, the State goes to the Listen of every other
	// process sharing the Store.
	//
	// The Store bounds its own Apply: the Cooldown gives it the call's
	// context, which may have no deadline, and waits for it. A Store that
	// reaches another process answers within a bound of its own, tens of
	// milliseconds, far below an LLM call (retryredis: WithTimeout, 30 ms),
	// and returns an error past it. On an error the Cooldown goes on with
	// what its process knows, so the ops may have taken effect or not (a
	// Store that timed out cannot tell), and both are safe.
	Apply(ctx context.Context, key string, ops []Op) (State, error)
	// Listen calls f, until stop is called, with the State of a key after
	// another process's Apply whose Result has Publish set, soon after it
	// (retryredis: within a round trip of Redis, and within a second in
	// any case), so that a process paces and refuses a key it did not hear
	// of itself. Listen is listening when it returns: a State published
	// after it returned comes, and one published before may come or not.
	// It has no error: a Store that cannot reach its backend yet keeps
	// trying, in the background, and Listen returns within the Store's own
	// bound. A Store that loses its subscription catches up on the keys
	// published meanwhile (retryredis polls an index of the keys armed
	// lately): within a second in any case. A State may come more than
	// once, out of order (Seq says which is newer), and after this
	// process's own Apply too (the Cooldown reads it as nothing new). What
	// crosses between processes is the whole State: State.MarshalBinary is
	// its encoding. f must not block; it may be called from any goroutine,
	// and once more by a delivery under way when stop is called; stop does
	// not wait for it, and may be called from f. A Store shared with no
	// other process never calls f.
	Listen(f func(key string, s State)) (stop func())
}

// A State is what an Apply returns: the Store's now when it applied the
// ops (on the Store's clock, which a Cooldown converts to its own: R24),
// the key's Record after them, and what they did. Apply reads now to the
// microsecond (it truncates it); a Store may return now as it read it or
// truncated to the microsecond, as retryredis does. A Store returns a
// Record that shares nothing with what it keeps (Record.Clone).
type State struct {
	Now time.Time
	Record
	Result
}
