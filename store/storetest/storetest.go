// Package storetest checks a store.Store against the rules of package
// store, as testing/fstest.TestFS checks an fs.FS: run it in the Store's
// own tests. A Store may fail an Apply now and then (its own bound, on a
// loaded machine): the kit reads the key and goes on, and fails a
// sequence only on a few failed Applies in it.
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			Open: func(t *testing.T) store.Store { return mystore.New(db) },
//		})
//	}
//
// It checks every op's effect against store.Apply, the reference, to the
// bit (each step's ops applied to a copy of the key's Record at the
// State's Now must give the State's Record and Result), on scenarios of
// each op and on seeded random sequences with values out of range (NaN,
// huge and negative numbers, lanes past MaxLanes, Rates too long); the
// clock and Seq rules; Listen (what is published, and only that, within a
// second, and a Listen that returns before it listens, with a message of
// its own); concurrent Applies of one key (run it under -race), each
// reading the clock once the key is locked; keys of any bytes, up to
// store.MaxKeyLen; and junk in the backend (Harness.Plant).
package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// A Harness says how to reach the Store under test.
type Harness struct {
	// Open returns a Store on the backend under test. Every Store that
	// Open returns in one Run shares the backend, as the processes of a
	// fleet do; Open may return the same Store each time (a Store that
	// is one process's). Required. Close what it opens with t.Cleanup.
	Open func(t *testing.T) store.Store
	// Plant writes b as the bytes the backend keeps for key, as junk or
	// an old writer would, so that Run checks they are read as nothing
	// and overwritten. What it plants must live a minute at least
	// (store.KeepFor: retryredis sets that TTL, store.Local that expiry);
	// the kit reads it within seconds. nil: the junk checks are skipped.
	Plant func(t *testing.T, key string, b []byte)
	// Sequences is how many random sequences of ops Run applies (each of
	// up to 12 Applies), from Seed. 0: 300.
	Sequences int
	Seed      uint64
	// Parallel is how many sequences are applied at once (each to a key of
	// its own). 0: 1.
	Parallel int
	// Skew bounds how far the backend's clock may be from this process's
	// (time.Now). 0: 2 s.
	Skew time.Duration
}

var runs atomic.Uint64

// maxFaults is how many failed Applies one sequence of steps allows: a
// Store's own bound may fail one on a loaded machine (R24 allows it),
// never many.
const maxFaults = 3

// Run checks the Store that h opens. Each check uses keys of its own,
// unique to the Run, so a backend shared with other tests is fine.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	if h.Sequences <= 0 {
		h.Sequences = 300
	}
	h.Parallel = max(h.Parallel, 1)
	if h.Skew <= 0 {
		h.Skew = 2 * time.Second
	}
	prefix := fmt.Sprintf("storetest:%d:%d:", time.Now().UnixNano(), runs.Add(1))
	k := kit{h: h, prefix: prefix}
	t.Run("Scenarios", k.scenarios)
	t.Run("Random", k.random)
	t.Run("Clock", k.clock)
	t.Run("Keys", k.keys)
	t.Run("Listen", k.listen)
	t.Run("Concurrent", k.concurrent)
	t.Run("Junk", k.junk)
	t.Run("Edges", k.edges)
}

type kit struct {
	h      Harness
	prefix string
}

func (k kit) key(t *testing.T, name string) string {
	return k.prefix + strings.ReplaceAll(t.Name(), "/", ".") + ":" + name
}

// A step makes the ops of one Apply from the States before it.
type step func(h []store.State) []store.Op

// check applies steps to key on s one by one, and each to the reference at
// the State's Now: the two must agree exactly.
func check(t *testing.T, s store.Store, key string, steps []step) {
	t.Helper()
	if err := agree(s, key, steps); err != nil {
		t.Fatal(err)
	}
}

// agree is check's work, safe on any goroutine: it says where the Store and
// the reference first disagree; nil when they never do.
func agree(s store.Store, key string, steps []step) error {
	var ref store.Record
	var h []store.State
	faults := 0
	for i, mk := range steps {
		ops := mk(h)
		st, err := s.Apply(context.Background(), key, ops)
		if err != nil {
			// A Store may fail an Apply (its bound, on a loaded machine),
			// and cannot tell whether its ops took effect: read the key
			// and go on from what it keeps, the step unchecked; a Store
			// that fails more than a few times in a sequence fails it.
			if faults++; faults > maxFaults {
				return fmt.Errorf("step %d: Apply(%v): %w (%d failed Applies in one sequence)", i, describe(ops), err, faults)
			}
			if st, err = applyRetried(context.Background(), s, key, nil); err != nil {
				return fmt.Errorf("step %d: a read after a failed Apply: %w", i, err)
			}
			ref = st.Clone()
			h = append(h, st)
			continue
		}
		want := store.Apply(&ref, st.Now, ops)
		if diff := compare(ref, st.Record, want, st.Result); diff != "" {
			return fmt.Errorf("step %d: Apply(%v) at %s: the Store and store.Apply disagree:\n%s",
				i, describe(ops), st.Now.Format(time.RFC3339Nano), diff)
		}
		ref = st.Clone() // what the Store keeps: the next step starts from it
		h = append(h, st)
	}
	return nil
}

// compare says how the Store's Record and Result differ from the
// reference's; "" when they do not.
func compare(want, got store.Record, wantRes, gotRes store.Result) string {
	var b strings.Builder
	if wantRes != gotRes { // (Wait is a Duration: no location to differ)
		fmt.Fprintf(&b, "Result: want %+v\n         got %+v\n", wantRes, gotRes)
	}
	if want.Seq != got.Seq {
		fmt.Fprintf(&b, "Seq: want %d, got %d\n", want.Seq, got.Seq)
	}
	if !sameCircuit(want.Circuit, got.Circuit) {
		fmt.Fprintf(&b, "Circuit: want %+v\n          got %+v\n", want.Circuit, got.Circuit)
	}
	n := max(len(want.Lanes), len(got.Lanes))
	for l := range n {
		w, g := want.Lane(store.LaneID(l)), got.Lane(store.LaneID(l))
		if !sameLane(w, g) {
			fmt.Fprintf(&b, "lane %d: want %+v\n        got %+v\n", l, w, g)
		}
	}
	if len(want.Lanes) != len(got.Lanes) && b.Len() == 0 {
		fmt.Fprintf(&b, "lanes: want %d, got %d\n", len(want.Lanes), len(got.Lanes))
	}
	return b.String()
}

func sameCircuit(a, b store.Circuit) bool {
	return a.Failures == b.Failures && a.From == b.From && a.Many == b.Many && a.Last.Equal(b.Last) &&
		a.Open.Equal(b.Open) && a.Since.Equal(b.Since) && a.Probe.Equal(b.Probe)
}

func sameLane(a, b store.Lane) bool {
	return a.Until.Equal(b.Until) && a.Refuse == b.Refuse && a.Next.Equal(b.Next) && a.Shift == b.Shift &&
		sameLevels(a, b) && a.Moved == b.Moved && a.Per == b.Per &&
		a.Burst == b.Burst && a.Scaled == b.Scaled && a.Limited.Equal(b.Limited) && a.Version == b.Version &&
		a.Rates == b.Rates
}

func describe(ops []store.Op) string {
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s%+v", op.Kind, op)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// applyRetried is Apply, tried again up to three times when it fails: a
// Store's error is allowed (its bound, on a loaded machine; the Cooldown
// goes on with its own state), and a check that is not about errors must
// not fail on one. A read (no ops) is always safe to try again; the ops
// the kit retries this way are holds, forward only: applied twice, a hold
// ends the moment of the retry later, which the check that uses it allows.
func applyRetried(ctx context.Context, s store.Store, key string, ops []store.Op) (store.State, error) {
	var err error
	for range 4 {
		var st store.State
		if st, err = s.Apply(ctx, key, ops); err == nil {
			return st, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return store.State{}, err
}

// sameLevels reports whether two lanes order their levels the same (R27).
func sameLevels(a, b store.Lane) bool {
	for i := range a.Tails {
		if !a.Tails[i].Equal(b.Tails[i]) || a.Pushes[i] != b.Pushes[i] {
			return false
		}
	}
	return a.Jumps == b.Jumps && a.Fixed.Equal(b.Fixed) && a.FixedLevel == b.FixedLevel && a.FixedPushed == b.FixedPushed
}
