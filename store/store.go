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
	// Store's now. When the Result's Publish is set, the State goes to the
	// Listen of every other process sharing the Store. ctx bounds the
	// call; on an error the Cooldown goes on with what its process knows,
	// so the ops may have taken effect or not (a Store that timed out
	// cannot tell), and both are safe.
	Apply(ctx context.Context, key string, ops []Op) (State, error)
	// Listen calls f, until stop is called, with the State of a key after
	// another process's Apply whose Result has Publish set, soon after it
	// (retryredis: within a round trip, and within a second in any case),
	// so that a process paces and refuses a key it did not hear of
	// itself. A State may come more than once, and out of order (Seq says
	// which is newer). f must not block. A Store shared with no other
	// process never calls it.
	Listen(f func(key string, s State)) (stop func())
}

// A State is what an Apply returns: the Store's now when it applied the
// ops (on the Store's clock, which a Cooldown converts to its own: R24),
// the key's Record after them, and what they did. A Store returns a
// Record that shares nothing with what it keeps (Record.Clone).
type State struct {
	Now time.Time
	Record
	Result
}
