package retryhttp

import (
	"context"
	"time"

	"github.com/retryhttp/retryhttp/internal/cooldown"
	"github.com/retryhttp/retryhttp/store"
)

// What the package's tests reach inside for, as net/http's export_test.go:
// the Cooldown's engine (internal/cooldown), read and set up through its
// inspection surface.

// The engine's bounds and messages, by the names the tests use.
const (
	maxCoolingKeys   = cooldown.MaxKeys
	sweepEvery       = cooldown.SweepEvery
	storeSettle      = cooldown.StoreSettle
	maxKeyLen        = cooldown.MaxKeyLen
	hashedLen        = cooldown.HashedLen
	msgCircuitOpen   = cooldown.MsgCircuitOpen
	msgCircuitClosed = cooldown.MsgCircuitClosed
	msgStoreFailing  = cooldown.MsgStoreFailing
	msgStoreBack     = cooldown.MsgStoreBack
)

var errBadReply = cooldown.ErrBadReply

// The lanes, by LaneID.
const (
	laneRequests = store.Requests
	laneTokens   = store.Tokens
	laneInput    = store.InputTokens
	laneOutput   = store.OutputTokens
	numLanes     = cooldown.NumLanes
)

type laneID = store.LaneID

// size is how many keys c watches.
func (c *Cooldown) size() int { return c.eng.Len() }

// sweepIdle looks c's keys over, as its timer does every second.
func (c *Cooldown) sweepIdle() { c.eng.Sweep() }

// setProcess names c's failures in a fleet's rows: two Cooldowns of one
// test, each a process of its own (or one, given the same id).
func (c *Cooldown) setProcess(id uint64) { c.eng.SetProcess(id) }

// now is c's clock, anchored (internal/anchor): the times it keeps are on
// it.
func (c *Cooldown) now() time.Time { return c.eng.Now() }

// on is t, an instant of the test's clock, on c's anchored clock.
func (c *Cooldown) on(t time.Time) time.Time { return c.eng.On(t) }

// watch is key's state on c, made if it has none; nil when full.
func (c *Cooldown) watch(key string, now time.Time) *cooldown.KeyState { return c.eng.Watch(key, now) }

// entry is origin's state on c, nil when it is not watched.
func (c *Cooldown) entry() *cooldown.KeyState { return c.eng.Find(origin) }

// apply applies ops to k's key, as a call's op does.
func (c *Cooldown) apply(k *cooldown.KeyState, ops ...store.Op) {
	c.eng.Apply(context.Background(), k, ops)
}

// stateOf is origin's state on c (a copy, on c's clock); the zero State
// when it is not watched.
func (c *Cooldown) stateOf() store.State {
	if k := c.eng.Find(origin); k != nil {
		return k.State()
	}
	return store.State{}
}

// push is c's Store's push of key's state.
func (c *Cooldown) push(key string, st store.State) { c.eng.Push(key, st) }

// store is c's Store, nil when it has none.
func (c *Cooldown) store() store.Store { return c.eng.Store() }
