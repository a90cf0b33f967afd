// Package cooldown is the engine of retryhttp's Cooldown (RULES.md R17,
// R23, R24, R25, R27): what every key's provider said, each send's slot and
// who goes first, the sync with a Store, and each key's circuit. The root package keeps the
// public face (retryhttp.Cooldown, its options) and the retry loop; the
// loop meets the engine through one seam, a Pass, as gobreaker's caller
// meets its breaker:
//
//	p := eng.Pass(key)            // the key's state, as a call of it finds it (a nil key: not watched)
//	v := p.Enter(ctx, costs, o)   // before a send (its Order): its slot, a wait, or a refusal and why
//	w := p.Next(now)              // after each wait: what is left of it (holds armed meanwhile)
//	p.Hear(ctx, answer)           // after the try: what the answer said
//	p.GiveBack(ctx)               // or the slot back, when the send did not go
//
// The words it uses:
//
//   - key: what a call counts against (by default scheme://host; a model,
//     a tenant). A watched key is one the engine keeps a KeyState for:
//     one the provider limited, held, or failed; a key nobody watches
//     costs a call nothing.
//   - lane: one limit the provider states on a key (requests, tokens,
//     input and output tokens); a send waits for every lane it costs
//     something on.
//   - hold: a time before which no send of a lane goes (the provider's
//     ask, an exhausted limit's reset); a refusing hold fails the sends
//     instead. The pace: a lane's bucket, from which each send takes a
//     slot (store.Apply's OpTake).
//   - order: where a send goes among its key's sends waiting (Order, R27):
//     its priority and whether it is a retry make its level in the lanes'
//     schedule (store.Op.Level); a send of a higher level goes first and
//     pushes the lower ones a slot each. A waiter is one of the process's
//     sends waiting for its slot; within a priority, waiters trade slots so
//     that the call that must end sooner goes first (order.go).
//   - answer: what one try told the engine (Answer): a limit, an ask, the
//     provider's counts, and for the circuit a failure or a sign of life.
//   - the circuit: a key's breaker (R25): its row of failures, open while
//     it refuses, its probe. The fleet's row is in the Store; a process's
//     own row (ownRow) refuses its own calls when its own network fails.
//   - the Store's state: a key's store.Record as the Store last said it,
//     moved onto the engine's clock (toLocalClock); with no Store, or while
//     it fails, the process's own (applyHere).
//   - deferred ops: what an answer said that is worth no round trip of its
//     own; they go with the key's next take (R24: a paced send costs one).
//   - the engine's clock: the first Transport's, anchored where a Record
//     can hold its instants (internal/anchor).
package cooldown
