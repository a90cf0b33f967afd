// Command doccheck checks that the repository's documents cite only what
// exists and quote only what was measured (issue 24). It reads README.md,
// RULES.md, CHANGELOG.md, docs/*.md and every doc.go, and reports, one line
// each, with the file and line:
//
//   - a test, benchmark, example or fuzz target named (TestX, BenchmarkX,
//     ExampleX, FuzzX, in backticks or not) that no _test.go file of the
//     repository declares, in any module; a name the document declares in
//     its own code (func TestX( in a code block) is its own, not a citation;
//   - a repository file named (a path ending .go, .md, .sh, .mod, .sum,
//     .lua, .txt, .yml, .yaml, .json or .tsv, such as cooldown_test.go or
//     bench/RESULTS.md) that exists neither from the repository's root nor
//     from the document's directory; a name inside the text of a link to
//     an absolute URL is another repository's file, not checked;
//   - a relative link whose file does not exist, or whose #anchor names no
//     heading of the markdown file it points to;
//   - in README.md and docs/*.md only, a number quoted as a measurement
//     that bench/RESULTS.md does not hold (see numbers.go: which numbers
//     count, how they match, and the few exemptions);
//   - in every document but CHANGELOG.md (history), a range of the rules
//     from R1 ("R1 to R24", "R1-R24") that does not end at the last rule
//     RULES.md defines (its "## R<n>." headings), and a rule cited that it
//     does not define (rules.go);
//   - in every document but CHANGELOG.md, a log level stated beside one of
//     the library's log messages ("a Warn entry `llm rate limit — waiting
//     for cooldown`") that the library's Go source does not write that
//     message at; and a msg constant of that source that doccheck finds
//     written at no level (levels.go says what "beside" is, codelevels.go
//     how the source is read).
//
// It prints nothing when every document holds, and exits 1 when it prints
// anything, 2 when it cannot read the repository. From the repo root (as CI
// runs it):
//
//	go -C tools run ./doccheck ..
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: doccheck [repo root, default .]")
	}
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	problems, err := check(os.DirFS(root), exemptions)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// check runs every check over the repository fsys and returns the problems,
// in the order of the documents and their lines. An exemption no document
// uses is a problem too, so that the list stays as short as it can be.
func check(fsys fs.FS, exempt []exemption) ([]string, error) {
	r, err := scan(fsys)
	if err != nil {
		return nil, err
	}
	docs, err := documents(fsys, r)
	if err != nil {
		return nil, err
	}
	results, err := fs.ReadFile(fsys, resultsPath)
	if err != nil {
		return nil, fmt.Errorf("the numbers' source: %w", err)
	}
	m := newMeasured(string(results), exempt)
	written, unwritten, err := codeLevels(fsys, r.source)
	if err != nil {
		return nil, err
	}
	var problems []string
	defined, last := rules(docs)
	if last == 0 {
		problems = append(problems, rulesPath+": no rule heading (## R1. ...): the rules' ranges and citations cannot be checked")
	}
	for _, d := range docs {
		problems = append(problems, r.checkNames(d)...)
		problems = append(problems, r.checkPaths(d)...)
		problems = append(problems, r.checkLinks(fsys, d)...)
		if last > 0 {
			problems = append(problems, checkRules(d, defined, last)...)
		}
		problems = append(problems, written.check(d)...)
		if d.quotesNumbers {
			problems = append(problems, m.check(d)...)
		}
	}
	problems = append(problems, unwritten...)
	return append(problems, m.unused()...), nil
}
