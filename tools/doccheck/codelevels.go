package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"iter"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// What the code writes: each log message of the library (a string constant
// or literal given to a logging call) and the levels it is written at, read
// from the library's Go source, every .go file but tests, testdata, tools/,
// bench/ and examples/. A logging call is one of
//
//   - zap's or slog's Debug, Info, Warn, Error (and slog's DebugContext and
//     the rest): the level is the method's, the message its argument;
//   - zap's Check(level, msg) and Log(level, msg), slog's Log(ctx, level,
//     msg) and LogAttrs: the level is zap's DebugLevel and the rest, or
//     slog's LevelDebug and the rest, written there, or a variable the
//     function sets to some of them (level := zap.DebugLevel; level =
//     zap.InfoLevel: both);
//   - a helper of the same package that hands its message (a string
//     parameter) or its level (a Level parameter) on to one of these, as
//     retryredis's warn does: a call of it with a constant is a logging
//     call.
//
// A constant whose name starts with msg is a message: one that no logging
// call writes at a level read this way is a problem, so that a change in
// how the code logs cannot leave the check reading nothing.

// levelsOf is, for each message, the levels it is written at ("Warn") and
// the first place each is.
type levelsOf map[string]map[string]string

// levelName is a level as the code names it: zap's WarnLevel, slog's
// LevelWarn.
var levelName = regexp.MustCompile(`^(?:(Debug|Info|Warn|Error)Level|Level(Debug|Info|Warn|Error))$`)

// msgConst is the name of a constant that holds a log message.
var msgConst = regexp.MustCompile(`^msg[A-Z0-9]`)

// librarySource reports whether p, a .go file, is the library's code.
func librarySource(p string) bool {
	if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || inTestdata(p) {
		return false
	}
	top, _, _ := strings.Cut(p, "/")
	return top != "tools" && top != "bench" && top != "examples"
}

// A pkgSrc is one directory's files, parsed, and its string constants.
type pkgSrc struct {
	dir    string
	files  []*ast.File
	consts map[string]string
}

// A helper is a function that logs what it is given: its message is the
// constant msg or its parameter msgArg, its level one of levels or its
// parameter levelArg (-1: not a parameter).
type helper struct {
	msg      string
	msgArg   int
	levels   []string
	levelArg int
}

// codeLevels reads the levels of the messages of the Go files paths of
// fsys, and reports each msg constant written at none.
func codeLevels(fsys fs.FS, paths []string) (levelsOf, []string, error) {
	fset := token.NewFileSet()
	pkgs := map[string]*pkgSrc{}
	var dirs []string
	for _, p := range paths {
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, nil, err
		}
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, fmt.Errorf("the library's source: %w", err)
		}
		dir := path.Dir(p)
		if pkgs[dir] == nil {
			pkgs[dir] = &pkgSrc{dir: dir, consts: map[string]string{}}
			dirs = append(dirs, dir)
		}
		pkgs[dir].files = append(pkgs[dir].files, f)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		pkgs[dir].readConsts()
	}
	a := &analysis{fset: fset, pkgs: pkgs, dirs: dirs, helpers: map[string][]helper{}, found: levelsOf{}}
	// Each pass finds the helpers one call further from zap or slog; a
	// chain longer than 5 is not this repository's.
	for range 5 {
		before := a.count()
		for _, dir := range dirs {
			a.pass(pkgs[dir])
		}
		if a.count() == before {
			break
		}
	}
	return a.found, a.unwritten(), nil
}

// readConsts finds the package's string constants: literals, and sums of
// literals and constants, in as many rounds as a sum needs.
func (p *pkgSrc) readConsts() {
	for changed := true; changed; {
		changed = false
		for spec := range constSpecs(p.files) {
			if len(spec.Names) != len(spec.Values) {
				continue // iota's, or a bad declaration
			}
			for i, name := range spec.Names {
				if _, done := p.consts[name.Name]; done {
					continue
				}
				if s, ok := p.constString(spec.Values[i]); ok {
					p.consts[name.Name], changed = s, true
				}
			}
		}
	}
}

// constSpecs yields the package-level const declarations of files.
func constSpecs(files []*ast.File) iter.Seq[*ast.ValueSpec] {
	return func(yield func(*ast.ValueSpec) bool) {
		for _, f := range files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					if !yield(spec.(*ast.ValueSpec)) {
						return
					}
				}
			}
		}
	}
}

// constString evaluates e when it is a string constant of the package.
func (p *pkgSrc) constString(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.Ident:
		s, ok := p.consts[e.Name]
		return s, ok
	case *ast.ParenExpr:
		return p.constString(e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, okx := p.constString(e.X)
			y, oky := p.constString(e.Y)
			return x + y, okx && oky
		}
	}
	return "", false
}

// unwritten reports the msg constants no logging call writes.
func (a *analysis) unwritten() []string {
	var problems []string
	for _, dir := range a.dirs {
		p := a.pkgs[dir]
		for spec := range constSpecs(p.files) {
			for _, name := range spec.Names {
				s, isString := p.consts[name.Name]
				if msgConst.MatchString(name.Name) && isString && len(a.found[s]) == 0 {
					problems = append(problems, fmt.Sprintf("%s: %s (%q): no logging call writes it at a level doccheck can read (see codelevels.go)",
						a.fset.Position(name.Pos()), name.Name, s))
				}
			}
		}
	}
	return problems
}
