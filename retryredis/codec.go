package retryredis

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
)

// The wire between Go and the scripts: the ops of an Apply as apply.lua
// reads them (ARGV[4]), and its reply (the record of the key's state, with
// Redis's now and what the Take did) as Go reads it. Times cross as whole
// µs of Redis's clock (0 is the zero Time), so that a Mark the Store gave
// out comes back exactly; Per, Burst, costs and charges as shortest-exact
// decimals; a lane's Rates as "n:" and its bytes.

var errReply = errors.New("retryredis: a reply that does not parse")

// appendOps appends ops to b as apply.lua reads them, and reports whether
// one holds or limits a lane (the Apply then publishes and indexes the key).
// Values out of range are sent as they are and left out by the script, as
// the in-process Store leaves them out; a NaN or a negative cost is 0.
func appendOps(b []byte, ops []retryhttp.StoreOp) (out []byte, arms bool) {
	for i := range ops {
		op := &ops[i]
		if i > 0 {
			b = append(b, ' ')
		}
		switch op.Kind {
		case retryhttp.StoreTake:
			b = append(b, 'T')
			for _, c := range op.Costs {
				b = appendFloat(b, finite(c))
			}
			b = appendInt(b, int64(op.Within))
			b = appendBool(b, op.Retry)
		case retryhttp.StoreHold:
			b = appendInt(append(b, 'H'), int64(op.Lane))
			b = appendBool(appendInt(b, int64(op.For)), op.Refuse)
			arms = true
		case retryhttp.StoreCorrect:
			b = appendInt(append(b, 'C'), int64(op.Lane))
			b = appendInt(appendInt(appendInt(b, int64(op.For)), micros(op.Mark)), int64(op.Moved))
		case retryhttp.StoreUntake:
			b = appendInt(append(b, 'U'), int64(op.Lane))
			b = appendFloat(appendInt(b, micros(op.Mark)), finite(op.Charge))
		case retryhttp.StoreRates:
			b = appendInt(append(b, 'R'), int64(op.Lane))
			b = append(append(b, ' '), strconv.FormatUint(op.Version, 10)...)
			b = appendFloat(appendFloat(b, finite(op.Per)), finite(op.Burst))
			b = append(strconv.AppendInt(append(b, ' '), int64(len(op.Rates)), 10), ':')
			b = append(b, op.Rates...)
		case retryhttp.StoreLimited:
			b = appendInt(append(b, 'L'), int64(op.Lane))
			arms = true
		default:
			b = append(b, 'N') // a kind the Store does not know: it counts as an op, and does nothing
		}
	}
	return b, arms
}

func appendInt(b []byte, v int64) []byte { return strconv.AppendInt(append(b, ' '), v, 10) }

func appendFloat(b []byte, f float64) []byte {
	return strconv.AppendFloat(append(b, ' '), f, 'g', -1, 64)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, " 1"...)
	}
	return append(b, " 0"...)
}

// finite is f when it is a number of 0 or more, else 0 (store.go's finite).
func finite(f float64) float64 {
	if f != f || f < 0 || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// micros is t in µs since the Unix epoch; 0 for the zero Time.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// maxMicros is the largest time.Duration, in µs.
const maxMicros = math.MaxInt64 / int64(time.Microsecond)

// usTime is the time of v µs since the Unix epoch; 0 is the zero Time.
func usTime(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v)
}

// usDur is v µs as a Duration, saturating.
func usDur(v int64) time.Duration {
	switch {
	case v > maxMicros:
		return math.MaxInt64
	case v < -maxMicros:
		return -math.MaxInt64
	}
	return time.Duration(v) * time.Microsecond
}

// scanner reads the words of a reply; after a word that does not parse,
// bad is set and every read returns zero.
type scanner struct {
	s   string
	bad bool
}

func (p *scanner) word() string {
	if p.bad {
		return ""
	}
	w, rest, _ := strings.Cut(p.s, " ")
	p.s = rest
	return w
}

func (p *scanner) int() int64 {
	v, err := strconv.ParseInt(p.word(), 10, 64)
	p.bad = p.bad || err != nil
	return v
}

func (p *scanner) float() float64 {
	f, err := strconv.ParseFloat(p.word(), 64)
	p.bad = p.bad || err != nil || finite(f) != f
	return f
}

func (p *scanner) bool() bool { return p.int() != 0 }

// bytes reads "n:" and n bytes, and the space after them.
func (p *scanner) bytes() string {
	if p.bad {
		return ""
	}
	n, rest, ok := strings.Cut(p.s, ":")
	v, err := strconv.Atoi(n)
	if !ok || err != nil || v < 0 || v > len(rest) {
		p.bad = true
		return ""
	}
	b := rest[:v]
	p.s = strings.TrimPrefix(rest[v:], " ")
	return b
}

// parseReply reads apply.lua's reply: "now wait took refused stale" and
// the record. Rates are substrings of s.
func parseReply(s string) (retryhttp.StoreState, error) {
	p := scanner{s: s}
	var st retryhttp.StoreState
	st.Now = usTime(p.int())
	st.Wait = usDur(p.int())
	st.Took, st.Refused, st.Stale = p.bool(), p.bool(), p.bool()
	if p.word() != "r2" {
		return retryhttp.StoreState{}, errReply
	}
	if seq := p.int(); seq > 0 {
		st.Seq = uint64(seq)
	}
	for l := range st.Lanes {
		ln := &st.Lanes[l]
		ln.Until, ln.Refuse, ln.Next = usTime(p.int()), p.bool(), usTime(p.int())
		ln.Shift, ln.Pushed, ln.Moved = usDur(p.int()), usDur(p.int()), usDur(p.int())
		ln.RetryNext, ln.Per, ln.Burst, ln.Scaled, ln.Limited = usTime(p.int()), p.float(), p.float(), p.float(), usTime(p.int())
		if v := p.int(); v > 0 {
			ln.Version = uint64(v)
		}
		ln.Rates = p.bytes()
	}
	if p.bad || st.Now.IsZero() {
		return retryhttp.StoreState{}, errReply
	}
	return st, nil
}

// parseMessage reads what apply.lua publishes: the sender's id, its Redis
// key ("n:" and the key) and its reply.
func parseMessage(payload string) (from, key string, st retryhttp.StoreState, err error) {
	p := scanner{s: payload}
	from = p.word()
	key = p.bytes()
	if p.bad {
		return "", "", st, errReply
	}
	st, err = parseReply(p.s)
	return from, key, st, err
}
