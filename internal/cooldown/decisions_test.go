package cooldown

import (
	"math"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/store"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/internal/signal"
)

// The engine's decisions, exhausted beside internal/pace's
// TestHearLaneExhaustive: what an answer too large does (answerOps), what a
// ticket marks (ticketOf), and what a process writes back to a Store that
// lost its state (restore). The cost cap itself is store.Apply's
// (store/apply_test.go).

// epoch is the tests' now: a real-looking date.
var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// policyLanes is a grid of token lanes: nothing known, learned ramping
// (a 429 to a send at its rate halves it), learned steady, the provider's
// word with its bucket.
func policyLanes() []pace.Rates {
	return []pace.Rates{
		{},
		{Learned: 20e3, MeanCost: 1000, Ramping: true, Generation: 3},
		{Learned: 20e3, MeanCost: 1000, Generation: 3},
		{Stated: 1.02e6, Limit: 30000, MeanCost: 1000, Generation: 3},
	}
}

// TestAnswerTooLargeExhaustive: over every lane, body, count, reset,
// ask and ticket of a grid, an answer too large (OpenAI's "Request too
// large") limits no lane, cuts none, holds none but where an exhausted
// reset with no bucket holds it (the provider's state, not the call's),
// and arms a key only by an ask or a reset; the same 429 not too large
// limits a lane (the grid can fail).
func TestAnswerTooLargeExhaustive(t *testing.T) {
	now := epoch
	n := 0
	for _, r := range policyLanes() {
		st := store.State{Now: now, Record: store.Record{Lanes: make([]store.Lane, numLanes)}}
		st.Lanes[laneTokens] = store.Lane{Per: r.Per(), Burst: r.Burst(), Rates: r.Encode(), Version: 7}
		for _, body := range []laneMask{0, 1 << laneTokens, 1 << laneRequests} {
			for _, c := range []signal.Counts{{}, {Limit: 30000, Remaining: 30000, Window: time.Minute, Res: time.Millisecond, OK: true},
				{Limit: 30000, Remaining: 0, Window: time.Minute, Res: time.Millisecond, OK: true}} {
				for _, reset := range []bool{false, true} {
					for _, ask := range []time.Duration{0, 20 * time.Second} {
						for _, paced := range []bool{false, true} {
							a := Answer{Limited: true, Counts: [numLanes]signal.Counts{laneTokens: c}, Body: body}
							if reset {
								a.Reset[laneTokens], a.ResetRes[laneTokens], a.HasReset[laneTokens] = 2*time.Second, time.Millisecond, true
							}
							if ask > 0 {
								a.Ask, a.AskRes, a.HasAsk = ask, time.Second, true
							}
							cost := Costs{1, 40000, 40000}
							var tk *ticket
							if paced {
								tk = &ticket{costs: cost, charged: 1<<laneRequests | 1<<laneTokens, queued: 1<<laneRequests | 1<<laneTokens}
								tk.gen[laneTokens], tk.charge[laneTokens] = r.Generation, 40000*r.Per()
							}
							n++
							checkTooLarge(t, &st, now, a, tk, cost, r)
						}
					}
				}
			}
		}
	}
	t.Logf("%d lanes × answers", n)
}

func checkTooLarge(t *testing.T, st *store.State, now time.Time, a Answer, tk *ticket, cost Costs, r pace.Rates) {
	t.Helper()
	fail := func(rule string) { t.Errorf("%s:\nrates %+v\nanswer %+v", rule, r, a) }
	plain, _ := answerOps(nil, st, now, &a, time.Time{}, tk, cost)
	if !a.HasAsk && !hasOp(plain, store.OpLimited) {
		fail("a 429 not too large limits a lane")
	}
	a.TooLarge = true
	ops, _ := answerOps(nil, st, now, &a, time.Time{}, tk, cost)
	if a.hitLanes(cost) != 0 {
		fail("a call too large hits no lane")
	}
	wantArms := a.HasAsk || a.HasReset[laneTokens]
	if a.arms() != wantArms {
		fail("a call too large arms a key only by an ask or a reset")
	}
	for _, op := range ops {
		switch op.Kind {
		case store.OpLimited:
			fail("a call too large limits no lane")
		case store.OpHold:
			if op.Lane != laneTokens || !a.HasReset[laneTokens] || r.ModelsBucket() && a.Counts[laneTokens].OK {
				fail("a call too large holds no lane (but an exhausted reset where no bucket is stated)")
			}
		case store.OpRates:
			got := pace.DecodeRates(op.Rates)
			if got.Generation != r.Generation || got.Learned > r.Learned*1.0001 || got.Slowdown > math.Max(r.Slowdown, 1) {
				fail("a call too large cuts no rate")
			}
		}
	}
}

func hasOp(ops []store.Op, k store.OpKind) bool {
	for _, op := range ops {
		if op.Kind == k {
			return true
		}
	}
	return false
}

// TestTicketExhaustive: over a grid of lanes (paced or not, a
// bucket or not, the schedule behind, at or ahead of now), costs (none,
// one, centuries), waits and kinds of take: a ticket of a take the
// process's own state gave (local), or a retry's, carries no mark (its
// correction moved the fleet's schedule by the clocks' skew); another's
// marks each lane it charged at the lane's Next; only a paced lane it costs
// something on charges it, at most its bucket; its due times are within
// its wait.
func TestTicketExhaustive(t *testing.T) {
	now := epoch
	n := 0
	for _, per := range []float64{0, float64(time.Millisecond)} {
		for _, burst := range []float64{0, float64(100 * time.Millisecond)} {
			for _, next := range []time.Duration{-time.Second, 0, time.Second} {
				for _, cost := range []float64{0, 1, 1e20} {
					for _, wait := range []time.Duration{0, 50 * time.Millisecond, 2 * time.Second} {
						for _, kind := range []int{0, 1, 2, 3} { // take, retry, local, local retry
							s := store.Lane{Per: per, Burst: burst, Next: now.Add(next)}
							s.Tails[0], s.Tails[1] = s.Next, s.Next // first tries' tails, as a take leaves them (a retry's before it)
							st := store.State{Now: now.Add(time.Hour), Record: store.Record{Lanes: []store.Lane{{}, s}}}
							st.Lanes[0].Next = st.Now // (the request lane unpaced)
							st.Wait, st.Took = wait, true
							costs := Costs{0, cost}
							retry, local := kind&1 != 0, kind&2 != 0
							level := 2
							if retry {
								level = 3
							}
							tk := ticketOf(&st, now, costs, level, local)
							n++
							checkTicket(t, now, s, cost, wait, retry, local, tk)
						}
					}
				}
			}
		}
	}
	t.Logf("%d tickets", n)
}

func checkTicket(t *testing.T, now time.Time, s store.Lane, cost float64, wait time.Duration, retry, local bool, tk ticket) {
	t.Helper()
	fail := func(rule string) {
		t.Errorf("%s:\nlane %+v cost %v wait %v retry %v local %v\nticket %+v", rule, s, cost, wait, retry, local, tk)
	}
	l := laneTokens
	charged := cost > 0 && s.Per > 0
	if tk.charged.Has(l) != charged || tk.charged.Has(laneRequests) {
		fail("a ticket charges the paced lanes the send costs something on, and no other")
	}
	if !charged {
		return
	}
	switch {
	case (retry || local) && !tk.mark[l].IsZero():
		fail("a retry's ticket, or a local take's, carries no mark")
	case !retry && !local && !tk.mark[l].Equal(s.Next):
		fail("a ticket marks the lane at its Next")
	}
	bucket := s.Burst
	if bucket <= 0 {
		bucket = float64(store.MaxDebt)
	}
	if tk.charge[l] < 0 || tk.charge[l] > bucket {
		fail("a send is charged at most its lane's bucket")
	}
	if tk.due[l].Before(now) || tk.due[l].After(now.Add(wait)) {
		fail("a lane is due within the send's wait")
	}
}

// TestRestoreExhaustive: over a grid of what the process knows
// of a lane (its rates; a hold it armed, on its clock or the Store's, or
// none; one it only heard of) and what the Store replies (its rates, its
// hold), with the process's clock on the Store's or an hour off it: the
// process writes back a hold only where it armed one that is not over on
// the clock it was kept on, and the Store has none, for what is left of it
// and at most pace.MaxHold; its rates only where the Store has none.
func TestRestoreExhaustive(t *testing.T) {
	n := 0
	storeNow := epoch
	for _, skew := range []time.Duration{0, time.Hour, -time.Hour} {
		now := storeNow.Add(skew) // the process's clock
		for _, own := range []armedHold{{}, {until: now.Add(-time.Second)}, {until: now.Add(20 * time.Second)},
			{until: storeNow.Add(20 * time.Second), onStore: true}, {until: storeNow.Add(-time.Second), onStore: true},
			{until: now.Add(time.Hour)}, {until: now.Add(20 * time.Second), refuse: true}} {
			for _, heardHold := range []bool{false, true} {
				for _, hadRates := range []bool{false, true} {
					for _, gotHold := range []bool{false, true} {
						for _, gotRates := range []bool{false, true} {
							k := &KeyState{}
							had := store.Lane{}
							if hadRates {
								had.Per, had.Rates = 1e6, pace.Rates{Learned: 1e6}.Encode()
							}
							if heardHold {
								had.Until = now.Add(30 * time.Second)
							}
							k.state.Lanes = []store.Lane{had}
							k.armed[laneRequests] = own
							got := store.Lane{}
							if gotHold {
								got.Until = now.Add(10 * time.Second)
							}
							if gotRates {
								got.Rates = pace.Rates{Learned: 2e6}.Encode()
							}
							st := store.State{Now: now, Record: store.Record{Lanes: []store.Lane{got}}}
							k.restore(&st, now, storeNow)
							n++
							checkRestore(t, now, storeNow, own, had, got, k.deferred)
						}
					}
				}
			}
		}
	}
	t.Logf("%d restores", n)
}

func checkRestore(t *testing.T, now, storeNow time.Time, own armedHold, had, got store.Lane, pending []deferredOp) {
	t.Helper()
	fail := func(rule string) {
		t.Errorf("%s:\nnow %v store now %v\nown %+v\nhad %+v\ngot %+v\npending %+v", rule, now, storeNow, own, had, got, pending)
	}
	left := own.until.Sub(now)
	if own.onStore {
		left = own.until.Sub(storeNow)
	}
	wantHold := left > 0 && !got.Until.After(now)
	wantRates := had.Rates != "" && got.Rates == ""
	var holds, rateOps int
	for _, p := range pending {
		switch p.op.Kind {
		case store.OpHold:
			holds++
			if p.op.For > min(left, pace.MaxHold) || p.op.For <= 0 || p.op.Refuse != own.refuse {
				fail("a hold written back is what is left of the process's own, at most pace.MaxHold")
			}
		case store.OpRates:
			rateOps++
			if p.op.Rates != had.Rates {
				fail("the pace.Rates written back are the process's")
			}
		default:
			fail("restore writes holds and pace.Rates only")
		}
	}
	if (holds == 1) != wantHold || holds > 1 {
		fail("a hold is written back only where the process armed one not over, and the Store has none (never one only heard of)")
	}
	if (rateOps == 1) != wantRates || rateOps > 1 {
		fail("rates are written back only where the Store has none")
	}
}
