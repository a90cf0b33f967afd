// Command funclen lists the functions longer than -max lines (80 unless
// told), counted from the func keyword to the closing brace, in the .go
// files under the given directories (the current one unless told), and,
// with -maxfile, the files longer than that. A file has no cap by default:
// it is as long as its one idea (STYLE.md); a function's length is the
// limit worth keeping, and a cap on files split them mechanically. Test files are left out
// unless -tests; testdata, vendor and directories whose names begin with "."
// or "_" always are, as the go command leaves them out. It prints one line
// per function, longest first, then one per file, longest first, and
// nothing when everything fits. It exits 1 when it prints anything, 2 when
// it cannot read a file. From the repo root:
//
//	go -C tools run ./funclen ..           the library, its kit and examples
//	go -C tools run ./funclen -tests ..    tests too (as CI runs it)
package main

import (
	"bytes"
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
	maxFile := flag.Int("maxfile", 0, "the longest a file may be, in lines; 0: no cap")
	tests := flag.Bool("tests", false, "include _test.go files")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	var found, files []long
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != dir && skipDir(d.Name()) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || !*tests && strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if n := lines(src); *maxFile > 0 && n > *maxFile {
				files = append(files, long{where: path, name: "file", lines: n})
			}
			f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
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
	longest := func(a, b long) int { return cmp.Or(cmp.Compare(b.lines, a.lines), cmp.Compare(a.where, b.where)) }
	slices.SortFunc(found, longest)
	slices.SortFunc(files, longest)
	for _, l := range slices.Concat(found, files) {
		fmt.Printf("%s: %s %d lines\n", l.where, l.name, l.lines)
	}
	if len(found)+len(files) > 0 {
		os.Exit(1)
	}
}

// skipDir reports whether the walk leaves out a directory of this name: the
// go command ignores testdata and names that begin with "." or "_" (.git
// among them), and vendor holds code that is not ours.
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// lines is the number of lines of src, as wc -l counts them, plus a last line
// that lacks its newline.
func lines(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
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
