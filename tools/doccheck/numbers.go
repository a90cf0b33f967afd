package main

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Which numbers count as measurements, in README.md and docs/*.md:
//
//   - a number with a fraction (1.05, 0.981, +3.76): a ratio or a measured
//     time;
//   - a number with a unit right after it, with or without a space: ns, µs,
//     us, ms, s, min, h (and their words: seconds, minutes, hours), B, KB,
//     KiB, MB, MiB, GB, GiB; or % or × with no space (20%, 1.39×);
//   - a number after × (×1.004, × 1.004).
//
// Left out, as no measurement: a number in code (a fenced block or a
// backticked span: `Retry-After: 20` is an input, not a result); in a link's
// address; a version (two dots or more, v1.2, go1.26, "Go 1.25"); a
// number that is part of a word (R17, p99, HTTP/2, x-ratelimit-2); a
// status with an s joined to it (429s: statuses, not seconds); and a whole
// number without a unit (3 tries, issue 16, 64 workers).
//
// A measurement holds when bench/RESULTS.md has it: a number with a
// fraction, as written (sign and unit aside: "+3.76 ns" is "+3.76" in a
// table whose column says ns); a whole number, with the same unit after it
// ("2 s" needs "2 s" or "2s" there, "20%" needs "20%"), or alone in a cell
// of one of its tables, whose column names the unit ("+574 ns" is "+574"
// under "added ns"). bench/RESULTS.md says which run each came from.
var number = regexp.MustCompile(
	`(×\s?)?[+\-−]?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)*)` +
		`(?:([×%])|[ \x{00a0}]?(ns|µs|us|ms|seconds?|second|minutes?|min|hours?|h|s|KiB|MiB|GiB|KB|MB|GB|B)\b)?`)

// units maps a unit as written to the one it is compared as.
var units = map[string]string{
	"second": "s", "seconds": "s", "minute": "min", "minutes": "min",
	"hour": "h", "hours": "h", "us": "µs",
}

// An exemption is a number a document may state although RESULTS.md does
// not hold it, because it is not a measurement but a limit the library
// sets (a design constant, stated in RULES.md), written as the documents
// write it: a number and its unit.
type exemption struct {
	value, why string
}

// exemptions are few: a new one needs a reason a reviewer accepts. One that
// no document uses is reported, so that none outlives its use.
var exemptions = []exemption{
	{"64 KiB", "R10, R19: the most of a failed body read, drained or parsed"},
	{"40 ms", "R10: the longest a give-up waits on a failed body"},
}

// A quoted number: as written (for the report), and as compared.
type quoted struct {
	text, value, unit string
	fraction          bool
}

// lex returns the numbers of line that count as measurements (all of them
// when every is true, for RESULTS.md).
func lex(line string, every bool) []quoted {
	var out []quoted
	for _, m := range number.FindAllStringSubmatchIndex(line, -1) {
		text, value := line[m[0]:m[1]], line[m[4]:m[5]]
		unit := group(line, m, 6) + group(line, m, 8)
		if u, ok := units[unit]; ok {
			unit = u
		}
		if unit == "s" && statusPlural(text) {
			unit = "" // 429s, 503s: statuses, not seconds
		}
		times := m[2] >= 0
		if times && unit == "" {
			unit = "×"
		}
		q := quoted{text: strings.TrimSpace(text), value: strings.ReplaceAll(value, ",", ""), unit: unit,
			fraction: strings.Contains(value, ".")}
		if every {
			out = append(out, q)
			continue
		}
		if strings.Count(value, ".") > 1 || partOfWord(line, m[0], m[1]) || afterGo(line[:m[0]]) {
			continue
		}
		if q.fraction || q.unit != "" {
			out = append(out, q)
		}
	}
	return out
}

// statusPlural reports whether text is an HTTP status and an s joined to
// it (429s, 503s): three digits from 100 to 599 and no space before the s.
func statusPlural(text string) bool {
	n, ok := strings.CutSuffix(text, "s")
	return ok && len(n) == 3 && n >= "100" && n <= "599" && !strings.ContainsAny(n, ".,+-")
}

func group(s string, m []int, i int) string {
	if m[i] < 0 {
		return ""
	}
	return s[m[i]:m[i+1]]
}

// partOfWord reports whether the number at line[start:end] is in a word:
// a letter, digit or '_' joined to its front or its sign's (R17, p99,
// x-ratelimit-2, pre-1.0), a '.', '/' or '-' joined to the front of a
// number without a sign (HTTP/2, 2026-12-02), or a letter or digit joined
// to its end (a hex digest, 2nd).
func partOfWord(line string, start, end int) bool {
	if start > 0 {
		before, _ := utf8.DecodeLastRuneInString(line[:start])
		first, _ := utf8.DecodeRuneInString(line[start:])
		if unicode.IsLetter(before) || unicode.IsDigit(before) || before == '_' ||
			!strings.ContainsRune("+-−×", first) && strings.ContainsRune("./-", before) {
			return true
		}
	}
	if end < len(line) {
		after, _ := utf8.DecodeRuneInString(line[end:])
		if unicode.IsLetter(after) || unicode.IsDigit(after) {
			return true
		}
	}
	return false
}

// afterGo reports whether before ends with the word "Go" or "go" and a
// space: a Go version ("Go 1.25"), not a name that ends in go
// (failsafe-go 1.5).
func afterGo(before string) bool {
	rest, ok := strings.CutSuffix(before, "Go ")
	if !ok {
		rest, ok = strings.CutSuffix(before, "go ")
	}
	if !ok {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(rest)
	return rest == "" || !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_-./", r)
}

// measured is what RESULTS.md holds, and the exemptions.
type measured struct {
	fractions map[string]bool // "1.05"
	withUnit  map[string]bool // "2 s": a value and its unit
	cells     map[string]bool // "574": a whole number alone in a table cell
	exempt    []exemption
	used      map[string]bool
}

func newMeasured(results string, exempt []exemption) *measured {
	m := &measured{fractions: map[string]bool{}, withUnit: map[string]bool{}, cells: map[string]bool{},
		exempt: exempt, used: map[string]bool{}}
	for _, line := range strings.Split(results, "\n") {
		if strings.HasPrefix(line, "|") {
			for _, cell := range strings.Split(line, "|") {
				if n := wholeCell.FindStringSubmatch(strings.TrimSpace(cell)); n != nil {
					m.cells[strings.NewReplacer(" ", "", ",", "").Replace(n[1])] = true
				}
			}
		}
		for _, q := range lex(line, true) {
			m.fractions[q.value] = true
			if q.unit != "" {
				m.withUnit[q.value+" "+q.unit] = true
			}
		}
	}
	return m
}

// check reports each measurement d quotes, outside code, that RESULTS.md
// does not hold and no exemption covers.
func (m *measured) check(d doc) []string {
	var problems []string
	for i, line := range prose(d) {
		for _, q := range lex(plain(line), false) {
			if m.exempted(q) || m.holds(q) {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s:%d: %s: not in %s (quote a measurement from it, with its run)", d.path, i+1, q.text, resultsPath))
		}
	}
	return problems
}

func (m *measured) holds(q quoted) bool {
	if q.fraction {
		return m.fractions[q.value]
	}
	if q.unit == "×" {
		return m.fractions[q.value] // an integer ratio, as a table writes it
	}
	return m.withUnit[q.value+" "+q.unit] || m.cells[q.value]
}

// wholeCell is a table cell that holds one whole number and nothing else:
// a sign, and digits perhaps grouped by spaces or commas ("156 010").
var wholeCell = regexp.MustCompile(`^[+\-−]?(\d{1,3}(?:[ ,]\d{3})*|\d+)$`)

func (m *measured) exempted(q quoted) bool {
	for _, e := range m.exempt {
		lq := lex(e.value, true)
		if len(lq) == 1 && lq[0].value == q.value && lq[0].unit == q.unit {
			m.used[e.value] = true
			return true
		}
	}
	return false
}

// unused reports the exemptions no document used.
func (m *measured) unused() []string {
	var problems []string
	for _, e := range m.exempt {
		if !m.used[e.value] {
			problems = append(problems, fmt.Sprintf("doccheck: exemption %q (%s) is used by no document: remove it", e.value, e.why))
		}
	}
	return problems
}

// plain blanks a markdown line's code spans and links' addresses, keeping
// the link's text.
var codeSpan = regexp.MustCompile("`[^`]*`")

func plain(line string) string {
	line = codeSpan.ReplaceAllString(line, " ")
	line = link.ReplaceAllString(line, " $1 ")
	return url.ReplaceAllString(line, " ")
}
