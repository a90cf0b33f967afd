package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
)

// modulePath is the temp module's: one package per compiled snippet,
// modulePath/s<i>.
const modulePath = "snippets.local"

// A build is one go vet of every compiled snippet, in a temp directory:
//
//	go.work    the repository's go.work, its paths made absolute, plus ./m
//	go.work.sum a copy of the repository's
//	m/go.mod   module snippets.local, requiring nothing: in a workspace
//	           its imports resolve in the workspace's build list
//	m/s<i>/    snippet i's package
type build struct {
	root  string // the repository, absolute
	fsys  fs.FS  // the repository, read
	tmp   string
	hosts map[string]host // by the snippet's package directory, s<i>
}

// host is what a package directory of the build stands for.
type host struct {
	snippet int    // the index of its snippet
	dir     string // the repository's directory it copies, or ""
}

// newBuild writes the workspace into a new temp directory.
func newBuild(root string, fsys fs.FS) (*build, error) {
	src, err := fs.ReadFile(fsys, "go.work")
	if err != nil {
		return nil, fmt.Errorf("the workspace: %w", err)
	}
	work, err := modfile.ParseWork("go.work", src, nil)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "snippets-")
	if err != nil {
		return nil, err
	}
	b := &build{root: root, fsys: fsys, tmp: tmp, hosts: map[string]host{}}
	var w strings.Builder
	fmt.Fprintf(&w, "go %s\n\nuse ./m\n", work.Go.Version)
	for _, u := range work.Use {
		fmt.Fprintf(&w, "use %q\n", b.abs(u.Path))
	}
	for _, r := range work.Replace {
		to := r.New.Path
		if r.New.Version == "" {
			to = strconv.Quote(b.abs(to))
		} else {
			to += " " + r.New.Version
		}
		fmt.Fprintf(&w, "replace %s %s => %s\n", r.Old.Path, r.Old.Version, to)
	}
	files := map[string]string{
		"go.work":  w.String(),
		"m/go.mod": fmt.Sprintf("module %s\n\ngo %s\n", modulePath, work.Go.Version),
	}
	if sum, err := fs.ReadFile(fsys, "go.work.sum"); err == nil {
		files["go.work.sum"] = string(sum)
	}
	for name, data := range files {
		if err := b.write(name, data); err != nil {
			b.close()
			return nil, err
		}
	}
	return b, nil
}

func (b *build) close() { os.RemoveAll(b.tmp) }

// abs is a path of the repository's go.work, made absolute.
func (b *build) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(b.root, filepath.FromSlash(p))
}

func (b *build) write(name, data string) error {
	p := filepath.Join(b.tmp, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(data), 0o644)
}

// add writes snippet i's package; it returns the prelude entries it uses,
// or the snippet's syntax error.
func (b *build) add(i int, s snippet) ([]given, error) {
	dir := fmt.Sprintf("s%d", i)
	docPath := filepath.Join(b.root, filepath.FromSlash(s.file))
	if isFile(s.code) {
		b.hosts[dir] = host{snippet: i}
		return nil, b.write("m/"+dir+"/snippet.go", fmt.Sprintf("//line %s:%d:1\n%s", docPath, s.first(), s.code))
	}
	hostDir, pkgName, names, err := b.hostOf(s.file, dir)
	if err != nil {
		return nil, err
	}
	frag, err := scaffold(s, docPath, pkgName, names)
	if err != nil {
		return nil, err
	}
	b.hosts[dir] = host{snippet: i, dir: hostDir}
	return frag.used, b.write("m/"+dir+"/zz_snippet.go", frag.src)
}

// isFile reports whether a snippet is a whole file: its first code line
// (after comments and blank lines) is a package clause.
func isFile(code string) bool {
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		return strings.HasPrefix(line, "package ")
	}
	return false
}

// examplesDoc is a document of an example: its fragments are compiled in
// a copy of the example's package.
var examplesDoc = regexp.MustCompile(`^(examples/[^/]+)/README\.md$`)

// hostOf copies the package a fragment of doc is compiled in into the
// build's dir: examples/<x>'s files (all but its tests and its go.mod) for
// its README, or nothing. It returns the directory copied, the package's name, and the
// names its files declare.
func (b *build) hostOf(doc, dir string) (string, string, map[string]bool, error) {
	m := examplesDoc.FindStringSubmatch(doc)
	if m == nil {
		return "", "snippet", nil, nil
	}
	entries, err := fs.ReadDir(b.fsys, m[1])
	if err != nil {
		return "", "", nil, err
	}
	pkgName, names := "", map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), "_test.go") || notPackage[e.Name()] {
			continue
		}
		src, err := fs.ReadFile(b.fsys, path.Join(m[1], e.Name()))
		if err != nil {
			return "", "", nil, err
		}
		if err := b.write("m/"+dir+"/"+e.Name(), string(src)); err != nil {
			return "", "", nil, err
		}
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), src, parser.SkipObjectResolution)
		if err != nil {
			return "", "", nil, err
		}
		pkgName = f.Name.Name
		topLevel(f, names)
	}
	if pkgName == "" {
		return "", "snippet", nil, nil
	}
	return m[1], pkgName, names, nil
}

// notPackage are the files of a directory that a copy of its package
// leaves out: a go.mod there would make the copy a module of its own.
var notPackage = map[string]bool{"go.mod": true, "go.sum": true, "go.work": true, "go.work.sum": true}

// topLevel adds the names f declares at package level.
func topLevel(f *ast.File, names map[string]bool) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					names[spec.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
}

// vet runs go vet over every package of the build and returns what it
// says of each snippet, by index, and what it says of none.
func (b *build) vet() (map[int][]string, []string, error) {
	if len(b.hosts) == 0 {
		return nil, nil, nil
	}
	var args []string
	for dir := range b.hosts {
		args = append(args, "./"+dir) // each named: one that is not in the module fails
	}
	slices.Sort(args)
	args = append([]string{"vet"}, args...)
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(b.tmp, "m")
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(b.tmp, "go.work"), "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		return nil, nil, err
	}
	bySnippet, other := b.attribute(out)
	if err != nil && len(bySnippet) == 0 && len(other) == 0 {
		other = append(other, "go vet failed, saying nothing: "+err.Error())
	}
	return bySnippet, other, nil
}

// pkgDir finds a package directory of the build in a line of go vet's
// output: in a "# snippets.local/s3" header (or "# [snippets.local/s3]"),
// in a path in the build, or in one from go vet's directory.
func (b *build) pkgDir(line string) string {
	if rest, ok := strings.CutPrefix(strings.TrimPrefix(strings.TrimPrefix(line, "# "), "["), modulePath+"/"); ok {
		return leadingDir(rest)
	}
	line = strings.TrimPrefix(line, "vet: ")
	if _, rest, ok := strings.Cut(line, filepath.Join(b.tmp, "m")+string(filepath.Separator)); ok {
		return leadingDir(rest)
	}
	if d := leadingDir(line); d != "" && strings.HasPrefix(line, d+"/") {
		return d
	}
	return ""
}

var dirName = regexp.MustCompile(`^s\d+\b`)

func leadingDir(s string) string { return dirName.FindString(s) }

// attribute gives each line of go vet's output to the snippet it is about:
// the one whose package a header named last, or whose directory it names.
// Paths are made the repository's: a document's from its //line comment,
// a copied host file's from its copy.
func (b *build) attribute(out []byte) (map[int][]string, []string) {
	bySnippet := map[int][]string{}
	var other []string
	current := ""
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		if line == "" || strings.HasPrefix(line, "go: downloading ") {
			continue // the module cache filling, on a machine whose cache is cold
		}
		dir := b.pkgDir(line)
		if strings.HasPrefix(line, "# ") {
			current = dir
			continue
		}
		if dir == "" {
			dir = current
		}
		h, ok := b.hosts[dir]
		if !ok {
			other = append(other, line)
			continue
		}
		bySnippet[h.snippet] = append(bySnippet[h.snippet], b.clean(line, dir, h))
	}
	return bySnippet, other
}

func (b *build) clean(line, dir string, h host) string {
	line = strings.TrimPrefix(line, "vet: ")
	copied := filepath.Join(b.tmp, "m", dir) + string(filepath.Separator)
	if h.dir != "" {
		line = strings.ReplaceAll(line, copied, h.dir+"/")
	}
	line = strings.ReplaceAll(line, copied, "")
	line = strings.ReplaceAll(line, "m/"+dir+"/", "")
	return strings.ReplaceAll(line, b.root+string(filepath.Separator), "")
}
