package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// testFunc matches a test's or an Example's declaration, as gofmt writes it.
var testFunc = regexp.MustCompile(`(?m)^func\s+((?:Test|Example)\w*)\s*\(`)

// testFuncs returns, for each test and Example of the repository's
// _test.go files (testdata, vendor and directories whose names begin with
// "." or "_" left out), the files that declare it.
func testFuncs(fsys fs.FS) (map[string][]string, error) {
	funcs := map[string][]string{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (d.Name() == "testdata" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			funcs[string(m[1])] = append(funcs[string(m[1])], p)
		}
		return nil
	})
	return funcs, err
}

// checkExcerpt checks a snippet marked as cut from a test or an Example
// (go test compiles and runs it): the function is declared in exactly one
// _test.go file, and each line of the snippet that holds code is a line of
// the function, in order. Lines compare by their Go tokens, so spacing and
// comments do not count; a line of the function may be left out. It
// returns the file the function is in.
func checkExcerpt(fsys fs.FS, s snippet, funcs map[string][]string) (string, error) {
	files := funcs[s.from]
	switch {
	case len(files) == 0:
		return "", fmt.Errorf("no _test.go file declares func %s", s.from)
	case len(files) > 1:
		return "", fmt.Errorf("func %s is declared in %s: cut the snippet from a function of one name", s.from, strings.Join(files, ", "))
	}
	src, err := fs.ReadFile(fsys, files[0])
	if err != nil {
		return "", err
	}
	body, err := funcSource(files[0], src, s.from)
	if err != nil {
		return "", err
	}
	var have []string
	for _, l := range strings.Split(body, "\n") {
		have = append(have, tokens(l))
	}
	j := 0
	for k, l := range strings.Split(strings.TrimSuffix(s.code, "\n"), "\n") {
		want := tokens(l)
		if want == "" {
			continue
		}
		at := slices.Index(have[j:], want)
		if at < 0 {
			return "", fmt.Errorf("%s:%d: not a line of %s (%s) after the lines above it: %s", s.file, s.first()+k, s.from, files[0], strings.TrimSpace(l))
		}
		j += at + 1
	}
	return files[0], nil
}

// funcSource is the source of the function name declares in file.
func funcSource(file string, src []byte, name string) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path.Base(file), src, parser.SkipObjectResolution)
	if err != nil {
		return "", err
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == name {
			return string(src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset]), nil
		}
	}
	return "", fmt.Errorf("%s: no func %s", file, name)
}

// tokens is a line's Go tokens, spaced by one blank: no comments, no
// semicolons the scanner inserts.
func tokens(line string) string {
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(line)), []byte(line), func(token.Position, string) {}, 0)
	var out []string
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue
		}
		if lit == "" {
			lit = tok.String()
		}
		out = append(out, lit)
	}
	return strings.Join(out, " ")
}
