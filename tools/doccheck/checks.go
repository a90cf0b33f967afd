package main

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode"
)

var (
	// citedName is a test, benchmark, example or fuzz target's name: the
	// prefix, then what go test requires after it (not a lower-case
	// letter), so that "Testing" and "Examples" are words, not names.
	citedName = regexp.MustCompile(`\b(?:Test|Benchmark|Example|Fuzz)[A-Z0-9_]\w*`)
	// declaredName is one the document declares in its own code.
	declaredName = regexp.MustCompile(`func\s+((?:Test|Benchmark|Example|Fuzz)\w*)\s*\(`)
	// citedPath is a file of a kind the repository holds, with the
	// directories before it.
	citedPath = regexp.MustCompile(`(?:^|[^\w./-])((?:[\w.-]+/)*[\w.-]+\.(?:go|md|sh|mod|sum|lua|txt|yml|yaml|json|tsv))\b`)
	// link is a markdown link: its text and its target.
	link = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// url is an address written out, or a reference definition's.
	url = regexp.MustCompile(`(?:https?|mailto):[^\s)>\]]+`)
)

// checkNames reports each name d cites that no _test.go file declares.
func (r *repo) checkNames(d doc) []string {
	own := map[string]bool{}
	for _, line := range d.lines {
		for _, m := range declaredName.FindAllStringSubmatch(line, -1) {
			own[m[1]] = true
		}
	}
	var problems []string
	for i, line := range d.lines {
		for _, name := range citedName.FindAllString(url.ReplaceAllString(line, ""), -1) {
			if !r.funcs[name] && !own[name] {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no _test.go file declares func %s", d.path, i+1, name, name))
			}
		}
	}
	return problems
}

// checkPaths reports each repository file d names, outside its code
// blocks, that does not exist.
func (r *repo) checkPaths(d doc) []string {
	var problems []string
	for i, line := range prose(d) {
		line = link.ReplaceAllStringFunc(line, func(l string) string {
			m := link.FindStringSubmatch(l)
			if absolute(m[2]) {
				return " " // another repository's file: its name is not ours to check
			}
			return " " + m[1] + " " // the target is checkLinks'
		})
		for _, m := range citedPath.FindAllStringSubmatch(url.ReplaceAllString(line, " "), -1) {
			if !r.exists(d.path, m[1]) {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file", d.path, i+1, m[1]))
			}
		}
	}
	return problems
}

// checkLinks reports each relative link of a markdown d whose file does not
// exist or whose anchor names no heading there.
func (r *repo) checkLinks(fsys fs.FS, d doc) []string {
	if !d.markdown {
		return nil
	}
	var problems []string
	for i, line := range prose(d) {
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			target := m[2]
			if absolute(target) {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			where := d.path
			if file != "" {
				where = path.Join(path.Dir(d.path), file)
				if !r.paths[strings.TrimSuffix(where, "/")] {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file", d.path, i+1, target))
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(where, ".md") {
				continue
			}
			if src, err := fs.ReadFile(fsys, where); err != nil || !anchors(string(src))[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no heading #%s in %s", d.path, i+1, target, anchor, where))
			}
		}
	}
	return problems
}

func absolute(target string) bool {
	return strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "//")
}

// prose returns d's lines with its code blocks blanked: fenced blocks of a
// markdown file, and the indented code of a Go doc comment ("//" and a
// tab). Line numbers are kept.
func prose(d doc) []string {
	out := make([]string, len(d.lines))
	fenced := false
	for i, line := range d.lines {
		if d.markdown && strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !d.markdown && strings.HasPrefix(line, "//\t") {
			continue
		}
		out[i] = line
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of a markdown
// file: the heading's text lower-cased, with every character but letters,
// digits, spaces, hyphens and underscores removed and each space made a
// hyphen; a heading met again gets -1, -2, and so on.
func anchors(src string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range prose(doc{lines: strings.Split(src, "\n"), markdown: true}) {
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, c := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case c == ' ':
				b.WriteByte('-')
			case c == '-' || c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c):
				b.WriteRune(c)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}
