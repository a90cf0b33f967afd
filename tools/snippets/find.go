package main

import (
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

// required are the documents every repository of this shape has; the
// others (docs/*.md, retryredis/README.md, examples/*/README.md) are read
// as they are found.
var required = []string{"README.md"}

// globs are the documents whose Go snippets must compile, after README.md.
var globs = []string{"docs/*.md", "retryredis/README.md", "examples/*/README.md"}

// How a snippet is checked.
type mode int

const (
	compiled  mode = iota // compiled, as a file or in the scaffold
	noCompile             // fenced as Go, but marked not to compile
	excerpt               // marked as lines of a test or Example: checked against it
)

// A snippet is one ```go block of a document.
type snippet struct {
	file string // the document, slash-separated, from the root
	line int    // the line of the opening fence, from 1
	code string // the lines between the fences, each with its newline
	mode mode
	from string // excerpt: the test function it is cut from
}

// where is the snippet's place, as the tool prints it.
func (s snippet) where() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

// first is the doc's line of the snippet's first code line.
func (s snippet) first() int { return s.line + 1 }

// marker is the comment that, on the last non-blank line before a ```go
// fence, says how the block is checked instead of being compiled:
//
//	<!-- snippet: no-compile -->       not compiled (pseudo-code): listed
//	<!-- snippet: from TestSummarize --> its lines are lines of that test
//	                                       or Example, in order (excerpt.go)
var marker = regexp.MustCompile(`^<!--\s*snippet:\s*(no-compile|from\s+((?:Test|Example)\w*))\s*-->$`)

// documents returns the paths of the documents to read, in a fixed order.
func documents(fsys fs.FS) ([]string, error) {
	names := slices.Clone(required)
	for _, r := range required {
		if _, err := fs.Stat(fsys, r); err != nil {
			return nil, fmt.Errorf("a document: %w", err)
		}
	}
	for _, g := range globs {
		more, err := fs.Glob(fsys, g)
		if err != nil {
			return nil, err
		}
		names = append(names, more...)
	}
	return names, nil
}

// find returns every ```go block of the documents, in their order.
func find(fsys fs.FS) ([]snippet, error) {
	names, err := documents(fsys)
	if err != nil {
		return nil, err
	}
	var all []snippet
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		found, err := blocks(name, string(src))
		if err != nil {
			return nil, err
		}
		all = append(all, found...)
	}
	return all, nil
}

// blocks returns the ```go blocks of one markdown document. A fence is a
// line that starts, after any indentation, with three backticks; the
// block's language is the first word after them. An indented block's lines
// lose the fence's indentation. A marker that is not followed by a ```go
// block is an error, as is a block left open.
func blocks(name, src string) ([]snippet, error) {
	lines := strings.Split(src, "\n")
	var out []snippet
	lastText, lastLine := "", 0 // the last non-blank line outside a block
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(trimmed, "```") {
			if trimmed != "" {
				if err := strayMarker(name, lastText, lastLine); err != nil {
					return nil, err
				}
				lastText, lastLine = trimmed, i+1
			}
			continue
		}
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		lang, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), " ")
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: a code block that is never closed", name, i+1)
		}
		if lang == "go" {
			s := snippet{file: name, line: i + 1, code: unindent(lines[i+1:end], indent)}
			if m := marker.FindStringSubmatch(lastText); m != nil {
				s.mode, s.from = noCompile, m[2]
				if m[2] != "" {
					s.mode = excerpt
				}
			} else if strings.HasPrefix(lastText, "<!-- snippet") {
				return nil, fmt.Errorf("%s:%d: %s: not a snippet marker (no-compile, or from TestX or ExampleX)", name, lastLine, lastText)
			}
			out = append(out, s)
		} else if err := strayMarker(name, lastText, lastLine); err != nil {
			return nil, err
		}
		lastText, lastLine = "", 0
		i = end
	}
	return out, strayMarker(name, lastText, lastLine)
}

// strayMarker reports a marker that does not sit right above a ```go block.
func strayMarker(name, text string, line int) error {
	if marker.MatchString(text) || strings.HasPrefix(text, "<!-- snippet") {
		return fmt.Errorf("%s:%d: %s: a snippet marker must be the last line before a ```go block", name, line, text)
	}
	return nil
}

func unindent(lines []string, indent int) string {
	var b strings.Builder
	for _, l := range lines {
		n := 0
		for n < indent && n < len(l) && l[n] == ' ' {
			n++
		}
		b.WriteString(l[n:])
		b.WriteByte('\n')
	}
	return b.String()
}
