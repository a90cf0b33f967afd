package main

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// resultsPath is where the measurements live: every number README.md and
// docs/ quote comes from it.
const resultsPath = "bench/RESULTS.md"

// changelogPath is the history: it states what was, so the checks of what
// is (the rules' range, the log levels) leave it out.
const changelogPath = "CHANGELOG.md"

// required are the documents every repository of this shape has; docs/*.md
// and the doc.go files are read as they are found.
var required = []string{"README.md", rulesPath, changelogPath}

// repo is what the documents may cite: the repository's files and
// directories, and the test functions its _test.go files declare; and the
// library's Go source, whose log messages they may name.
type repo struct {
	paths  map[string]bool // slash-separated, from the root; directories too
	funcs  map[string]bool // TestX, BenchmarkX, ExampleX, FuzzX
	source []string        // the library's .go files (librarySource), in walk order
}

// testFunc matches a declaration of a test, benchmark, example or fuzz
// target at the start of a line, as gofmt writes them.
var testFunc = regexp.MustCompile(`(?m)^func\s+((?:Test|Benchmark|Example|Fuzz)\w*)\s*\(`)

// scan walks fsys once. It leaves out .git; testdata's files are paths a
// document may name, but not test code.
func scan(fsys fs.FS) (*repo, error) {
	r := &repo{paths: map[string]bool{}, funcs: map[string]bool{}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		r.paths[p] = true
		if !d.IsDir() && librarySource(p) {
			r.source = append(r.source, p)
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") || inTestdata(p) {
			return nil
		}
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			r.funcs[string(m[1])] = true
		}
		return nil
	})
	return r, err
}

func inTestdata(p string) bool {
	return slices.Contains(strings.Split(path.Dir(p), "/"), "testdata")
}

// A doc is one document to check: its path from the root, its lines, and
// whether its numbers must come from RESULTS.md.
type doc struct {
	path          string
	lines         []string
	markdown      bool
	quotesNumbers bool // README.md and docs/*.md
}

// documents reads the documents to check, in a fixed order: the required
// ones, docs/*.md, then every doc.go.
func documents(fsys fs.FS, r *repo) ([]doc, error) {
	names := slices.Clone(required)
	more, err := fs.Glob(fsys, "docs/*.md")
	if err != nil {
		return nil, err
	}
	names = append(names, more...)
	var gofiles []string
	for p := range r.paths {
		if path.Base(p) == "doc.go" && !inTestdata(p) {
			gofiles = append(gofiles, p)
		}
	}
	slices.Sort(gofiles)
	var docs []doc
	for _, name := range append(names, gofiles...) {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("a document: %w", err)
		}
		md := strings.HasSuffix(name, ".md")
		docs = append(docs, doc{
			path:          name,
			lines:         strings.Split(string(src), "\n"),
			markdown:      md,
			quotesNumbers: name == "README.md" || strings.HasPrefix(name, "docs/"),
		})
	}
	return docs, nil
}

// exists reports whether p, as a document at from names it, is a file or
// directory of the repository: from the root, or from from's directory.
func (r *repo) exists(from, p string) bool {
	p = strings.TrimSuffix(p, "/")
	return r.paths[path.Clean(p)] || r.paths[path.Join(path.Dir(from), p)]
}
