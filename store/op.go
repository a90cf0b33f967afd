package store

import "time"

// An OpKind says what an Op does.
type OpKind uint8

// The kinds of Op. Apply's doc says what each does.
const (
	OpTake     OpKind = iota + 1 // a send's slot on every lane it counts against
	OpHold                       // a lane's hold, forward only
	OpCorrect                    // a lane's schedule set by the provider's count
	OpUntake                     // a slot given back
	OpRates                      // a lane's rates, over the version they came from
	OpLimited                    // the provider limited a lane now
	OpFail                       // a failed try, for the circuit (R25)
	OpAlive                      // a sign of life, for the circuit (R25)
	OpProbeEnd                   // the circuit's probe ended with no answer (R25)
)

// NumLevels is how many levels a Lane orders its sends by (R27): a
// Priority's retries go before its first tries, and a higher Priority's
// sends before a lower one's.
const NumLevels = 6

// Level is a take's level: 2×(Priority+1), and 1 more for a retry, the
// Priority clamped to -1..1: Background first tries are level 0,
// Interactive retries level 5.
func (op *Op) Level() int {
	p := min(max(int(op.Priority), -1), 1)
	l := 2 * (p + 1)
	if op.Retry {
		l++
	}
	return l
}

// priorityOf is the Priority (0 to 2, from Background) of a level.
func priorityOf(level int) int { return level / 2 }

var opNames = [...]string{"?", "take", "hold", "correct", "untake", "rates", "limited", "fail", "alive", "probe_end"}

// String returns the kind's name: "take", "hold", and so on.
func (k OpKind) String() string {
	if int(k) < len(opNames) && k > 0 {
		return opNames[k]
	}
	return "op(?)"
}

// An Op is one step of an Apply. Its Kind says which fields it reads;
// the others are ignored. Values out of range are read as Apply says
// (clamped, or the op left out), never trusted and never a panic.
type Op struct {
	Kind OpKind
	// Lane is the lane of a Hold, Correct, Untake, Rates or Limited op.
	Lane LaneID

	// Take: Costs is the send's units on each lane, by LaneID (0, or a
	// lane past the end: the send does not count against it). Within: a
	// wait of Within or more is not taken. Priority (-1 Background, 0
	// Normal, 1 Interactive; clamped) and Retry make its level (Level): it
	// goes before every send waiting of a lower level. Circuit: the take
	// obeys the key's circuit (R25: refused while it is open; the first
	// take after it is the probe).
	Costs    []float64
	Within   time.Duration
	Priority int8
	Retry    bool
	Circuit  bool

	// Hold: the lane is held until For from now; Refuse: calls that meet
	// the hold fail at once. Correct: the lane's bucket is full again For
	// from now, as of the send whose Take left the lane's Next at Mark and
	// its Moved at Moved (a zero Mark: a send not paced). Untake: Charge
	// (ns) goes back if the lane's Next is still Mark.
	For    time.Duration
	Refuse bool
	Mark   time.Time
	Moved  time.Duration
	Charge float64

	// Rates: the lane's Per, Burst (ns) and Rates, applied only when the
	// lane's Version is Version.
	Version    uint64
	Per, Burst float64
	Rates      string

	// Fail: From is the process that failed (any number it keeps for its
	// life: a Cooldown draws one). Failures failed tries in a row open the
	// circuit for Open (<= 0: 5 and 1 s), on the failures of two processes
	// at least unless Solo (a Store that is one process's alone). Probe:
	// the failed try was the probe, which opens the circuit again.
	From     uint64
	Failures int
	Open     time.Duration
	Solo     bool
	Probe    bool
}
