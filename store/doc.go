// Package store is the contract between a retryhttp Cooldown and a
// backend that shares its state among the replicas of a service (R24),
// so that K processes behind one provider account send at the
// provider's rate, not K times it, and stop together when it is down
// (R25). It is to retryhttp what database/sql/driver is to database/sql:
// a user of retryhttp never imports it (retryhttp.WithStore takes a
// Store); a package that keeps the state somewhere does.
//
// The policy (what a provider's answer means, at what rate to send) stays
// in the Cooldown, in Go. What a Store keeps of a key is a Record: its
// lanes (a hold and a GCRA bucket per limit the provider states, whose
// waiting sends it orders by level: a take's Priority and whether it is a
// retry, R27) and its circuit (a count of failures in a row, an open time,
// one probe). A Store keeps the levels as it keeps the rest: Apply
// computes them, and the Record's encoding (r4) carries them. What it
// does to a Record is a list of Ops, applied atomically, on the Store's
// own clock, by the function Apply: the reference semantics, a pure
// function, which every Store runs or computes the same as.
//
// # Writing a Store
//
// A backend with a transaction or a compare-and-swap needs no more than
// Apply, the Record's encoding (MarshalBinary, UnmarshalBinary) and its
// expiry: read the key's bytes, decode them (bytes that do not decode are
// the zero Record), Apply the ops at the backend's now, and, when there
// were ops, write the Record back if nobody wrote it meanwhile (else
// start again), to expire at Record.Expires. Return a State with that now,
// the Record and the Result. When the Result's Publish is set, hand the
// State to the Listen of every other process (a pub/sub channel, a
// notification, a poll of recently changed keys: State.MarshalBinary is
// what to send). The package's Example (go doc does not print examples:
// read it on the package's page of the Go docs site, or in this
// directory's example_test.go) is a Store over a compare-and-swap map, in
// about 50 lines. The package storetest checks a Store against these
// rules: run it in the Store's tests.
//
// The rules a Store keeps:
//
//   - Atomic per key: no other Apply of the key between the read and the
//     write of one. Keys are independent: an Apply touches one key.
//   - One clock: now is the Store's (a database's or a server's time),
//     never a caller's, so that processes whose clocks disagree pace the
//     same (each converts a State to its own clock by State.Now).
//   - Seq grows: Apply sets it from the clock, so that a key lost and
//     made again grows past what was given out; a Store passes it through.
//   - Listen hears what others published, within about a round trip and
//     within a second in any case, and may hear a State twice.
//   - Junk is nothing: bytes that do not decode, and a Record that is not
//     Valid, are read as the zero Record and overwritten; never a panic.
//   - A key has an end: a Store may drop it once it Expires.
//   - Bounded: an Apply answers within the Store's own bound (tens of
//     milliseconds; the caller's context may have no deadline); an error
//     leaves the call to its process's own state. Bytes longer than
//     MaxEncoded are junk, read without being parsed.
//
// The rule numbers cited here (R17, R23, R24, R25, R27) are those of
// RULES.md, at the root of the repository
// (https://github.com/retryhttp/retryhttp/blob/main/RULES.md): R17 the
// Cooldown, R23 tokens, R24 a fleet's Store, R25 the circuit, R27 who goes
// first.
//
// Only Redis needs a script, to apply ops in one round trip:
// github.com/retryhttp/retryhttp/retryredis runs Apply's steps in Lua,
// and its tests hold the script to Apply on random sequences of ops.
package store
