// Command funclen lists the functions longer than -max lines (80 unless
// told), counted from the func keyword to the closing brace, in the .go
// files under the given directories (the current one unless told).
// Test files are left out unless -tests; testdata and vendor always are.
// It prints one line per function, longest first, and nothing when every
// function fits. From the repo root:
//
//	go -C tools run ./funclen ..           the library, its kit and examples
//	go -C tools run ./funclen -tests ..    tests too
package main

import (
	"cmp"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

type long struct {
	where string
	name  string
	lines int
}

func main() {
	maxLines := flag.Int("max", 80, "the longest a function may be, in lines")
	tests := flag.Bool("tests", false, "include _test.go files")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	var found []long
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); n == "testdata" || n == "vendor" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || !*tests && strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
				if n := end.Line - start.Line + 1; n > *maxLines {
					found = append(found, long{where: fmt.Sprintf("%s:%d", path, start.Line), name: name(fn), lines: n})
				}
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
	}
	slices.SortFunc(found, func(a, b long) int { return cmp.Compare(b.lines, a.lines) })
	for _, l := range found {
		fmt.Printf("%s: %s %d lines\n", l.where, l.name, l.lines)
	}
}

// name is fn's name, with its receiver's type for a method: (*T).m.
func name(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if idx, ok := t.(*ast.IndexExpr); ok { // a generic receiver: T[P]
		t = idx.X
	}
	star := ""
	if p, ok := t.(*ast.StarExpr); ok {
		star, t = "*", p.X
	}
	if idx, ok := t.(*ast.IndexExpr); ok {
		t = idx.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + star + id.Name + ")." + fn.Name.Name
	}
	return fn.Name.Name
}
