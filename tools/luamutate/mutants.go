package main

import (
	"fmt"
	"strconv"
	"strings"
)

// A mutant is one token of the script replaced.
type mutant struct {
	ID         int    `json:"id"`
	Line       int    `json:"line"`
	Col        int    `json:"col"`
	Off        int    `json:"-"` // byte offset of the token
	Len        int    `json:"-"` // its length in bytes
	From       string `json:"from"`
	To         string `json:"to"`
	Kind       string `json:"kind"`
	Status     string `json:"status,omitempty"`
	Seconds    string `json:"seconds,omitempty"`
	Source     string `json:"source"` // the line as it was, trimmed
	Equivalent string `json:"equivalent,omitempty"`
}

// apply returns src with m's token replaced.
func (m mutant) apply(src string) string {
	return src[:m.Off] + m.To + src[m.Off+m.Len:]
}

// A token is a piece of Lua code outside comments and strings.
type token struct {
	off  int
	text string
	kind byte // 'o' an operator, 'n' a number, 'w' a name (math.max counts as one)
}

// tokens reads src's code, skipping comments, strings and whitespace.
func tokens(src string) []token {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "--"):
			i = skipComment(src, i+2)
		case c == '\'' || c == '"':
			i = skipQuoted(src, i)
		case c == '[' && longOpen(src[i:]) >= 0:
			i = skipLong(src, i, longOpen(src[i:]))
		case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			j := numberEnd(src, i)
			out = append(out, token{i, src[i:j], 'n'})
			i = j
		case isNameStart(c):
			j := i
			for j < len(src) && (isNameStart(src[j]) || isDigit(src[j]) || src[j] == '.' && j+1 < len(src) && isNameStart(src[j+1])) {
				j++
			}
			out = append(out, token{i, src[i:j], 'w'})
			i = j
		default:
			j := i + 1
			if two := src[i:min(i+2, len(src))]; two == "<=" || two == ">=" || two == "==" || two == "~=" || two == ".." {
				j = i + 2
			}
			out = append(out, token{i, src[i:j], 'o'})
			i = j
		}
	}
	return out
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// numberEnd is where the number at i ends (decimal, with a fraction and an
// exponent, or hexadecimal).
func numberEnd(src string, i int) int {
	j := i
	for j < len(src) {
		c := src[j]
		if isDigit(c) || c == '.' || c == 'x' || c == 'X' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' ||
			(c == '+' || c == '-') && (src[j-1] == 'e' || src[j-1] == 'E') {
			j++
			continue
		}
		break
	}
	return j
}

// longOpen is the level of a long bracket opening at s ([[, [=[, ...), or -1.
func longOpen(s string) int {
	n := 1
	for n < len(s) && s[n] == '=' {
		n++
	}
	if n < len(s) && s[n] == '[' {
		return n - 1
	}
	return -1
}

// skipLong skips the long string or comment opening at i with level lvl.
func skipLong(src string, i, lvl int) int {
	end := "]" + strings.Repeat("=", lvl) + "]"
	if k := strings.Index(src[i+lvl+2:], end); k >= 0 {
		return i + lvl + 2 + k + len(end)
	}
	return len(src)
}

func skipComment(src string, i int) int {
	if i < len(src) && src[i] == '[' && longOpen(src[i:]) >= 0 {
		return skipLong(src, i, longOpen(src[i:]))
	}
	if k := strings.IndexByte(src[i:], '\n'); k >= 0 {
		return i + k + 1
	}
	return len(src)
}

func skipQuoted(src string, i int) int {
	q := src[i]
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case q, '\n':
			return j + 1
		}
	}
	return len(src)
}

var comparisons = []string{"<", "<=", ">", ">=", "==", "~="}

// swaps are the one-token changes of an operator or a name.
var swaps = map[string][]string{
	"+": {"-"}, "*": {"/"}, "/": {"*"},
	"math.max": {"math.min"}, "math.min": {"math.max"},
	"and": {"or"}, "or": {"and"}, "true": {"false"}, "false": {"true"},
}

// mutants lists every one-token change of src: each comparison to each of
// the others; + and - swapped (a unary minus dropped: Lua has no unary
// plus); * and /; math.max and math.min; and and or; true and false; a
// numeric literal one more and one less.
func mutants(src string) []mutant {
	toks := tokens(src)
	var out []mutant
	add := func(t token, to, kind string) {
		line := 1 + strings.Count(src[:t.off], "\n")
		start := strings.LastIndexByte(src[:t.off], '\n') + 1
		end := strings.IndexByte(src[t.off:], '\n')
		if end < 0 {
			end = len(src) - t.off
		}
		out = append(out, mutant{ID: len(out) + 1, Line: line, Col: t.off - start + 1, Off: t.off, Len: len(t.text),
			From: t.text, To: to, Kind: kind, Source: strings.TrimSpace(src[start : t.off+end])})
	}
	for i, t := range toks {
		switch {
		case t.kind == 'n':
			for _, d := range []float64{1, -1} {
				if v, ok := bump(t.text, d); ok {
					if v[0] == '-' && t.off > 0 && src[t.off-1] == '-' {
						v = "(" + v + ")" // a--1 would be a comment
					}
					add(t, v, "literal")
				}
			}
		case t.kind == 'o' && t.text == "-":
			if i > 0 && unaryBefore(toks[i-1]) {
				add(t, "", "unary")
			} else {
				add(t, "+", "arithmetic")
			}
		case t.kind == 'o' && isComparison(t.text):
			for _, c := range comparisons {
				if c != t.text {
					add(t, c, "comparison")
				}
			}
		default:
			for _, to := range swaps[t.text] {
				add(t, to, kindOf(t.text))
			}
		}
	}
	return out
}

func isComparison(s string) bool {
	for _, c := range comparisons {
		if s == c {
			return true
		}
	}
	return false
}

func kindOf(s string) string {
	switch s {
	case "+", "*", "/":
		return "arithmetic"
	case "math.max", "math.min":
		return "minmax"
	case "and", "or":
		return "logical"
	}
	return "boolean"
}

// unaryBefore reports whether a minus after t is unary: after an operator
// but a closing bracket, or a keyword that ends no expression.
func unaryBefore(t token) bool {
	switch t.kind {
	case 'o':
		return t.text != ")" && t.text != "]" && t.text != "}"
	case 'w':
		switch t.text {
		case "return", "and", "or", "not", "then", "do", "else", "elseif", "if", "while", "until", "in":
			return true
		}
	}
	return false
}

// bump returns the literal s plus d, written as Lua reads it.
func bump(s string, d float64) (string, bool) {
	if strings.ContainsAny(s, "xX") {
		return "", false
	}
	if !strings.ContainsAny(s, ".eE") {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "", false
		}
		return strconv.FormatInt(v+int64(d), 10), true
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "", false
	}
	return fmt.Sprint(v + d), true
}
