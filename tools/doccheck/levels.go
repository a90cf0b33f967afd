package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// What the documents state of the levels: a level (Debug, Info, Warn,
// Error, or DEBUG and the rest) beside one of the library's log messages
// must be one the code writes that message at (codelevels.go). Beside
// means:
//
//   - in prose, in the same clause: a paragraph or list item, run over its
//     line breaks, cut at each ". ", "; " and " and " outside code spans, so
//     that "a Warn entry `A` when it opens and an Info entry `B` when it
//     closes" states Warn of A and Info of B;
//   - in a table row, in the row: when one cell names k messages and
//     another k levels, k > 1, the i-th level is the i-th message's
//     ("`A`, `B` | Warn, Info"); else each level is every message's;
//   - in a code block, on the same line: a log line as a logger writes it
//     ("WARN  llm transient failure — retrying", "level=WARN msg=...",
//     {"level":"warn","msg":...}).
//
// A message is named in full (a line break inside it is a space), or by a
// code span that starts it and ends with "…" or "...". A level in a code
// span (`slog.LevelWarn`), in a Go name or doc link ([*Error],
// Error.Reason), or negated ("no Warn", "never Warn", "not Warn", "nor
// Warn", "no longer Warn") is no statement. CHANGELOG.md is left out: it
// states what levels were.

var (
	// proseLevel is a level as prose writes it.
	proseLevel = regexp.MustCompile(`\b(Debug|Info|Warn|Error|DEBUG|INFO|WARN|ERROR)\b`)
	// logLevel is a level as a log line writes it.
	logLevel = regexp.MustCompile(`"level"\s*:\s*"(?i:(debug|info|warn|error))"|\b(DEBUG|INFO|WARN|ERROR)\b`)
	// clauseEnd is where prose is cut into clauses.
	clauseEnd = regexp.MustCompile(`[.;]\s|\s(?:and|but)\s`)
	// elided is a code span that names a message by its start.
	elided = regexp.MustCompile("`([^`]+?)\\s*(?:…|\\.\\.\\.)`")
	// cellEnd ends a table cell.
	cellEnd = regexp.MustCompile(`\|`)
	// negated ends the text just before a level that is not stated.
	negated = regexp.MustCompile(`\b(?:no|not|never|nor|no longer)\s+$`)
)

// A unit is a stretch of a document whose levels and messages go
// together: a paragraph or list item, a table row, or a line of code.
type unit struct {
	text  flowed // its lines trimmed and joined by spaces
	first int    // the document's line of its first line, from 1
	kind  unitKind
}

type unitKind int

const (
	paragraph unitKind = iota
	tableRow
	codeLine
)

// check reports each level d states beside a message that the code does
// not write that message at.
func (w levelsOf) check(d doc) []string {
	if d.path == changelogPath || len(w) == 0 {
		return nil
	}
	var problems []string
	for _, u := range docUnits(d) {
		for _, c := range w.claims(u) {
			if _, ok := w[c.msg][c.level]; ok {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s:%d: %q is stated as %s; the code writes it at %s",
				d.path, u.first+u.text.line(c.at)-1, c.msg, c.level, w.where(c.msg)))
		}
	}
	return problems
}

// where lists the levels the code writes msg at, with the first place of
// each.
func (w levelsOf) where(msg string) string {
	var out []string
	for l, at := range w[msg] {
		out = append(out, l+" ("+at+")")
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// docUnits cuts d into its units. A Go doc's lines lose their "//"; its
// indented lines are code.
func docUnits(d doc) []unit {
	var out []unit
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, unit{text: joined(cur), first: start, kind: paragraph})
		}
		cur = nil
	}
	fenced := false
	for i, line := range d.lines {
		code := fenced
		if d.markdown && strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			flush()
			continue
		}
		if !d.markdown {
			text, comment := strings.CutPrefix(line, "//")
			code, line = comment && strings.HasPrefix(text, "\t"), text
			if !comment {
				line = ""
			}
		}
		t := strings.TrimSpace(line)
		switch {
		case code || strings.HasPrefix(t, "|"):
			flush()
			kind := codeLine
			if !code {
				kind = tableRow
			}
			out = append(out, unit{text: joined([]string{t}), first: i + 1, kind: kind})
		case t == "" || strings.HasPrefix(t, "#"):
			flush()
		default:
			if listItem.MatchString(t) {
				flush()
			}
			if len(cur) == 0 {
				start = i + 1
			}
			cur = append(cur, t)
		}
	}
	flush()
	return out
}

// listItem starts a list item: "- ", "* ", "+ ", "1. ".
var listItem = regexp.MustCompile(`^(?:[-*+]|\d+\.)\s`)

func joined(lines []string) flowed {
	var f flowed
	for _, l := range lines {
		f.starts = append(f.starts, len(f.s))
		f.s += l + " "
	}
	return f
}

// A claim is a level a unit states of a message, at an offset of its text.
type claim struct {
	msg, level string
	at         int
}

// claims returns what u states.
func (w levelsOf) claims(u unit) []claim {
	switch u.kind {
	case codeLine:
		return w.pair(w.messages(u.text.s, 0), logLevels(u.text.s), false)
	case tableRow:
		return w.rowClaims(u.text.s)
	}
	var out []claim
	s := u.text.s
	from := 0
	for _, cut := range append(outsideCode(s, clauseEnd), []int{len(s), len(s)}) {
		clause := s[from:cut[0]]
		out = append(out, w.pair(w.messages(clause, from), proseLevels(clause), false)...)
		from = cut[1]
	}
	return out
}

// rowClaims returns what a table row states.
func (w levelsOf) rowClaims(row string) []claim {
	var msgs []claim
	var levels []string
	var msgCells, levelCells int
	from := 0
	for _, cut := range append(outsideCode(row, cellEnd), []int{len(row), len(row)}) {
		cell := row[from:cut[0]]
		if m := w.messages(cell, from); len(m) > 0 {
			msgs, msgCells = append(msgs, m...), msgCells+1
		}
		if l := proseLevels(cell); len(l) > 0 {
			levels, levelCells = append(levels, l...), levelCells+1
		}
		from = cut[1]
	}
	byOrder := msgCells == 1 && levelCells == 1 && len(msgs) > 1 && len(msgs) == len(levels)
	return w.pair(msgs, levels, byOrder)
}

// pair states levels of msgs: the i-th of the i-th when byOrder, else
// each of every one.
func (w levelsOf) pair(msgs []claim, levels []string, byOrder bool) []claim {
	var out []claim
	for i, m := range msgs {
		for j, l := range levels {
			if !byOrder || i == j {
				out = append(out, claim{msg: m.msg, level: l, at: m.at})
			}
		}
	}
	return out
}

// messages returns the messages text names, each at its offset plus base,
// in order.
func (w levelsOf) messages(text string, base int) []claim {
	var out []claim
	for msg := range w {
		for i := 0; ; {
			j := strings.Index(text[i:], msg)
			if j < 0 {
				break
			}
			out = append(out, claim{msg: msg, at: base + i + j})
			i += j + len(msg)
		}
	}
	for _, m := range elided.FindAllStringSubmatchIndex(text, -1) {
		start := text[m[2]:m[3]]
		for msg := range w {
			if len(start) >= 8 && strings.HasPrefix(msg, start) && msg != start {
				out = append(out, claim{msg: msg, at: base + m[0]})
			}
		}
	}
	slices.SortFunc(out, func(a, b claim) int { return a.at - b.at })
	return out
}

// proseLevels returns the levels a stretch of prose states, in order.
func proseLevels(text string) []string {
	text = codeSpan.ReplaceAllStringFunc(text, func(s string) string { return strings.Repeat(" ", len(s)) })
	var out []string
	for _, m := range proseLevel.FindAllStringIndex(text, -1) {
		before, after := text[:m[0]], text[m[1]:]
		if strings.HasSuffix(before, "*") || strings.HasSuffix(before, "[") || strings.HasSuffix(before, ".") ||
			strings.HasPrefix(after, "]") || strings.HasPrefix(after, "(") || dotName.MatchString(after) ||
			negated.MatchString(before) {
			continue
		}
		out = append(out, capitalized(text[m[0]:m[1]]))
	}
	return out
}

// dotName follows a Go name: Error.Reason.
var dotName = regexp.MustCompile(`^\.\w`)

// logLevels returns the levels a log line states.
func logLevels(line string) []string {
	var out []string
	for _, m := range logLevel.FindAllStringSubmatch(line, -1) {
		out = append(out, capitalized(m[1]+m[2]))
	}
	return out
}

func capitalized(level string) string {
	return strings.ToUpper(level[:1]) + strings.ToLower(level[1:])
}

// outsideCode returns the matches of re in s that are outside code spans.
func outsideCode(s string, re *regexp.Regexp) [][]int {
	spans := codeSpan.FindAllStringIndex(s, -1)
	var out [][]int
	for _, m := range re.FindAllStringIndex(s, -1) {
		if !slices.ContainsFunc(spans, func(sp []int) bool { return sp[0] <= m[0] && m[0] < sp[1] }) {
			out = append(out, m)
		}
	}
	return out
}
