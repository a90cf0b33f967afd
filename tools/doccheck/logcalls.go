package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"regexp"
	"slices"
)

// An analysis is one read of the library's logging calls.
type analysis struct {
	fset    *token.FileSet
	pkgs    map[string]*pkgSrc
	dirs    []string            // pkgs' keys, sorted
	helpers map[string][]helper // by the package's directory, a dot and the function's name
	found   levelsOf
}

// count is how much the analysis knows: a pass that adds nothing is the last.
func (a *analysis) count() int {
	n := 0
	for _, hs := range a.helpers {
		n += len(hs)
	}
	for _, l := range a.found {
		n += len(l)
	}
	return n
}

// A fn is the function a call is in.
type fn struct {
	pkg      *pkgSrc
	name     string
	params   map[string]param
	levelArg int // its first Level parameter; -1: none
	body     *ast.BlockStmt
}

// A param is a parameter of a fn: its place, and whether it is a string
// (a message) or a Level.
type param struct {
	index    int
	str, lvl bool
}

func newFn(p *pkgSrc, fd *ast.FuncDecl) *fn {
	f := &fn{pkg: p, name: fd.Name.Name, params: map[string]param{}, levelArg: -1, body: fd.Body}
	i := 0
	for _, field := range fd.Type.Params.List {
		str := isIdent(field.Type, "string")
		lvl := isIdent(field.Type, "Level")
		if sel, ok := field.Type.(*ast.SelectorExpr); ok {
			lvl = sel.Sel.Name == "Level"
		}
		if len(field.Names) == 0 {
			i++
		}
		for _, name := range field.Names {
			f.params[name.Name] = param{index: i, str: str, lvl: lvl}
			if lvl && f.levelArg < 0 {
				f.levelArg = i
			}
			i++
		}
	}
	return f
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// pass reads every call of every function of p.
func (a *analysis) pass(p *pkgSrc) {
	for _, file := range p.files {
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			f := newFn(p, fd)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					a.call(f, call)
				}
				return true
			})
		}
	}
}

// levelMethod is a logging method named for its level: zap's and slog's
// Warn, zap's sugared Warnw, slog's WarnContext.
var levelMethod = regexp.MustCompile(`^(Debug|Info|Warn|Error)(w|Context)?$`)

// call reads one call in f: a logging call, or a call of a helper.
func (a *analysis) call(f *fn, call *ast.CallExpr) {
	name := calleeName(call.Fun)
	switch m := levelMethod.FindStringSubmatch(name); {
	case m != nil:
		msgAt := 0
		if m[2] == "Context" {
			msgAt = 1
		}
		a.logs(f, call, []string{m[1]}, -1, arg(call, msgAt))
	case name == "Check" || name == "Log" || name == "LogAttrs":
		at := 0 // zap: Check(level, msg), Log(level, msg)
		if levels, p := f.level(arg(call, 0)); len(levels) == 0 && p < 0 {
			at = 1 // slog: Log(ctx, level, msg)
		}
		levels, p := f.level(arg(call, at))
		a.logs(f, call, levels, p, arg(call, at+1))
	default:
		for _, h := range a.helpers[f.pkg.dir+"."+name] {
			levels, p := h.levels, -1
			if h.levelArg >= 0 {
				levels, p = f.level(arg(call, h.levelArg))
			}
			msg, ok, mp := h.msg, h.msgArg < 0, -1
			if h.msgArg >= 0 {
				msg, ok, mp = a.message(f, arg(call, h.msgArg))
			}
			a.note(f, call.Pos(), levels, p, msg, ok, mp)
		}
	}
}

// logs notes a call that writes msgExpr at levels, or at f's parameter p.
func (a *analysis) logs(f *fn, call *ast.CallExpr, levels []string, p int, msgExpr ast.Expr) {
	msg, ok, mp := a.message(f, msgExpr)
	a.note(f, call.Pos(), levels, p, msg, ok, mp)
}

// note records a message (msg when ok, else f's parameter mp) written at
// levels (or f's parameter p): a finding when both are known, else f is
// a helper.
func (a *analysis) note(f *fn, pos token.Pos, levels []string, p int, msg string, ok bool, mp int) {
	if !ok && mp < 0 || len(levels) == 0 && p < 0 {
		return
	}
	if ok && len(levels) > 0 {
		where := a.fset.Position(pos)
		for _, l := range levels {
			if a.found[msg] == nil {
				a.found[msg] = map[string]string{}
			}
			if _, seen := a.found[msg][l]; !seen {
				a.found[msg][l] = fmt.Sprintf("%s:%d", where.Filename, where.Line)
			}
		}
		return
	}
	h := helper{msg: msg, msgArg: mp, levels: levels, levelArg: p}
	key := f.pkg.dir + "." + f.name
	if !slices.ContainsFunc(a.helpers[key], func(o helper) bool { return fmt.Sprint(o) == fmt.Sprint(h) }) {
		a.helpers[key] = append(a.helpers[key], h)
	}
}

// message evaluates e in f: a string constant (ok), or f's string
// parameter (its place), or neither (false, -1).
func (a *analysis) message(f *fn, e ast.Expr) (string, bool, int) {
	if e == nil {
		return "", false, -1
	}
	if id, isID := e.(*ast.Ident); isID {
		if p, isParam := f.params[id.Name]; isParam {
			if p.str {
				return "", false, p.index
			}
			return "", false, -1
		}
	}
	if s, ok := f.pkg.constString(e); ok {
		return s, true, -1
	}
	if sel, isSel := e.(*ast.SelectorExpr); isSel { // another package's constant
		for _, dir := range a.dirs {
			if s, ok := a.pkgs[dir].consts[sel.Sel.Name]; ok {
				return s, true, -1
			}
		}
	}
	return "", false, -1
}

// level evaluates e in f: the levels it names (zap.WarnLevel,
// slog.LevelWarn, or a variable f sets to some of them), or f's Level
// parameter (its place). A variable set to levels in a function that has
// a Level parameter stands for that parameter: it is the parameter in
// another logger's terms (sl := slog.LevelWarn; if level ==
// zapcore.InfoLevel { sl = slog.LevelInfo }), not every level it may be.
func (f *fn) level(e ast.Expr) ([]string, int) {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		if l := levelOfName(e.Sel.Name); l != "" {
			return []string{l}, -1
		}
	case *ast.Ident:
		if p, ok := f.params[e.Name]; ok {
			if p.lvl {
				return nil, p.index
			}
			return nil, -1
		}
		levels := f.assigned(e.Name)
		if len(levels) > 0 && f.levelArg >= 0 {
			return nil, f.levelArg
		}
		return levels, -1
	}
	return nil, -1
}

// assigned returns the levels f's body sets the variable name to.
func (f *fn) assigned(name string) []string {
	var out []string
	add := func(lhs []*ast.Ident, rhs []ast.Expr) {
		for i, id := range lhs {
			if sel, ok := valueAt(rhs, i).(*ast.SelectorExpr); ok && id.Name == name {
				if l := levelOfName(sel.Sel.Name); l != "" {
					out = append(out, l)
				}
			}
		}
	}
	ast.Inspect(f.body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			var ids []*ast.Ident
			for _, e := range n.Lhs {
				id, _ := e.(*ast.Ident)
				if id == nil {
					id = &ast.Ident{}
				}
				ids = append(ids, id)
			}
			add(ids, n.Rhs)
		case *ast.ValueSpec:
			add(n.Names, n.Values)
		}
		return true
	})
	slices.Sort(out)
	return slices.Compact(out)
}

func valueAt(values []ast.Expr, i int) ast.Expr {
	if i < len(values) {
		return values[i]
	}
	return nil
}

// levelOfName is the level a name such as WarnLevel or LevelWarn is, or "".
func levelOfName(name string) string {
	m := levelName.FindStringSubmatch(name)
	if m == nil {
		return ""
	}
	return m[1] + m[2]
}

func arg(call *ast.CallExpr, i int) ast.Expr {
	return valueAt(call.Args, i)
}

// calleeName is the name a call calls: f, x.f, f[T].
func calleeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.IndexExpr:
		return calleeName(e.X)
	case *ast.IndexListExpr:
		return calleeName(e.X)
	}
	return ""
}
