package cooldown

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Who goes first while a key's sends wait (R27), on an engine with no
// Store: the lanes' order across priorities, and the process's own order
// within one.

const ms = time.Millisecond

// pacedKey is a watched key whose request lane is paced one send per
// 100 ms, one after the other.
func pacedKey(t *testing.T, e *Engine, now time.Time) *KeyState {
	t.Helper()
	k := e.Watch("k", now)
	require.NotNil(t, k)
	k.mu.Lock()
	s := laneOf(&k.state.Record, laneRequests)
	s.Per, s.Scaled = float64(100*ms), float64(100*ms)
	k.mu.Unlock()
	return k
}

var (
	background  = Order{Priority: -1}
	normal      = Order{}
	interactive = Order{Priority: 1}
	retry       = Order{Retry: true}
)

func within(o Order, left time.Duration) Order { o.Left = left; return o }

// TestOrder: each send's wait as it enters, then, once all have entered,
// what each still waits (Next).
func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sends []Order
		enter []time.Duration // each send's wait as Enter gave it
		next  []time.Duration // each send's wait once all have entered
	}{
		{"an Interactive send before the Background ones waiting, which wait a slot more",
			[]Order{background, background, background, interactive},
			[]time.Duration{0, 100 * ms, 200 * ms, 100 * ms},
			[]time.Duration{0, 200 * ms, 300 * ms, 100 * ms}},
		{"one priority, no ends: the order they came",
			[]Order{normal, normal, normal},
			[]time.Duration{0, 100 * ms, 200 * ms},
			[]time.Duration{0, 100 * ms, 200 * ms}},
		{"one priority, no ends, three waiting: the order they came",
			[]Order{normal, normal, normal, normal},
			[]time.Duration{0, 100 * ms, 200 * ms, 300 * ms},
			[]time.Duration{0, 100 * ms, 200 * ms, 300 * ms}},
		{"one priority: the call that must end sooner first, then the others in the order they came",
			[]Order{normal, normal, normal, within(normal, 10*time.Second), within(normal, 5*time.Second)},
			[]time.Duration{0, 100 * ms, 200 * ms, 100 * ms, 100 * ms},
			[]time.Duration{0, 300 * ms, 400 * ms, 200 * ms, 100 * ms}},
		{"a retry before the first tries waiting of its priority",
			[]Order{normal, normal, normal, retry},
			[]time.Duration{0, 100 * ms, 200 * ms, 100 * ms},
			[]time.Duration{0, 200 * ms, 300 * ms, 100 * ms}},
		{"a call that must end sooner trades with a retry and a first try: the retry stays before the first try",
			[]Order{normal, normal, retry, within(normal, time.Second)},
			[]time.Duration{0, 100 * ms, 100 * ms, 100 * ms},
			[]time.Duration{0, 300 * ms, 200 * ms, 100 * ms}},
		{"a first try whose call must end sooner before a retry with no end",
			[]Order{normal, retry, within(normal, time.Second)},
			[]time.Duration{0, 100 * ms, 100 * ms},
			[]time.Duration{0, 200 * ms, 100 * ms}},
		{"an end does not jump a higher priority",
			[]Order{background, interactive, interactive, within(normal, 50*ms)},
			[]time.Duration{0, 100 * ms, 200 * ms, 300 * ms},
			[]time.Duration{0, 100 * ms, 200 * ms, 300 * ms}},
		{"an end does not trade with a lower priority: it goes before it anyway",
			[]Order{normal, background, background, within(normal, time.Second)},
			[]time.Duration{0, 100 * ms, 200 * ms, 100 * ms},
			[]time.Duration{0, 200 * ms, 300 * ms, 100 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, clk := testEngine(t, nil)
			k := pacedKey(t, e, clk.Now())
			ctx := context.Background()
			passes := make([]Pass, len(tc.sends))
			for i, o := range tc.sends {
				passes[i] = e.Pass(k)
				v, w := passes[i].Enter(ctx, Costs{1}, time.Minute, o)
				require.Equal(t, Go, v, "send %d", i)
				assert.Equal(t, tc.enter[i], w, "send %d: Enter's wait", i)
			}
			for i := range passes {
				w, _, down := passes[i].Next()
				assert.False(t, down)
				assert.Equal(t, tc.next[i], w, "send %d: what is left of its wait", i)
			}
		})
	}
}

// TestOrderWakesTheMovedBack: a send whose call has an end is woken when
// another is let in before it (a trade, a higher priority), so that one
// that no longer fits ends at once; one with no end is not (it sees the
// move at its slot). The sends that go take their tickets back out of the
// key's waiters.
func TestOrderWakesTheMovedBack(t *testing.T) {
	e, clk := testEngine(t, nil)
	k := pacedKey(t, e, clk.Now())
	ctx := context.Background()
	first, batch, person := e.Pass(k), e.Pass(k), e.Pass(k)
	first.Enter(ctx, Costs{1}, time.Minute, normal)
	_, w := batch.Enter(ctx, Costs{1}, time.Minute, background)
	require.Equal(t, 100*ms, w)
	_, w = person.Enter(ctx, Costs{1}, time.Minute, within(normal, 150*ms))
	require.Equal(t, 100*ms, w, "before the Background send")
	batchWoken, personWoken := batch.Woken(), person.Woken()

	other := e.Pass(k)
	_, w = other.Enter(ctx, Costs{1}, time.Minute, within(normal, 100*ms))
	assert.Equal(t, 100*ms, w, "its end is sooner: it trades with the person's send")
	select {
	case <-personWoken:
	default:
		t.Fatal("the send moved back, whose call has an end, is woken")
	}
	select {
	case <-batchWoken:
		t.Fatal("a send with no end is not woken by a move")
	default:
	}
	w, _, _ = person.Next()
	assert.Equal(t, 200*ms, w, "a slot later: past its end, its call ends (the loop's fit)")
	person.GiveBack(ctx)

	clk.Add(100 * ms)
	w, _, _ = other.Next()
	assert.Zero(t, w, "it goes")
	k.mu.Lock()
	n := len(k.waiting)
	k.mu.Unlock()
	assert.Equal(t, 1, n, "the Background send waits; the others left the waiters")
	assert.Zero(t, other.tk.mark, "a traded slot has no mark: it is another send's schedule end")
}

// TestOrderWakesOnAPush: a send waiting whose call has an end is woken
// when a send of a higher priority is let in before it (the lane's pushes
// moved), and not when a send goes behind it.
func TestOrderWakesOnAPush(t *testing.T) {
	for _, tc := range []struct {
		name  string
		then  Order
		woken bool
	}{
		{"an Interactive send let in before it", interactive, true},
		{"a send of its priority with no end, behind it", normal, false},
		{"a Background send, behind it", background, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, clk := testEngine(t, nil)
			k := pacedKey(t, e, clk.Now())
			ctx := context.Background()
			first, waiting := e.Pass(k), e.Pass(k)
			first.Enter(ctx, Costs{1}, time.Minute, normal)
			_, w := waiting.Enter(ctx, Costs{1}, time.Minute, within(normal, time.Second))
			require.Equal(t, 100*ms, w)
			woken := waiting.Woken()

			other := e.Pass(k)
			v, _ := other.Enter(ctx, Costs{1}, time.Minute, tc.then)
			require.Equal(t, Go, v)
			got := false
			select {
			case <-woken:
				got = true
			default:
			}
			assert.Equal(t, tc.woken, got, "woken")
		})
	}
}

// TestOrderLeavesTheWaiters: a send waiting leaves its key's waiters when
// it goes and when it gives its slot back, whichever of them leaves first.
func TestOrderLeavesTheWaiters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave []int // the sends waiting (0, 1, 2, in the order they came) as they leave
		back  []bool
	}{
		{"they go in turn", []int{0, 1, 2}, []bool{false, false, false}},
		{"the first gives its slot back, the others go", []int{0, 1, 2}, []bool{true, false, false}},
		{"the last gives its slot back, then the first, the middle one goes", []int{2, 0, 1}, []bool{true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, clk := testEngine(t, nil)
			k := pacedKey(t, e, clk.Now())
			ctx := context.Background()
			first := e.Pass(k)
			first.Enter(ctx, Costs{1}, time.Minute, normal)
			passes := make([]Pass, 3)
			for i := range passes {
				passes[i] = e.Pass(k)
				_, w := passes[i].Enter(ctx, Costs{1}, time.Minute, normal)
				require.Positive(t, w, "send %d waits", i)
			}
			waiting := func() int {
				k.mu.Lock()
				defer k.mu.Unlock()
				return len(k.waiting)
			}
			require.Equal(t, 3, waiting())
			for j, i := range tc.leave {
				if tc.back[j] {
					passes[i].GiveBack(ctx)
				} else {
					w, _, _ := passes[i].Next()
					clk.Add(w)
					w, _, _ = passes[i].Next()
					require.Zero(t, w, "send %d goes at its slot", i)
				}
				assert.Equal(t, 2-j, waiting(), "send %d left the waiters", i)
			}
		})
	}
}
