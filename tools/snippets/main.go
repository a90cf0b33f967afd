// Command snippets compiles every Go snippet of the repository's documents
// (issue 32): each ```go block of README.md, docs/*.md,
// retryredis/README.md and examples/*/README.md, against the repository's
// current code, so that a snippet a user copies builds.
//
// A snippet is compiled in one of two ways (scaffold.go has the details):
//
//   - a whole file, one whose first line of code is a package clause, is
//     compiled as it is;
//   - any other is a fragment: the body of a function of its own, whose
//     parameters are the prelude's free names it uses (ctx, log, req, hc,
//     addr, key, params: the list is in scaffold.go, and an entry no
//     snippet uses fails the run), in a file whose imports come from a
//     fixed table of package names (retryhttp, retryhttptest, retryredis,
//     store, zap, redis, http, context, time, errors, fmt, slog, the SDKs'
//     openai, anthropic, option, genai, and otel, otelhttp), with "_ =
//     name" after each statement that declares variables. A fragment of
//     examples/<x>/README.md is compiled in a copy of that example's
//     package, so that it may use the example's names.
//
// Each compiled snippet is a package of a temp module in a temp workspace
// that uses the repository's modules (its go.work, paths made absolute), so
// that every import resolves at the version the repository builds with:
// one go vet of them all, whose messages are mapped back to the document's
// file:line by a //line comment. It needs no network but the Go module
// proxy, and none once the module cache is warm.
//
// A snippet that is not Go meant to compile is fenced as something else
// (```text), or, sparingly, has on the last non-blank line before its
// fence:
//
//	<!-- snippet: no-compile -->          not compiled, and listed as such
//	<!-- snippet: from TestSummarize -->  an excerpt of a test or Example,
//	                                       which go test compiles: each of
//	                                       its lines of code is a line of
//	                                       that function, in order
//
// It prints one line per snippet, at its opening fence (ok, not compiled,
// or FAIL with the compiler's or vet's messages at the document's lines),
// then a count; it exits 1 when a snippet fails, 2 when it cannot run. From
// the repo root (as CI runs it):
//
//	go -C tools run ./snippets ..
package main

import (
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	keep := flag.Bool("keep", false, "keep the temp workspace (the generated files) and print its path")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: snippets [-keep] [repo root, default .]")
		flag.PrintDefaults()
	}
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	start := time.Now()
	root, err := filepath.Abs(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "snippets:", err)
		os.Exit(2)
	}
	r, err := check(root, os.DirFS(root), *keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "snippets:", err)
		os.Exit(2)
	}
	r.problems = append(r.problems, unusedPrelude(r.used)...)
	if r.print(os.Stdout, time.Since(start)) {
		os.Exit(1)
	}
}

// A result is what became of one snippet.
type result struct {
	s    snippet
	fail []string // the messages, at the document's lines; none: ok
	note string   // how it was checked, when it was not compiled
}

// A report is what became of every snippet.
type report struct {
	results  []result
	problems []string // about no one snippet
	used     []given  // the prelude entries some snippet used
}

// check finds and checks every snippet of the repository at root (its
// absolute path; fsys reads it); keep keeps the temp workspace.
func check(root string, fsys fs.FS, keep bool) (*report, error) {
	snippets, err := find(fsys)
	if err != nil {
		return nil, err
	}
	r := &report{results: make([]result, len(snippets))}
	b, err := newBuild(root, fsys)
	if err != nil {
		return nil, err
	}
	if keep {
		fmt.Println("kept:", b.tmp)
	} else {
		defer b.close()
	}
	var funcs map[string][]string
	for i, s := range snippets {
		r.results[i].s = s
		switch s.mode {
		case noCompile:
			r.results[i].note = "not compiled (<!-- snippet: no-compile -->)"
		case excerpt:
			if funcs == nil {
				if funcs, err = testFuncs(fsys); err != nil {
					return nil, err
				}
			}
			file, err := checkExcerpt(fsys, s, funcs)
			if err != nil {
				r.results[i].fail = []string{err.Error()}
			} else {
				r.results[i].note = fmt.Sprintf("an excerpt of %s (%s), which go test compiles", s.from, file)
			}
		default:
			used, err := b.add(i, s)
			if err != nil {
				r.results[i].fail = []string{strings.ReplaceAll(err.Error(), root+string(filepath.Separator), "")}
			}
			r.used = append(r.used, used...)
		}
	}
	bySnippet, other, err := b.vet()
	if err != nil {
		return nil, err
	}
	for i, msgs := range bySnippet {
		r.results[i].fail = append(r.results[i].fail, msgs...)
	}
	r.problems = other
	return r, nil
}

// unusedPrelude reports each prelude entry no snippet used.
func unusedPrelude(used []given) []string {
	var problems []string
	for _, g := range prelude {
		if !slices.Contains(used, g) {
			problems = append(problems, fmt.Sprintf("prelude: %s: no snippet uses it; take it out of scaffold.go", g))
		}
	}
	return problems
}

// print writes one line per snippet and a count, and reports whether any
// snippet failed or any problem was found.
func (r *report) print(w io.Writer, took time.Duration) bool {
	var ok, notCompiled, excerpts, failed int
	files := map[string]bool{}
	for _, res := range r.results {
		files[res.s.file] = true
		switch {
		case len(res.fail) > 0:
			failed++
			fmt.Fprintf(w, "%s: FAIL: %s\n", res.s.where(), strings.Join(res.fail, "; "))
		case res.s.mode == noCompile:
			notCompiled++
			fmt.Fprintf(w, "%s: %s\n", res.s.where(), res.note)
		case res.s.mode == excerpt:
			excerpts++
			fmt.Fprintf(w, "%s: ok: %s\n", res.s.where(), res.note)
		default:
			ok++
			fmt.Fprintf(w, "%s: ok\n", res.s.where())
		}
	}
	for _, p := range r.problems {
		fmt.Fprintln(w, "FAIL:", p)
	}
	fmt.Fprintf(w, "snippets: %d in %d documents: %d compiled, %d excerpts of tests, %d not compiled, %d failed (%.1f s)\n",
		len(r.results), len(files), ok, excerpts, notCompiled, failed, took.Seconds())
	return failed > 0 || len(r.problems) > 0
}
