// Command exported counts a package's exported names as pkg.go.dev lists
// them: its consts, vars, funcs and types, each type's consts, vars,
// constructors and methods, and each struct type's exported fields. Test
// files are left out. From the repo root:
//
//	go -C tools run ./exported ..          the root package
//	go -C tools run ./exported ../store    any other directory
package main

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: exported <directory>")
		os.Exit(2)
	}
	counts, err := count(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "exported:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(counts))
	for p := range counts {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		fmt.Println(p, counts[p])
	}
}

// count returns the exported names of each package in dir.
func count(dir string) (map[string]int, error) {
	fset := token.NewFileSet()
	notTest := func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }
	pkgs, err := parser.ParseDir(fset, dir, notTest, parser.ParseComments) //nolint:staticcheck // go/doc takes *ast.Package
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for name, p := range pkgs {
		d := doc.New(p, name, 0)
		n := values(d.Consts) + values(d.Vars) + len(d.Funcs)
		for _, t := range d.Types {
			n += 1 + values(t.Consts) + values(t.Vars) + len(t.Funcs) + len(t.Methods) + fields(t)
		}
		out[name] = n
	}
	return out, nil
}

func values(vs []*doc.Value) int {
	n := 0
	for _, v := range vs {
		for _, nm := range v.Names {
			if token.IsExported(nm) {
				n++
			}
		}
	}
	return n
}

func fields(t *doc.Type) int {
	n := 0
	for _, s := range t.Decl.Specs {
		ts, ok := s.(*ast.TypeSpec)
		if !ok {
			continue
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			continue
		}
		for _, f := range st.Fields.List {
			for _, nm := range f.Names {
				if nm.IsExported() {
					n++
				}
			}
		}
	}
	return n
}
