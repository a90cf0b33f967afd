package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// clock: Now is the backend's, near this process's; Seq
// grows with each Apply that has ops, and is at least the clock in µs;
// a read changes nothing.
func (k kit) clock(t *testing.T) {
	s := k.h.Open(t)
	key := k.key(t, "k")
	ctx := context.Background()
	st, err := s.Apply(ctx, key, nil)
	if err != nil {
		t.Fatalf("a read: %v", err)
	}
	if st.Seq != 0 || len(st.Lanes) != 0 || !sameCircuit(st.Circuit, store.Circuit{}) {
		t.Errorf("a read of a key never applied: want the zero Record, got %+v", st.Record)
	}
	var seq uint64
	for i := range 5 {
		before := time.Now()
		st, err = s.Apply(ctx, key, []store.Op{{Kind: store.OpLimited}})
		after := time.Now()
		if err != nil {
			t.Fatalf("Apply %d: %v", i, err)
		}
		if st.Now.Before(before.Add(-k.h.Skew)) || st.Now.After(after.Add(k.h.Skew)) {
			t.Errorf("Now %v is more than %v from this process's clock (%v..%v)", st.Now, k.h.Skew, before, after)
		}
		if st.Seq <= seq || st.Seq < uint64(st.Now.UnixMicro()) {
			t.Errorf("Apply %d: Seq %d after %d, at Now %d µs: want it to grow, and at least the clock", i, st.Seq, seq, st.Now.UnixMicro())
		}
		seq = st.Seq
	}
	st, _ = s.Apply(ctx, key, nil)
	if st.Seq != seq {
		t.Errorf("a read moved Seq from %d to %d", seq, st.Seq)
	}
}

// keys: keys of any bytes, up to MaxKeyLen, are kept apart and
// round-trip.
func (k kit) keys(t *testing.T) {
	s := k.h.Open(t)
	names := []string{"", " ", "a b", "line\r\nbreak", "{tag}", "armed", "key:", "\x00\xff binary", "ünïcode"}
	keys := make([]string, 0, len(names)+2)
	for _, n := range names {
		keys = append(keys, k.key(t, n))
	}
	// The longest key a Store is given, and one as long that differs only
	// in its last byte.
	longest := k.key(t, "")
	longest += strings.Repeat("k", store.MaxKeyLen-len(longest))
	keys = append(keys, longest, longest[:len(longest)-1]+"j")
	ctx := context.Background()
	for i, key := range keys {
		if _, err := applyRetried(ctx, s, key, []store.Op{{Kind: store.OpHold, Lane: store.Requests, For: time.Duration(i+1) * time.Minute}}); err != nil {
			t.Fatalf("key %q (%d bytes): %v", key, len(key), err)
		}
	}
	for i, n := range keys {
		st, err := applyRetried(ctx, s, n, nil)
		if err != nil {
			t.Fatalf("key %q: %v", n, err)
		}
		if got, want := st.Lane(store.Requests).Until.Sub(st.Now), time.Duration(i+1)*time.Minute; got > want || got < want-10*time.Second {
			t.Errorf("key %q: its hold is %v from now, want about %v: keys are not kept apart", n, got, want)
		}
	}
}

// concurrent: Applies of one key from many goroutines are atomic: every
// take gets a slot of its own, one charge apart; and each reads the clock
// once the key is locked: in the order the Store applied them (by Seq),
// their nows never go back.
func (k kit) concurrent(t *testing.T) {
	s := k.h.Open(t)
	key := k.key(t, "k")
	ctx := context.Background()
	if _, err := s.Apply(ctx, key, []store.Op{{Kind: store.OpRates, Per: float64(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 20
	states := make(chan store.State, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				st, err := s.Apply(ctx, key, []store.Op{{Kind: store.OpTake, Costs: []float64{1}, Within: time.Hour}})
				if err != nil {
					continue // a Store may fail an Apply (its bound on a loaded machine); the rest must hold
				}
				if !st.Took {
					t.Errorf("a take did not take: %+v", st.Result)
					return
				}
				states <- st
			}
		})
	}
	wg.Wait()
	close(states)
	var got []store.State
	seen := map[time.Time]bool{}
	for st := range states {
		at := st.Now.Add(st.Wait).Truncate(time.Second)
		if seen[at] {
			t.Errorf("two takes got the slot of %v: Applies of a key are not atomic", at)
		}
		seen[at] = true
		got = append(got, st)
	}
	if len(got) < workers*each/2 {
		t.Fatalf("%d of %d takes failed", workers*each-len(got), workers*each)
	}
	if err := clockOrder(got); err != nil {
		t.Error(err)
	}
}

// clockOrder says whether Applies of one key, in the order the Store
// applied them (by Seq), have nows that never go back: the Store read its
// clock once the key was locked.
func clockOrder(states []store.State) error {
	slices.SortFunc(states, func(a, b store.State) int { return cmpUint(a.Seq, b.Seq) })
	for i := 1; i < len(states); i++ {
		if states[i].Now.Before(states[i-1].Now) {
			return fmt.Errorf("the Store applied Seq %d at %v, after Seq %d at %v: it read its clock before it locked the key",
				states[i].Seq, states[i].Now.Format(time.RFC3339Nano), states[i-1].Seq, states[i-1].Now.Format(time.RFC3339Nano))
		}
	}
	return nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// listen: a State another Store published comes to Listen within a
// second; one not published never does; stop ends it.
func (k kit) listen(t *testing.T) {
	if err := listenCheck(k.h.Open(t), k.h.Open(t), k.key(t, "k")); err != nil {
		t.Fatal(err)
	}
}

// listenCheck is listen's work: a publishes, b listens.
func listenCheck(a, b store.Store, key string) error {
	heard := make(chan store.State, 64)
	stop := b.Listen(func(got string, st store.State) {
		if got == key {
			heard <- st
		}
	})
	ctx := context.Background()
	quiet, err := a.Apply(ctx, key, []store.Op{{Kind: store.OpTake, Costs: []float64{1}}})
	if err != nil {
		return err
	}
	loud, err := a.Apply(ctx, key, []store.Op{{Kind: store.OpHold, Lane: store.Tokens, For: time.Minute}})
	if err != nil {
		return err
	}
	if !loud.Publish || quiet.Publish {
		return fmt.Errorf("a take published %v, a hold %v: want false, true", quiet.Publish, loud.Publish)
	}
	select {
	case st := <-heard:
		if st.Seq == quiet.Seq {
			return fmt.Errorf("the listener heard a State that was not published (Seq %d)", st.Seq)
		}
		if st.Seq != loud.Seq || !st.Lane(store.Tokens).Until.Equal(loud.Lane(store.Tokens).Until) {
			return fmt.Errorf("the listener heard %+v, want the held State (Seq %d)", st.Record, loud.Seq)
		}
	case <-time.After(time.Second):
		// Which is it: a Listen that returned before it listened (a State
		// published a second later comes), or one that hears nothing?
		again, err := a.Apply(ctx, key, []store.Op{{Kind: store.OpHold, Lane: store.Tokens, For: 2 * time.Minute}})
		if err != nil {
			return err
		}
		select {
		case <-heard:
			return fmt.Errorf("the Store's Listen returned before it was listening: the State published as it returned (Seq %d) never came, "+
				"the one published a second later (Seq %d) did", loud.Seq, again.Seq)
		case <-time.After(time.Second):
			return errors.New("a published State did not come to Listen within a second: none comes at all")
		}
	}
	stop()
	if _, err := a.Apply(ctx, key, []store.Op{{Kind: store.OpLimited}}); err != nil {
		return err
	}
	time.Sleep(50 * time.Millisecond)
	for len(heard) > 0 {
		if st := <-heard; st.Seq > loud.Seq {
			return fmt.Errorf("the listener heard Seq %d after stop", st.Seq)
		}
	}
	return nil
}

// junk: bytes that are not a Record, and a Record out of range, are read
// as the zero Record and overwritten.
func (k kit) junk(t *testing.T) {
	if k.h.Plant == nil {
		t.Skip("Harness.Plant is nil")
	}
	s := k.h.Open(t)
	far := time.Now().Add(200 * 365 * 24 * time.Hour)
	junk := map[string][]byte{
		"empty":       {},
		"text":        []byte("hello"),
		"cut":         []byte("r4 12 1 0 0"),
		"old":         []byte("r2 12 0 0 0 0 0 0 0 0 0 0 0 0 0:"),
		"binary":      {0, 1, 2, 0xff, ' ', ':'},
		"huge per":    mustEncode(store.Record{Seq: 1, Lanes: []store.Lane{{Per: 1e300}}}),
		"year 2226":   mustEncode(store.Record{Seq: 1, Lanes: []store.Lane{{Until: far, Refuse: true}}}),
		"long rates":  mustEncode(store.Record{Seq: 1, Lanes: []store.Lane{{Rates: strings.Repeat("r", 8<<20)}}}),
		"open 10h":    mustEncode(store.Record{Seq: 1, Circuit: store.Circuit{Failures: 9, Open: time.Now().Add(10 * time.Hour)}}),
		"many lanes":  mustEncode(store.Record{Seq: 1, Lanes: make([]store.Lane, store.MaxLanes+1)}),
		"huge seq":    mustEncode(store.Record{Seq: 1 << 63}),
		"nan":         []byte("r4 1 1 " + laneWords(map[string]string{"Per": "NaN"}) + " 0 0 0 0 0 0 0"),
		"r3":          []byte("r3 1 1 0 0 0 0 0 0 0 16 0 0 0 3 1:r 0 0 0 0 0 0 0"),
		"trailing":    append(mustEncode(store.Record{Seq: 1}), " x"...),
		"minus times": []byte("r4 1 1 " + laneWords(map[string]string{"Until": "-5"}) + " 0 0 0 0 0 0 0"),
	}
	ctx := context.Background()
	for name, b := range junk {
		t.Run(name, func(t *testing.T) {
			key := k.key(t, "k")
			k.h.Plant(t, key, b)
			ops := []store.Op{{Kind: store.OpTake, Costs: []float64{1, 1}, Within: time.Second}}
			st, err := s.Apply(ctx, key, ops)
			if err != nil {
				t.Fatalf("Apply over junk: %v", err)
			}
			var ref store.Record
			want := store.Apply(&ref, st.Now, ops)
			if diff := compare(ref, st.Record, want, st.Result); diff != "" && st.Seq == ref.Seq {
				t.Errorf("junk is not read as the zero Record:\n%s", diff)
			}
			if !st.Took || st.Wait != 0 || len(st.Lanes) != 0 || st.Circuit.IsOpen() {
				t.Errorf("over junk, a take: took %v, wait %v, %d lanes, circuit %+v: want a take at once from nothing",
					st.Took, st.Wait, len(st.Lanes), st.Circuit)
			}
			again, err := s.Apply(ctx, key, nil)
			if err != nil || again.Seq != st.Seq {
				t.Errorf("the junk was not overwritten: a read gives Seq %d (%v), want %d", again.Seq, err, st.Seq)
			}
		})
	}
}

func mustEncode(r store.Record) []byte {
	b, _ := r.MarshalBinary()
	return b
}

// edges: encodings on each side of each bound the encoding has (Seq and
// ids under 2^53 and 20 digits, MaxLanes lanes, Rates of MaxRates bytes,
// a flag 0 or 1, no byte after the last field, Failures 0 or more), and
// words spelt in and out of the encoding's grammar (store/encode.go: hex,
// a '+', a leading zero, inf, a space a number reader would skip), each
// read as package store reads it: the Record it encodes when that is
// Valid, else the zero Record. A Store that reads one a bound too far
// either way, or a word package store reads as junk, is caught here, where
// the random sequences, whose Records are all well inside, never go.
func (k kit) edges(t *testing.T) {
	if k.h.Plant == nil {
		t.Skip("Harness.Plant is nil")
	}
	s := k.h.Open(t)
	ctx := context.Background()
	for _, tc := range slices.Concat(edgeCases(), circuitEdgeCases(), spellingCases()) {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			key := k.key(t, "k")
			k.h.Plant(t, key, b)
			st, err := s.Apply(ctx, key, tc.ops)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			var ref store.Record
			if ref.UnmarshalBinary(b) != nil || !ref.Valid(st.Now) {
				ref = store.Record{}
			}
			want := store.Apply(&ref, st.Now, tc.ops)
			if diff := compare(ref, st.Record, want, st.Result); diff != "" {
				t.Errorf("%q is not read as package store reads it:\n%s", b, diff)
			}
		})
	}
}

// edgeCase is one of edges': bytes planted at a key, and the ops then
// applied (nil: a read).
type edgeCase struct {
	name string
	b    []byte
	ops  []store.Op
}

// edgeCases are edges' encodings and ops.
func edgeCases() []edgeCase {
	lane := func(refuse, rates string) string {
		return laneWords(map[string]string{"Refuse": refuse, "Rates": fmt.Sprintf("%d:%s", len(rates), rates)})
	}
	enc := func(seq string, lanes []string, failures, from string) []byte {
		b := fmt.Sprintf("r4 %s %d", seq, len(lanes))
		for _, l := range lanes {
			b += " " + l
		}
		return []byte(b + fmt.Sprintf(" %s %s 0 0 0 0 0", failures, from))
	}
	// waiting is a lane paced at Per = Scaled = scaled ns a unit, its next
	// slot a second ahead of now.
	waiting := func(scaled string) string {
		next := strconv.FormatInt(time.Now().Add(time.Second).UnixMicro(), 10)
		return laneWords(map[string]string{"Next": next, "Per": scaled, "Scaled": scaled})
	}
	one := []string{lane("1", "r")}
	eight := make([]string, store.MaxLanes)
	for i := range eight {
		eight[i] = lane("0", "")
	}
	ahead := strconv.FormatInt(time.Now().Add(10*time.Second).UnixMicro(), 10) // Seq ahead of the Store's now
	take := []store.Op{{Kind: store.OpTake, Costs: []float64{1}, Within: time.Second}}
	return []edgeCase{
		{"Seq ahead of now, then a take", enc(ahead, one, "0", "0"), take},
		{"Seq ahead of now, then a hold", enc(ahead, nil, "0", "0"),
			[]store.Op{{Kind: store.OpHold, Lane: store.Requests, For: time.Second}}},
		{"a hold a second past MaxAhead", enc("5", nil, "0", "0"),
			[]store.Op{{Kind: store.OpHold, Lane: store.Requests, For: store.MaxAhead + time.Second}}},
		{"a hold a second under MaxAhead", enc("5", nil, "0", "0"),
			[]store.Op{{Kind: store.OpHold, Lane: store.Requests, For: store.MaxAhead - time.Second}}},
		{"a take within a second past MaxAhead", enc("5", one, "0", "0"),
			[]store.Op{{Kind: store.OpTake, Costs: []float64{1}, Within: store.MaxAhead + time.Second}}},
		{"a take on a lane paced at 1 ns a unit, its next a second ahead", enc("5", []string{waiting("1")}, "0", "0"), take},
		{"rates rescaled at rescale's bound exactly", enc("5", []string{waiting("1000000")}, "0", "0"),
			[]store.Op{{Kind: store.OpRates, Lane: store.Requests, Per: 1e6 / 1.05, Rates: "r", Version: 3}}},
		{"rates rescaled from a Scaled of 1 ns", enc("5", []string{waiting("1")}, "0", "0"),
			[]store.Op{{Kind: store.OpRates, Lane: store.Requests, Per: 2, Rates: "r", Version: 3}}},
		{"Seq 2^53-1", enc("9007199254740991", one, "0", "0"), nil},
		{"Seq 2^53", enc("9007199254740992", one, "0", "0"), nil},
		{"Seq of 21 digits", enc("000000000000000000007", one, "0", "0"), nil},
		{"MaxLanes lanes", enc("5", eight, "0", "0"), nil},
		{"MaxLanes+1 lanes", enc("5", append(eight, lane("0", "")), "0", "0"), nil},
		{"-1 lanes", []byte("r4 5 -1 0 0 0 0 0 0 0"), nil},
		{"FixedLevel 4", enc("5", []string{laneWords(map[string]string{"FixedLevel": "4"})}, "0", "0"), take},
		{"FixedLevel 5", enc("5", []string{laneWords(map[string]string{"FixedLevel": "5"})}, "0", "0"), take},
		{"Jumps -1", enc("5", []string{laneWords(map[string]string{"Jumps": "-1"})}, "0", "0"), take},
		{"Jumps 9, a lower priority waiting: the tenth lets its first go", enc("5", []string{floorLane(9)}, "0", "0"),
			[]store.Op{{Kind: store.OpTake, Costs: []float64{1}, Within: time.Minute, Priority: 1}}},
		{"Jumps 8: the ninth jumps", enc("5", []string{floorLane(8)}, "0", "0"),
			[]store.Op{{Kind: store.OpTake, Costs: []float64{1}, Within: time.Minute, Priority: 1}}},
		{"Rates of MaxRates bytes", enc("5", []string{lane("0", strings.Repeat("r", store.MaxRates))}, "0", "0"), nil},
		{"Rates of MaxRates+1 bytes", enc("5", []string{lane("0", strings.Repeat("r", store.MaxRates+1))}, "0", "0"), nil},
		{"a flag of 2", enc("5", []string{lane("2", "")}, "0", "0"), nil},
		{"a flag of 0", enc("5", []string{lane("0", "")}, "0", "0"), nil},
		{"Failures 0", enc("5", one, "0", "9"), nil},
		{"Failures -1", enc("5", one, "-1", "9"), nil},
		{"From 2^53-1", enc("5", one, "2", "9007199254740991"), nil},
		{"From of 21 digits", enc("5", one, "2", "100000000000000000000"), nil},
		{"a byte after the last field", append(enc("5", one, "0", "0"), ' '), nil},
		{"a field cut short", enc("5", one, "0", "0")[:len(enc("5", one, "0", "0"))-2], nil},
	}
}

// circuitEdgeCases are edges' circuits (R25): each side of an open time, a
// probe's lease, and a row's age.
func circuitEdgeCases() []edgeCase {
	at := func(d time.Duration) int64 { return time.Now().Add(d).UnixMicro() }
	// opened is a Record whose circuit opened on two processes and is
	// past its open time, its probe's lease ending probe from now (0: no
	// probe out), its lane held until held from now (0: none).
	opened := func(probe, held time.Duration) []byte {
		p, u := int64(0), int64(0)
		if probe != 0 {
			p = at(probe)
		}
		if held != 0 {
			u = at(held)
		}
		return []byte(fmt.Sprintf("r4 5 1 %s 3 1 1 %d %d %d %d", laneWords(map[string]string{"Until": strconv.FormatInt(u, 10)}),
			at(-3*time.Second), at(-2*time.Second), at(-4*time.Second), p))
	}
	takeC := []store.Op{{Kind: store.OpTake, Costs: []float64{1}, Within: time.Minute, Circuit: true}}
	// row is a closed circuit whose row of 2 failures, of process 9, last
	// failed ago; failOf is a failure of process from.
	row := func(ago time.Duration) []byte { return []byte(fmt.Sprintf("r4 5 0 2 9 0 %d 0 0 0", at(-ago))) }
	failOf := func(from uint64) []store.Op {
		return []store.Op{{Kind: store.OpFail, From: from, Failures: 3, Open: time.Second}}
	}
	none := []byte("r4 5 0 0 0 0 0 0 0 0")
	return []edgeCase{
		{"a circuit opened for 1 ns", none, []store.Op{{Kind: store.OpFail, From: 1, Failures: 1, Open: time.Nanosecond, Solo: true}}},
		{"a circuit opened for 1 µs", none, []store.Op{{Kind: store.OpFail, From: 1, Failures: 1, Open: time.Microsecond, Solo: true}}},
		{"a circuit past its open time, no probe out: a take probes", opened(0, 0), takeC},
		{"a probe whose lease ended: the next take probes again", opened(-time.Second, 0), takeC},
		{"a probe whose lease runs: unavailable", opened(10*time.Second, 0), takeC},
		{"a probe held by its lane: its lease runs from its slot", opened(0, 3*time.Second), takeC},
		{"a row a second under KeepFor old: a failure of another process opens it", row(store.KeepFor - time.Second), failOf(1)},
		{"a row KeepFor and a second old starts again", row(store.KeepFor + time.Second), failOf(1)},
		{"a row that starts is published", none, failOf(1)},
	}
}

// spellingCases are edges' words spelt in and out of the encoding's
// grammar, each in one field of a Record that is Valid as package store
// reads it: the Store must read each the same, as junk or as the same
// value (a Lua tonumber reads hex, skips spaces, and takes no '+'; Go's
// strconv takes a '+', "inf" and underscores).
func spellingCases() []edgeCase {
	ahead := strconv.FormatInt(time.Now().Add(10*time.Second).UnixMicro(), 10)
	// base is a Record of one lane paced at 16 ns a unit, its circuit's
	// row two failures long, word by word: r4 Seq N, the lane's Until ...
	// Version len:Rates, then Failures From Many Last Open Since Probe.
	base := strings.Fields("r4 5 1 " + laneWords(map[string]string{"Per": "16", "Rates": "1:r"}) + " 2 9 0 0 0 0 0")
	at := func(field string) int { return 3 + slices.Index(laneFields, field) } // its place in base
	circuitAt := 3 + len(laneFields)
	floats := []string{"0x10", "0X10", "0x1p-2", "+16", "16.", ".5", "016", "00.5", "1e5", "1E+05", "1e+05",
		"1e+5", "1.5e-07", "1e-400", "1e+400", "-0", "0.0", "inf", "Inf", "+Inf", "-Inf", "nan", "NaN", "infinity",
		"1_6", "\t16", "16\t", "16\n", "16\r", "\v16", " 16", "1e", "1e+", "e5", "-", "--1", "1.0000000000000001e-05"}
	var cases []edgeCase
	for _, f := range []struct {
		name  string
		at    int // the field's place in base
		words []string
	}{
		{"Seq", 1, []string{"+5", "05", "-0", "0x5", "5.0", "5e+00", "5\t", "18446744073709551615"}},
		{"lanes", 2, []string{"+1", "01", "-0", "0x1", "1.0", "1e+00", "\t1"}},
		{"Until", at("Until"), []string{"+" + ahead, "0" + ahead, ahead, ahead + ".0"}},
		{"Refuse", at("Refuse"), []string{"+1", "01", "1.0"}},
		{"Tail3", at("Tail3"), []string{"+" + ahead, "0" + ahead, ahead, ahead + ".0"}},
		{"Push2", at("Push2"), []string{"+5", "05", "-0", "5.0", "-5"}},
		{"Jumps", at("Jumps"), []string{"+3", "03", "-0", "3.0", "0x3"}},
		{"FixedLevel", at("FixedLevel"), []string{"+1", "01", "-0", "1.0"}},
		{"Per", at("Per"), floats},
		{"Burst", at("Burst"), []string{"0x10", "+16", "016", "1e+05", "inf", "16\n"}},
		{"Scaled", at("Scaled"), []string{"0x10", "+16", "1e5", "nan", "-0"}},
		{"Version", at("Version"), []string{"+3", "03", "-0", "3.0", "0x3"}},
		{"Rates", at("Rates"), []string{"+1:r", "01:r", "0x1:r", "-0:", "0:", "1.0:r"}},
		{"Failures", circuitAt, []string{"+2", "02", "-0", "2.0", "0x2"}},
		{"From", circuitAt + 1, []string{"+9", "09", "-0", "0x9", "18446744073709551615", "18446744073709551616", "99999999999999999999"}},
	} {
		for _, w := range f.words {
			words := slices.Clone(base)
			words[f.at] = w
			cases = append(cases, edgeCase{name: f.name + " spelt " + strconv.Quote(w), b: []byte(strings.Join(words, " "))})
		}
	}
	return cases
}

// laneFields are a lane's words in store's encoding, in order.
var laneFields = []string{"Until", "Refuse", "Next", "Tail1", "Tail2", "Tail3", "Tail4", "Tail5", "Shift",
	"Push0", "Push1", "Push2", "Push3", "Push4", "Moved", "Jumps", "Fixed", "FixedLevel", "FixedPushed",
	"Per", "Burst", "Scaled", "Limited", "Version", "Rates"}

// laneWords is a lane's encoding, its fields set by name (laneFields) as
// set says, every other 0 but Version 3 and Rates "0:".
func laneWords(set map[string]string) string {
	words := make([]string, len(laneFields))
	for i, f := range laneFields {
		words[i] = "0"
		switch f {
		case "Version":
			words[i] = "3"
		case "Rates":
			words[i] = "0:"
		}
		if v, ok := set[f]; ok {
			words[i] = v
		}
	}
	return strings.Join(words, " ")
}

// floorLane is a lane paced at 100 ms a send whose sends of level 2
// (Normal) wait for 2 s after Normal ones, with the sends of level 4
// (Interactive) having jumped them jumps times in a row: an Interactive
// take on it jumps again, or lets the first of them go (R27's floor).
func floorLane(jumps int) string {
	at := func(d time.Duration) string { return strconv.FormatInt(time.Now().Add(d).UnixMicro(), 10) }
	return laneWords(map[string]string{"Next": at(2 * time.Second), "Tail1": at(2 * time.Second), "Tail2": at(2 * time.Second),
		"Tail3": at(300 * time.Millisecond), "Tail4": at(300 * time.Millisecond), "Push0": "900000", "Push1": "900000", "Push2": "900000",
		"Jumps": strconv.Itoa(jumps), "Per": "1e+08", "Scaled": "1e+08"})
}
