package signal

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendModel appends to dst the model a JSON request body asks for: its
// top-level "model" string (OpenAI's, Anthropic's), unescaped as
// encoding/json unescapes it (invalid UTF-8 and lone surrogates become
// U+FFFD), the last one when the key is there twice, as encoding/json
// keeps the last. It returns dst unchanged when there is none: no "model"
// key, a "model" that is not a string (null, a number, an object), the
// empty string, or a body that is not a JSON object. A key spelt with
// escapes ("mod\u0065l") is the key "model", as encoding/json reads it; a
// nested "model" (in a message, in metadata) is not.
//
// It reads b once and allocates nothing beyond what dst needs to grow, with
// the scanner OutputCap uses. A body cut short (the first 64 KiB of a
// longer one) gives the last complete model before the cut; a body that is
// valid up to a byte JSON does not allow gives the last before that byte.
// It never panics.
func AppendModel(dst, b []byte) []byte {
	s := scanner{b: b}
	var model []byte // raw, between the quotes; nil when the last "model" was not a string
	s.object(func(key []byte) bool {
		if !keyIs(key, "model") {
			return false
		}
		if s.peek() != '"' {
			model = nil // a later "model" that is not a string replaces a string before it
			return false
		}
		v, ok := s.str()
		if ok {
			model = v
		}
		return ok
	})
	if len(model) == 0 {
		return dst
	}
	out, ok := appendUnquoted(dst, model)
	if !ok {
		return dst
	}
	return out
}

// keyIs reports whether the raw key (between its quotes) is want once
// unescaped. want is ASCII, and each of its bytes takes at most 6 raw
// bytes (\u0065), so a longer raw key is not want, and a shorter one
// unescapes into the stack buffer.
func keyIs(raw []byte, want string) bool {
	if string(raw) == want {
		return true
	}
	if len(raw) > 6*len(want) || len(raw) > maxKeyIs || bytes.IndexByte(raw, '\\') < 0 {
		return false // too long, or with no escape: unescaping changes no ASCII byte
	}
	var buf [3 * maxKeyIs]byte // a raw byte unescapes to 3 bytes at most (U+FFFD)
	k, ok := appendUnquoted(buf[:0], raw)
	return ok && string(k) == want
}

// maxKeyIs bounds the keys keyIs unescapes: 6 × len("model").
const maxKeyIs = 30

// appendUnquoted appends the JSON string whose raw bytes (between the
// quotes) are s to dst, unescaped as encoding/json's unquote does; ok is
// false where encoding/json would fail (an unknown escape, a control
// character, a quote), which valid JSON never has.
func appendUnquoted(dst, s []byte) ([]byte, bool) {
	for r := 0; r < len(s); {
		switch c := s[r]; {
		case c == '\\':
			if r+1 >= len(s) {
				return dst, false
			}
			if e := unescape(s[r+1]); e != 0 {
				dst = append(dst, e)
				r += 2
				continue
			}
			if s[r+1] != 'u' {
				return dst, false
			}
			rr := getu4(s[r:])
			if rr < 0 {
				return dst, false
			}
			r += 6
			if utf16.IsSurrogate(rr) {
				if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != utf8.RuneError {
					r += 6 // a valid pair
					rr = dec
				} else {
					rr = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, rr)
		case c == '"' || c < ' ':
			return dst, false
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr) // an invalid byte is U+FFFD
			r += size
		}
	}
	return dst, true
}

// unescape is the byte a one-letter escape stands for, 0 for any other.
func unescape(c byte) byte {
	switch c {
	case '"', '\\', '/':
		return c
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return 0
}

// getu4 decodes the \uXXXX at the start of s, -1 when there is none.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
