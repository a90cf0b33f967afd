package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"slices"
	"strings"
)

// pkg is an import the scaffold may give a fragment: one that uses name
// as a package (name.X, name declared nowhere in it) gets path. An entry
// with with set applies only to a fragment that uses that package too, and
// the first entry that applies wins: option is anthropic-sdk-go's beside
// anthropic, openai-go's otherwise.
type pkg struct{ name, path, with string }

// imports is the scaffold's whole table of packages. The modules they are
// in are the repository's workspace's (../go.work): each SDK at the
// version its examples/<sdk> module requires.
var imports = []pkg{
	{"retryhttp", "github.com/retryhttp/retryhttp", ""},
	{"retryhttptest", "github.com/retryhttp/retryhttp/retryhttptest", ""},
	{"retryredis", "github.com/retryhttp/retryhttp/retryredis", ""},
	{"store", "github.com/retryhttp/retryhttp/store", ""},
	{"zap", "go.uber.org/zap", ""},
	{"redis", "github.com/redis/go-redis/v9", ""},
	{"http", "net/http", ""},
	{"context", "context", ""},
	{"time", "time", ""},
	{"errors", "errors", ""},
	{"fmt", "fmt", ""},
	{"slog", "log/slog", ""},
	{"openai", "github.com/openai/openai-go/v3", ""},
	{"anthropic", "github.com/anthropics/anthropic-sdk-go/v2", ""},
	{"option", "github.com/anthropics/anthropic-sdk-go/v2/option", "anthropic"},
	{"option", "github.com/openai/openai-go/v3/option", ""},
	{"genai", "google.golang.org/genai", ""},
	{"otel", "go.opentelemetry.io/otel", ""},
	{"otelhttp", "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", ""},
}

// given is a name of the prelude: the free names the docs use by
// convention. A fragment that uses one without declaring it gets it as a
// parameter of the function it is compiled in; with, as for pkg, picks the
// type by the SDK the fragment uses. A type's package is one of imports.
type given struct{ name, typ, with string }

// prelude is the scaffold's whole list of free names. An entry that no
// snippet uses is a failure, so that the list stays as short as it can be.
var prelude = []given{
	{"ctx", "context.Context", ""},
	{"log", "*zap.Logger", ""},
	{"req", "*http.Request", ""},
	{"hc", "*http.Client", ""}, // the README's client for the SDKs
	{"addr", "string", ""},     // a Redis address
	{"key", "string", ""},      // an API key
	{"params", "anthropic.MessageNewParams", "anthropic"},
	{"params", "openai.ChatCompletionNewParams", "openai"},
}

func (g given) String() string { return g.name + " " + g.typ }

// qualifier is the package name of the type's package, or "".
func (g given) qualifier() string {
	q, _, ok := strings.Cut(strings.TrimLeft(g.typ, "*[]"), ".")
	if !ok {
		return ""
	}
	return q
}

// A fragment is a snippet that is not a whole file, as the scaffold
// compiles it: in the body of a function of its own,
//
//	func snippetAt<line>(<the prelude names it uses>) error {
//		{
//	//line <doc>:<line>:1
//	<the fragment>
//		}
//		return nil
//	}
//
// in a file whose imports are those of the table it uses, in a package of
// its own (a copy of examples/<x>'s package for examples/<x>/README.md, so
// that it may use the example's names). Each of its statements that
// declares variables is followed, on its line, by "; _ = name" for each of
// them, so that "declared and not used" does not fail a fragment; the
// return is left out after a fragment that ends in one. The //line comment
// makes the compiler's positions the document's.
type fragment struct {
	src  string  // the file
	used []given // the prelude entries it uses
}

// scaffold makes the file of fragment s, whose document is at docPath, in
// package pkgName; host is the names the package declares elsewhere (none
// of them is taken for a package or a prelude name). The error is the
// fragment's syntax error, at the document's line.
func scaffold(s snippet, docPath, pkgName string, host map[string]bool) (fragment, error) {
	fn := fmt.Sprintf("snippetAt%d", s.line)
	directive := fmt.Sprintf("//line %s:%d:1\n", docPath, s.first())
	head := fmt.Sprintf("package %s\n\nfunc %s() error {\n\t{\n%s", pkgName, fn, directive)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "fragment.go", head+s.code+"\t}\n}\n", 0)
	if err != nil {
		return fragment{}, syntaxError(err)
	}
	block := f.Decls[0].(*ast.FuncDecl).Body.List[0].(*ast.BlockStmt)
	code := withUses(s.code, fset, block.List, len(head))
	free := freeNames(f)
	var specs, params []string
	seen := map[string]bool{}
	addImport := func(name string) {
		if p, ok := pick(name, free); ok && !seen[name] {
			seen[name] = true
			specs = append(specs, fmt.Sprintf("\t%s %q\n", p.name, p.path))
		}
	}
	for _, p := range imports {
		if free[p.name] == asPackage && !host[p.name] {
			addImport(p.name)
		}
	}
	var used []given
	for _, g := range prelude {
		if free[g.name] == 0 || host[g.name] || slices.ContainsFunc(used, func(u given) bool { return u.name == g.name }) {
			continue
		}
		if g.with != "" && free[g.with] != asPackage {
			continue
		}
		used = append(used, g)
		params = append(params, g.String())
		if q := g.qualifier(); q != "" {
			addImport(q)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\n", pkgName)
	if len(specs) > 0 {
		slices.Sort(specs)
		fmt.Fprintf(&b, "import (\n%s)\n\n", strings.Join(specs, ""))
	}
	fmt.Fprintf(&b, "func %s(%s) error {\n\t{\n%s%s\t}\n", fn, strings.Join(params, ", "), directive, code)
	if !endsInReturn(block.List) {
		b.WriteString("\treturn nil\n")
	}
	b.WriteString("}\n")
	return fragment{src: b.String(), used: used}, nil
}

// pick is the table's entry for a package name, given the fragment's free
// names.
func pick(name string, free map[string]use) (pkg, bool) {
	for _, p := range imports {
		if p.name == name && (p.with == "" || free[p.with] == asPackage) {
			return p, true
		}
	}
	return pkg{}, false
}

// use is how a free name is used: as a package (name.X) or as a value.
type use int

const (
	asValue use = iota + 1
	asPackage
)

// freeNames returns each name f uses without declaring it (the parser's
// unresolved identifiers), and how.
func freeNames(f *ast.File) map[string]use {
	unresolved := map[*ast.Ident]bool{}
	for _, id := range f.Unresolved {
		unresolved[id] = true
	}
	free := map[string]use{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && unresolved[id] {
				free[id.Name] = asPackage
			}
		case *ast.Ident:
			if unresolved[n] {
				free[n.Name] = max(free[n.Name], asValue)
			}
		}
		return true
	})
	return free
}

// withUses returns code with "; _ = name" after each statement of stmts
// that declares variables; offset is where code starts in the parsed file.
func withUses(code string, fset *token.FileSet, stmts []ast.Stmt, offset int) string {
	type insert struct {
		at   int
		text string
	}
	var inserts []insert
	for _, st := range stmts {
		var uses strings.Builder
		for _, name := range declared(st) {
			fmt.Fprintf(&uses, "; _ = %s", name)
		}
		if uses.Len() > 0 {
			inserts = append(inserts, insert{fset.Position(st.End()).Offset - offset, uses.String()})
		}
	}
	for i := len(inserts) - 1; i >= 0; i-- {
		in := inserts[i]
		code = code[:in.at] + in.text + code[in.at:]
	}
	return code
}

// declared returns the variables a statement declares in its block.
func declared(st ast.Stmt) []string {
	var names []*ast.Ident
	switch st := st.(type) {
	case *ast.AssignStmt:
		if st.Tok == token.DEFINE {
			for _, e := range st.Lhs {
				if id, ok := e.(*ast.Ident); ok {
					names = append(names, id)
				}
			}
		}
	case *ast.DeclStmt:
		if g, ok := st.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, spec := range g.Specs {
				names = append(names, spec.(*ast.ValueSpec).Names...)
			}
		}
	}
	var out []string
	for _, id := range names {
		if id.Name != "_" {
			out = append(out, id.Name)
		}
	}
	return out
}

// endsInReturn reports whether the last statement is a return or a panic,
// after which the scaffold's return would be unreachable.
func endsInReturn(stmts []ast.Stmt) bool {
	if len(stmts) == 0 {
		return false
	}
	switch st := stmts[len(stmts)-1].(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.ExprStmt:
		call, ok := st.X.(*ast.CallExpr)
		if !ok {
			return false
		}
		id, ok := call.Fun.(*ast.Ident)
		return ok && id.Name == "panic"
	}
	return false
}

// syntaxError is the parser's first error, at the document's line (the
// parser reads the //line comment too); the others mostly follow from it.
func syntaxError(err error) error {
	var list scanner.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		return list[0]
	}
	return err
}
