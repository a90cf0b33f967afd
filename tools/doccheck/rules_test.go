package main

import (
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	d := doc{path: rulesPath, markdown: true, lines: strings.Split(
		"# The rules\n## R1. Drop-in\n### R9. a subsection, not a rule\n```md\n## R30. in a code block\n```\n## R2. What is retried\n## R25. A provider down\n", "\n")}
	defined, last := rules([]doc{{path: "README.md", markdown: true, lines: []string{"## R40. not RULES.md"}}, d})
	if last != 25 || len(defined) != 3 || !defined[1] || !defined[2] || !defined[25] {
		t.Errorf("rules = %v, %d; want R1, R2, R25 and 25", defined, last)
	}
}

func TestCheckRules(t *testing.T) {
	defined := map[int]bool{}
	for n := 1; n <= 25; n++ {
		defined[n] = true
	}
	tests := []struct {
		name, path, src string
		want            []string // each problem holds this, in order
	}{
		{"the range as it is", "README.md", "the rules R1 to R25 the docs cite; R2-R9, R10 to R24, R17's hold\n", nil},
		{"a stale range", "README.md", "intro\nthe rules R1 to R24 the docs cite\n", []string{"README.md:2: R1 to R24: RULES.md's rules run R1 to R25"}},
		{"every spelling", "docs/a.md", "R1-R24, R1–R24, R1 — R20, R1 through R3\n", []string{
			"docs/a.md:1: R1-R24:", "docs/a.md:1: R1–R24:", "docs/a.md:1: R1 — R20:", "docs/a.md:1: R1 through R3:"}},
		{"over a line break", "docs/a.md", "as the rules R1 to\nR24 say\n", []string{"docs/a.md:1: R1 to R24:"}},
		{"past the last rule", "docs/a.md", "R1 to R27\n", []string{"docs/a.md:1: R1 to R27:", "R27: no rule of RULES.md has that number (its last is R25)"}},
		{"a rule cited that is not defined", "docs/a.md", "\n(R26) streams, and R9\n", []string{"docs/a.md:2: R26: no rule of RULES.md"}},
		{"a code block is not checked", "docs/a.md", "```text\nR1 to R24, R26\n```\n", nil},
		{"a Go doc", "doc.go", "// Package p.\n//\n// set down as rules R1 to\n// R24 in [RULES.md]\npackage p\n", []string{"doc.go:3: R1 to R24:"}},
		{"a Go doc's code is not checked", "doc.go", "// Package p.\n//\n//\tR1 to R24\npackage p\n", nil},
		{"the changelog is history", changelogPath, "the zap log and the `Observer` (R1 to R16), R26\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := doc{path: tt.path, lines: strings.Split(tt.src, "\n"), markdown: strings.HasSuffix(tt.path, ".md")}
			got := checkRules(d, defined, 25)
			if len(got) != len(tt.want) {
				t.Fatalf("checkRules = %q, want %d problems like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to hold %q", i, got[i], w)
				}
			}
		})
	}
}
