package store

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// The encoding of a Record, for a Store that keeps it as bytes (a value
// under a key, a row's column, a blob in a compare-and-swap). It is text,
// space-separated, and versioned:
//
//	r4 Seq N lane×N Failures From Many Last Open Since Probe
//
// with each lane
//
//	Until Refuse Next Tail×5 Shift Push×5 Moved Jumps Fixed FixedLevel FixedPushed Per Burst Scaled Limited Version len:Rates
//
// (r3, before R27's levels, had Shift Pushed Moved RetryNext where r4 has
// the tails, the pushes and the floor: an r3 Record reads as junk, and its
// key starts again from nothing, once, when a fleet moves to r4.)
//
// Times are whole microseconds since the Unix epoch (0 is the zero Time),
// spans whole microseconds, flags 0 or 1, Per, Burst and Scaled floats
// (Go writes the shortest that reads back exactly), and Rates its length
// in bytes, a colon and the bytes as they are.
//
// UnmarshalBinary takes one grammar, and retryredis's script the same
// (the kit's Edges hold a Store to it):
//
//	uint  = "0" | [1-9][0-9]*                        Seq, Version, From, a length
//	int   = "0" | "-"? [1-9][0-9]*                   a time, a span, N, Failures
//	float = "-"? ("0" | [1-9][0-9]*) ("." [0-9]+)? ("e" ("-" | "+") [0-9]+)?
//	flag  = "0" | "1"
//
// that is, what strconv.FormatUint, FormatInt, FormatFloat(f, 'g', -1,
// 64) and Lua's %d and %.17g write: decimal only, with no '+' in front, no
// leading zero, no hex, no inf or nan, no underscore, no space. A word
// spelt otherwise is junk, and so is one its type cannot hold (an int past
// int64, a float past the largest float64; one below the smallest reads as
// 0), and then the whole Record.

// ErrEncoding is what UnmarshalBinary returns for bytes that are not a
// Record: a Store reads them as the zero Record (junk at a key is
// overwritten, never a panic: R24).
var ErrEncoding = errors.New("store: not an encoded Record")

const magic = "r4"

// MarshalBinary returns r's encoding. It never fails; a Record that is not
// Valid may encode to bytes that UnmarshalBinary reads as junk.
func (r Record) MarshalBinary() ([]byte, error) {
	return r.AppendBinary(make([]byte, 0, 64+224*len(r.Lanes)))
}

// AppendBinary appends r's encoding to b. It never fails.
func (r Record) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, magic...)
	b = appendUint(b, r.Seq)
	b = appendInt(b, int64(len(r.Lanes)))
	for i := range r.Lanes {
		s := &r.Lanes[i]
		b = appendTime(b, s.Until)
		b = appendBool(b, s.Refuse)
		b = appendTime(b, s.Next)
		for _, t := range s.Tails {
			b = appendTime(b, t)
		}
		b = appendInt(b, s.Shift.Microseconds())
		for _, p := range s.Pushes {
			b = appendInt(b, p.Microseconds())
		}
		b = appendInt(appendInt(b, s.Moved.Microseconds()), int64(s.Jumps))
		b = appendTime(b, s.Fixed)
		b = appendInt(appendInt(b, int64(s.FixedLevel)), s.FixedPushed.Microseconds())
		b = appendFloat(appendFloat(appendFloat(b, s.Per), s.Burst), s.Scaled)
		b = appendTime(b, s.Limited)
		b = appendUint(b, s.Version)
		b = append(strconv.AppendInt(append(b, ' '), int64(len(s.Rates)), 10), ':')
		b = append(b, s.Rates...)
	}
	c := &r.Circuit
	b = appendInt(b, int64(c.Failures))
	b = appendUint(b, c.From)
	b = appendBool(b, c.Many)
	b = appendTime(appendTime(appendTime(appendTime(b, c.Last), c.Open), c.Since), c.Probe)
	return b, nil
}

// UnmarshalBinary sets r from its encoding. On bytes that are not one
// (or are longer than MaxEncoded) it returns ErrEncoding and sets r to the
// zero Record: a Store that reads junk applies its ops to nothing. Values
// are not checked against a clock: Apply reads a Record that is not Valid
// at its now as the zero Record.
func (r *Record) UnmarshalBinary(b []byte) error {
	var got Record
	if len(b) > MaxEncoded || !got.decode(&decoder{s: string(b)}) {
		*r = Record{}
		return ErrEncoding
	}
	*r = got
	return nil
}

// MaxEncoded is more than the encoding of any Valid Record takes (8
// lanes with Rates of MaxRates bytes: about 4 KiB). Longer bytes are junk,
// read as the zero Record without being parsed (a key that held 8 MiB took
// a tenth of a second to read).
const MaxEncoded = 8 << 10

// decode reads a Record's encoding from d, to its end; false on junk.
func (r *Record) decode(d *decoder) bool {
	if d.word() != magic {
		return false
	}
	r.Seq = d.uint()
	n := d.int()
	if n < 0 || n > MaxLanes || d.bad {
		return false
	}
	if n > 0 {
		r.Lanes = make([]Lane, n)
	}
	for i := range r.Lanes {
		s := &r.Lanes[i]
		s.Until, s.Refuse, s.Next = d.time(), d.bool(), d.time()
		for t := range s.Tails {
			s.Tails[t] = d.time()
		}
		s.Shift = d.span()
		for p := range s.Pushes {
			s.Pushes[p] = d.span()
		}
		s.Moved, s.Jumps, s.Fixed = d.span(), int(d.int()), d.time()
		s.FixedLevel, s.FixedPushed = int(d.int()), d.span()
		s.Per, s.Burst, s.Scaled = d.float(), d.float(), d.float()
		s.Limited, s.Version, s.Rates = d.time(), d.uint(), d.bytes()
	}
	c := &r.Circuit
	c.Failures, c.From, c.Many = int(d.int()), d.uint(), d.bool()
	c.Last, c.Open, c.Since, c.Probe = d.time(), d.time(), d.time(), d.time()
	return !d.bad && d.s == ""
}

// MarshalBinary returns the encoding of st as a process sends it to
// another (Listen): the Store's now and what the ops did, then the Record.
// It is what retryredis's script replies and publishes:
//
//	Now Wait Took Refused Unavailable Probe Stale Publish Record
//
// with Now in µs since the Unix epoch, Wait in µs, the flags 0 or 1. It
// never fails. (Without it, an encoder that asks for a BinaryMarshaler,
// gob's, would take the Record's, which State embeds, and drop the rest.)
func (st State) MarshalBinary() ([]byte, error) {
	b := strconv.AppendInt(nil, st.Now.UnixMicro(), 10)
	b = appendInt(b, st.Wait.Microseconds())
	for _, f := range [...]bool{st.Took, st.Refused, st.Unavailable, st.Probe, st.Stale, st.Publish} {
		b = appendBool(b, f)
	}
	return st.AppendBinary(append(b, ' '))
}

// UnmarshalBinary sets st from what MarshalBinary wrote; on anything else
// it returns ErrEncoding and sets st to the zero State.
func (st *State) UnmarshalBinary(b []byte) error {
	var got State
	d := &decoder{s: string(b)}
	now, wait := d.int(), d.span()
	got.Took, got.Refused, got.Unavailable, got.Probe, got.Stale, got.Publish = d.bool(), d.bool(), d.bool(), d.bool(), d.bool(), d.bool()
	if d.bad || now <= 0 || now > maxMicros || len(d.s) > MaxEncoded || !got.decode(d) {
		*st = State{}
		return ErrEncoding
	}
	got.Now, got.Wait = time.UnixMicro(now).UTC(), wait
	*st = got
	return nil
}

func appendInt(b []byte, v int64) []byte   { return strconv.AppendInt(append(b, ' '), v, 10) }
func appendUint(b []byte, v uint64) []byte { return strconv.AppendUint(append(b, ' '), v, 10) }

func appendFloat(b []byte, f float64) []byte {
	return strconv.AppendFloat(append(b, ' '), f, 'g', -1, 64)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, " 1"...)
	}
	return append(b, " 0"...)
}

// appendTime appends t in µs since the Unix epoch; 0 for the zero Time.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, " 0"...)
	}
	return appendInt(b, t.UnixMicro())
}

// A decoder reads the words of an encoding; after one that does not
// parse, bad is set and every read returns zero.
type decoder struct {
	s   string
	bad bool
}

func (p *decoder) word() string {
	if p.bad {
		return ""
	}
	w, rest, _ := strings.Cut(p.s, " ")
	p.s = rest
	return w
}

func (p *decoder) int() int64 {
	w := p.word()
	v, err := strconv.ParseInt(w, 10, 64)
	p.bad = p.bad || err != nil || !isInt(w)
	return v
}

func (p *decoder) uint() uint64 {
	w := p.word()
	v, err := strconv.ParseUint(w, 10, 64)
	p.bad = p.bad || err != nil || !isUint(w)
	return v
}

func (p *decoder) float() float64 {
	w := p.word()
	f, err := strconv.ParseFloat(w, 64)
	p.bad = p.bad || err != nil || !isFloat(w) || math.IsNaN(f) || math.IsInf(f, 0)
	return f
}

// isUint, isInt and isFloat report whether w is spelt as the grammar says
// (strconv reads more: a '+', leading zeros, hex, inf, underscores).
func isUint(w string) bool { return w == "0" || w != "" && w[0] != '0' && digits(w) == len(w) }

func isInt(w string) bool { return w == "0" || isUint(strings.TrimPrefix(w, "-")) && w != "-0" }

func isFloat(w string) bool {
	w = strings.TrimPrefix(w, "-")
	n := digits(w)
	if n == 0 || n > 1 && w[0] == '0' {
		return false
	}
	w = w[n:]
	if w != "" && w[0] == '.' {
		n = digits(w[1:])
		if n == 0 {
			return false
		}
		w = w[1+n:]
	}
	if w == "" {
		return true
	}
	return len(w) > 2 && w[0] == 'e' && (w[1] == '-' || w[1] == '+') && digits(w[2:]) == len(w)-2
}

// digits is how many ASCII digits w starts with.
func digits(w string) int {
	n := 0
	for n < len(w) && '0' <= w[n] && w[n] <= '9' {
		n++
	}
	return n
}

func (p *decoder) bool() bool {
	switch p.word() {
	case "0":
		return false
	case "1":
		return true
	}
	p.bad = true
	return false
}

// time reads µs since the epoch; a value a Duration cannot hold is bad.
func (p *decoder) time() time.Time {
	v := p.int()
	if v == 0 || p.bad {
		return time.Time{}
	}
	if v < -maxMicros || v > maxMicros {
		p.bad = true
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

func (p *decoder) span() time.Duration {
	v := p.int()
	if v < -maxMicros || v > maxMicros {
		p.bad = true
		return 0
	}
	return time.Duration(v) * time.Microsecond
}

const maxMicros = math.MaxInt64 / int64(time.Microsecond)

// bytes reads "n:" and n bytes, and the space after them.
func (p *decoder) bytes() string {
	if p.bad {
		return ""
	}
	n, rest, ok := strings.Cut(p.s, ":")
	v, err := strconv.Atoi(n)
	if !ok || err != nil || !isUint(n) || v > len(rest) {
		p.bad = true
		return ""
	}
	b := rest[:v]
	rest = rest[v:]
	switch {
	case rest == "":
		p.s = ""
	case rest[0] == ' ':
		p.s = rest[1:]
	default:
		p.bad = true
	}
	return b
}
