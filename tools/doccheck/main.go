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
//     count, how they match, and the few exemptions).
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
	var problems []string
	for _, d := range docs {
		problems = append(problems, r.checkNames(d)...)
		problems = append(problems, r.checkPaths(d)...)
		problems = append(problems, r.checkLinks(fsys, d)...)
		if d.quotesNumbers {
			problems = append(problems, m.check(d)...)
		}
	}
	return append(problems, m.unused()...), nil
}
