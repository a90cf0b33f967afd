package cooldown

import (
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/pace"
	"github.com/retryhttp/retryhttp/store"
	"github.com/stretchr/testify/assert"
)

// TestIsIdleEdges: a key goes when it has nothing left to say, each rule
// on both sides of pace.IdleAfter: a failure in its circuit's row, a limit
// on a lane.
func TestIsIdleEdges(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	just := now.Add(-pace.IdleAfter)                     // IdleAfter ago: nothing left to say
	recent := now.Add(-pace.IdleAfter + time.Nanosecond) // a nanosecond later: still something
	for _, tc := range []struct {
		name string
		r    store.Record
		idle bool
	}{
		{"nothing", store.Record{}, true},
		{"a failure KeepFor ago", store.Record{Circuit: store.Circuit{Failures: 1, Last: now.Add(-store.KeepFor)}}, true},
		{"a failure just after", store.Record{Circuit: store.Circuit{Failures: 1, Last: now.Add(-store.KeepFor + time.Nanosecond)}}, false},
		{"no failures, a Last just after", store.Record{Circuit: store.Circuit{Last: recent}}, true},
		{"open, IdleAfter past its Open", store.Record{Circuit: store.Circuit{Failures: 5, Last: recent, Open: just}}, true},
		{"open, just after", store.Record{Circuit: store.Circuit{Failures: 5, Open: recent}}, false},
		{"open past it, its probe out", store.Record{Circuit: store.Circuit{Failures: 5, Open: just, Probe: now.Add(time.Nanosecond)}}, false},
		{"open past it, its probe's lease over", store.Record{Circuit: store.Circuit{Failures: 5, Open: just, Probe: now}}, true},
		{"a limit IdleAfter ago", store.Record{Lanes: []store.Lane{{Limited: just}}}, true},
		{"a limit just after", store.Record{Lanes: []store.Lane{{Limited: recent}}}, false},
	} {
		assert.Equal(t, tc.idle, isIdle(&tc.r, now), tc.name)
	}
}

// TestLaneOfMakesLanes: a lane past a Record's last is made, with those
// before it.
func TestLaneOfMakesLanes(t *testing.T) {
	for l := range numLanes {
		var r store.Record
		s := laneOf(&r, l)
		assert.Len(t, r.Lanes, int(l)+1)
		assert.Same(t, &r.Lanes[l], s)
		assert.Same(t, s, laneOf(&r, l), "a lane there is not made again")
	}
}

// TestMayWatchByLength: a call whose scheme://host is n bytes long may be
// a watched default key's only when a key of that length (n%64) is
// watched, or n is past MaxKeyLen (a key kept by its hash).
func TestMayWatchByLength(t *testing.T) {
	ws := newWatchSet(map[string]*KeyState{"https://a.example": {}}, DefaultKeys)
	n := len("https://a.example")
	for _, tc := range []struct {
		n   int
		may bool
	}{{n, true}, {n + 64, true}, {n + 1, false}, {MaxKeyLen, false}, {MaxKeyLen + 1, true}} {
		assert.Equal(t, tc.may, ws.MayWatch(tc.n), "%d bytes", tc.n)
	}
}

// TestCountsTokensBinds: a token lane binds (a call then needs its cost in
// tokens) when held, or paced and either limited by the provider within
// pace.IdleAfter, with no bucket, or its bucket less than half full.
func TestCountsTokensBinds(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	per, burst := float64(time.Millisecond), float64(time.Second)
	paced := func(limited, next time.Time, burst float64) store.Lane {
		return store.Lane{Per: per, Burst: burst, Limited: limited, Next: next}
	}
	long := now.Add(-time.Hour)
	for _, tc := range []struct {
		name  string
		lane  laneID
		s     store.Lane
		binds bool
	}{
		{"not paced", laneTokens, store.Lane{}, false},
		{"held", laneTokens, store.Lane{Until: now.Add(time.Second)}, true},
		{"paced, a full bucket, limited long ago", laneTokens, paced(long, long, burst), false},
		{"paced, a full bucket, limited just within IdleAfter", laneTokens, paced(now.Add(-pace.IdleAfter+time.Nanosecond), long, burst), true},
		{"paced, a full bucket, limited IdleAfter ago", laneTokens, paced(now.Add(-pace.IdleAfter), long, burst), false},
		{"paced, no bucket, its schedule free", laneTokens, paced(long, now, 0), true},
		{"paced, its bucket half full", laneTokens, paced(long, now.Add(pace.DurNs(burst/2)), burst), false},
		{"paced, its bucket a quarter full", laneTokens, paced(long, now.Add(pace.DurNs(burst*3/4)), burst), true},
		{"the output lane, its bucket a quarter full", laneOutput, paced(long, now.Add(pace.DurNs(burst*3/4)), burst), true},
		{"the request lane is no token lane", laneRequests, paced(now, now.Add(time.Hour), 0), false},
		{"a lane past the engine's (a later version's), held", numLanes, store.Lane{Until: now.Add(time.Second)}, false},
	} {
		k := &KeyState{}
		*laneOf(&k.state.Record, tc.lane) = tc.s
		assert.Equal(t, tc.binds, k.CountsTokens(now), tc.name)
	}
}
