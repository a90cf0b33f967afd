package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// rulesPath is the spec: its "## R<n>." headings are the rules there are.
const rulesPath = "RULES.md"

var (
	// ruleHeading is a rule's heading in RULES.md: "## R17. Cooldown".
	ruleHeading = regexp.MustCompile(`^## R(\d+)\.`)
	// ruleRange is a range of the rules from the first, as the documents
	// write one ("R1 to R25", "R1-R25", "R1–R25", "R1 through R25"), over a
	// line break too; its end is the number.
	ruleRange = regexp.MustCompile(`\bR1\s*(?:to|through|-|–|—)\s*R(\d+)\b`)
	// ruleCited is a rule cited by number: "(R4)", "R17's".
	ruleCited = regexp.MustCompile(`\bR(\d+)\b`)
)

// rules returns the numbers of the rules RULES.md defines, from its
// headings, and the last of them (0 when it defines none).
func rules(docs []doc) (map[int]bool, int) {
	defined := map[int]bool{}
	last := 0
	for _, d := range docs {
		if d.path != rulesPath {
			continue
		}
		for _, line := range prose(d) {
			if m := ruleHeading.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				defined[n] = true
				last = max(last, n)
			}
		}
	}
	return defined, last
}

// checkRules reports, in d, a range of the rules from R1 that does not end
// at RULES.md's last rule, and a rule cited that RULES.md does not define.
// CHANGELOG.md is history: "R1 to R16" was once every rule there was.
func checkRules(d doc, defined map[int]bool, last int) []string {
	if d.path == changelogPath {
		return nil
	}
	var problems []string
	text := proseText(d)
	for _, m := range ruleRange.FindAllStringSubmatchIndex(text.s, -1) {
		n, _ := strconv.Atoi(text.s[m[2]:m[3]])
		if n != last {
			problems = append(problems, fmt.Sprintf("%s:%d: %s: %s's rules run R1 to R%d",
				d.path, text.line(m[0]), strings.Join(strings.Fields(text.s[m[0]:m[1]]), " "), rulesPath, last))
		}
	}
	for i, line := range prose(d) {
		for _, m := range ruleCited.FindAllStringSubmatch(line, -1) {
			if n, _ := strconv.Atoi(m[1]); !defined[n] {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no rule of %s has that number (its last is R%d)",
					d.path, i+1, m[0], rulesPath, last))
			}
		}
	}
	return problems
}

// A flowed text is a document's prose as one string, with what its lines
// were: a Go doc comment's "//" taken off, so that a phrase may run on
// over a line break.
type flowed struct {
	s      string
	starts []int // the offset in s of each line's start
}

// proseText returns d's prose (code blanked, as prose does) as a flowed
// text, its lines joined by newlines.
func proseText(d doc) flowed {
	var b strings.Builder
	var starts []int
	for _, line := range prose(d) {
		if !d.markdown {
			line = strings.TrimPrefix(strings.TrimPrefix(line, "//"), " ")
		}
		starts = append(starts, b.Len())
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return flowed{s: b.String(), starts: starts}
}

// line returns the line, from 1, of the offset off.
func (f flowed) line(off int) int {
	n := 0
	for n < len(f.starts) && f.starts[n] <= off {
		n++
	}
	return n
}
