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
	// Store's now. Read the clock once the key is locked, so that the
	// Applies of a key get their nows in their order. When the Result's
	// Publish is set, the State goes to the Listen of every other process
	// sharing the Store.
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
	// of itself. A State may come more than once, out of order (Seq says
	// which is newer), and after this process's own Apply too (the Cooldown
	// reads it as nothing new); a State published before Listen was called
	// may come or not. What crosses between processes is the whole State:
	// State.MarshalBinary is its encoding. f must not block; it may be
	// called from any goroutine, and once more by a delivery under way when
	// stop is called; stop does not wait for it, and may be called from f.
	// A Store shared with no other process never calls f.
	Listen(f func(key string, s State)) (stop func())
}

// A State is what an Apply returns: the Store's now when it applied the
// ops (on the Store's clock, which a Cooldown converts to its own: R24),
// the key's Record after them, and what they did. Apply reads now to the
// microsecond; a Store may return it as it read it or rounded. A Store
// returns a Record that shares nothing with what it keeps (Record.Clone).
type State struct {
	Now time.Time
	Record
	Result
}
