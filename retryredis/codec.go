package retryredis

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/store"
)

// The wire between Go and apply.lua: the ops of an Apply as the script
// reads them (ARGV[3]), and its reply: the State in store's own encoding
// (Redis's now, what the ops did, and the Record), which Go decodes with
// store.State.UnmarshalBinary. Times cross as whole µs of Redis's clock (0
// is the zero Time), so that a Mark the Store gave out comes back exactly;
// Per, Burst, costs and charges as shortest-exact decimals; a lane's Rates
// as "n:" and its bytes. Every number is spelt as store's grammar says
// (store/encode.go), the only one apply.lua reads.

var errReply = errors.New("retryredis: a reply that does not parse")

// appendOps appends ops to b as apply.lua reads them. A NaN, infinite or
// negative float is sent as 0, as store.Apply reads it; every other value
// goes as it is, and the script reads it as store.Apply does.
func appendOps(b []byte, ops []store.Op) []byte {
	for i := range ops {
		op := &ops[i]
		if i > 0 {
			b = append(b, ' ')
		}
		switch op.Kind {
		case store.OpTake:
			b = appendInt(append(b, 'T'), int64(len(op.Costs)))
			for _, c := range op.Costs {
				b = appendFloat(b, c)
			}
			b = appendInt(appendInt(b, wide(int64(op.Within))), int64(op.Priority))
			b = appendBool(appendBool(b, op.Retry), op.Circuit)
		case store.OpHold:
			b = appendInt(append(b, 'H'), int64(op.Lane))
			b = appendBool(appendInt(b, wide(int64(op.For))), op.Refuse)
		case store.OpCorrect:
			b = appendInt(append(b, 'C'), int64(op.Lane))
			b = appendInt(appendInt(appendInt(b, wide(int64(op.For))), wide(micros(op.Mark))), wide(int64(op.Moved)))
		case store.OpUntake:
			b = appendInt(append(b, 'U'), int64(op.Lane))
			b = appendFloat(appendInt(b, wide(micros(op.Mark))), op.Charge)
		case store.OpRates:
			b = appendInt(append(b, 'R'), int64(op.Lane))
			b = strconv.AppendUint(append(b, ' '), min(op.Version, 1<<53), 10)
			b = appendFloat(appendFloat(b, op.Per), op.Burst)
			b = append(strconv.AppendInt(append(b, ' '), int64(len(op.Rates)), 10), ':')
			b = append(b, op.Rates...)
		case store.OpLimited:
			b = appendInt(append(b, 'L'), int64(op.Lane))
		case store.OpFail:
			b = strconv.AppendUint(append(b, "F "...), op.From, 10)
			b = appendInt(appendInt(b, wide(int64(op.Failures))), wide(int64(op.Open)))
			b = appendBool(appendBool(b, op.Solo), op.Probe)
		case store.OpAlive:
			b = append(b, 'A')
		case store.OpProbeEnd:
			b = append(b, 'P')
		default:
			b = append(b, 'N') // a kind the script does not know: it does nothing
		}
	}
	return b
}

func appendInt(b []byte, v int64) []byte { return strconv.AppendInt(append(b, ' '), v, 10) }

// wide bounds an op's whole number to ±2^53, which Lua's numbers hold
// exactly (gopher-lua reads none past an int64, nor some near it) with no
// change to what the op does: store.Apply clamps every duration to an
// hour, reads a Mark past 2^53 µs as none, and a Version or a Failures
// past 2^53 is one no lane or row reaches. A Version is bounded likewise.
func wide(v int64) int64 { return min(max(v, -1<<53), 1<<53) }

// appendFloat appends f, or 0 when it is not a number of 0 or more.
func appendFloat(b []byte, f float64) []byte {
	if f != f || f < 0 || math.IsInf(f, 0) {
		f = 0
	}
	return strconv.AppendFloat(append(b, ' '), f, 'g', -1, 64)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, " 1"...)
	}
	return append(b, " 0"...)
}

// micros is t in µs since the Unix epoch; 0 for the zero Time.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// parseReply reads apply.lua's reply: a State in store's encoding
// (store.State.MarshalBinary).
func parseReply(s string) (store.State, error) {
	var st store.State
	if err := st.UnmarshalBinary([]byte(s)); err != nil {
		return store.State{}, errReply
	}
	return st, nil
}

// parseMessage reads what apply.lua publishes: the sender's id, its Redis
// key ("n:" and the key) and its reply.
func parseMessage(payload string) (from, key string, st store.State, err error) {
	from, rest, ok := strings.Cut(payload, " ")
	if !ok {
		return "", "", st, errReply
	}
	n, rest, ok := strings.Cut(rest, ":")
	v, err := strconv.Atoi(n)
	if !ok || err != nil || !isUint(n) || v >= len(rest) || rest[v] != ' ' {
		return "", "", st, errReply
	}
	key, rest = rest[:v], rest[v+1:]
	st, err = parseReply(rest)
	return from, key, st, err
}

// isUint reports whether w is a uint as store's grammar spells one: "0",
// or digits with no leading zero (strconv also takes a '+' and zeros).
func isUint(w string) bool {
	if w == "" || w[0] == '0' {
		return w == "0"
	}
	return strings.Trim(w, "0123456789") == ""
}
