// Package modproxy serves this repository's modules from its git history as
// a GOPROXY directory (GOPROXY=file://<dir>), laid out as the module proxy
// lays them out (<module>/@v/list, <version>.info, .mod and .zip), so that
// a user's path (go get of a pseudo-version) can be tried before the
// repository is published at github.com/retryhttp/retryhttp, and a go.sum
// can get the checksums the published versions will have.
//
// A version is the pseudo-version of a commit, computed as the go command
// computes it while the repository has no tags:
// v0.0.0-<the commit's UTC committer time, yyyymmddhhmmss>-<12 hex of its
// hash>. Each zip holds the files `git archive` gives for the module's
// directory at the commit, less the nested modules, plus the repository's
// LICENSE for a module that has none: what the go command puts in a module
// zip, so the h1: checksums match the proxy's once the repository is
// published.
package modproxy

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

// RootPath is the root module's path; every module of the repository is
// RootPath or under it, in the directory of the same name.
const RootPath = "github.com/retryhttp/retryhttp"

// InRepo reports whether path is a module of this repository.
func InRepo(path string) bool {
	return path == RootPath || strings.HasPrefix(path, RootPath+"/")
}

// Subdir is the directory of the module path in the repository, "" for the
// root module.
func Subdir(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, RootPath), "/")
}

// Git runs git in dir and returns its standard output.
func Git(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// TopLevel is the root of the git work tree that holds dir.
func TopLevel(dir string) (string, error) {
	out, err := Git(dir, "rev-parse", "--show-toplevel")
	return strings.TrimSpace(string(out)), err
}

// A Commit is one commit of the repository.
type Commit struct {
	Hash string    // 40 hex digits
	Time time.Time // committer time, UTC
}

// ResolveCommit resolves rev (a hash, a prefix of one, a branch, HEAD) in
// the repository at repo.
func ResolveCommit(repo, rev string) (Commit, error) {
	out, err := Git(repo, "log", "-1", "--format=%H %ct", rev+"^{commit}", "--")
	if err != nil {
		return Commit{}, fmt.Errorf("commit %q is not in %s (a shallow clone? git fetch --unshallow): %w", rev, repo, err)
	}
	hash, ct, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	secs, perr := strconv.ParseInt(ct, 10, 64)
	if !ok || perr != nil || len(hash) != 40 {
		return Commit{}, fmt.Errorf("git log %s: unexpected output %q", rev, out)
	}
	return Commit{Hash: hash, Time: time.Unix(secs, 0).UTC()}, nil
}

// PseudoVersion is the version the go command gives the commit of a module
// with no tagged version: v0.0.0-yyyymmddhhmmss-<12 hex>.
func (c Commit) PseudoVersion() string {
	return module.PseudoVersion("", "", c.Time, c.Hash[:12])
}

// PseudoVersion is the version the go command gives the module path at rev.
// It fails if a tag of the module (vX.Y.Z, or <subdir>/vX.Y.Z) is an
// ancestor of rev: the go command would then build the pseudo-version on
// that tag, which this package does not do.
func PseudoVersion(repo, path, rev string) (Commit, string, error) {
	c, err := ResolveCommit(repo, rev)
	if err != nil {
		return Commit{}, "", err
	}
	prefix := ""
	if sub := Subdir(path); sub != "" {
		prefix = sub + "/"
	}
	out, err := Git(repo, "tag", "--merged", c.Hash, "--list", prefix+"v*")
	if err != nil {
		return Commit{}, "", err
	}
	for tag := range strings.FieldsSeq(string(out)) {
		if semver.IsValid(strings.TrimPrefix(tag, prefix)) {
			return Commit{}, "", fmt.Errorf("%s at %s: tag %s is an ancestor: ask the go command for the pseudo-version (go list -m %s@%s)", path, rev, tag, path, c.Hash[:12])
		}
	}
	return c, c.PseudoVersion(), nil
}

// CommitOf is the commit of this repository that version v (a
// pseudo-version) names, checked to be the pseudo-version the go command
// gives that commit: a requirement that is not is one a user's go get
// cannot resolve.
func CommitOf(repo, path, v string) (Commit, error) {
	if !module.IsPseudoVersion(v) {
		return Commit{}, fmt.Errorf("%s %s is not a pseudo-version of a commit of this repository: a user's go get cannot resolve it", path, v)
	}
	rev, err := module.PseudoVersionRev(v)
	if err != nil {
		return Commit{}, err
	}
	c, want, err := PseudoVersion(repo, path, rev)
	if err != nil {
		return Commit{}, fmt.Errorf("%s %s: %w", path, v, err)
	}
	if want != v {
		return Commit{}, fmt.Errorf("%s %s: commit %s's pseudo-version is %s", path, v, c.Hash[:12], want)
	}
	return c, nil
}

// A Proxy is a GOPROXY directory being filled.
type Proxy struct {
	Dir    string // GOPROXY=file://<Dir>
	repo   string
	served map[module.Version]bool
}

// New makes a Proxy of the repository at repo (a work tree) in dir.
func New(repo, dir string) *Proxy {
	return &Proxy{Dir: dir, repo: repo, served: map[module.Version]bool{}}
}

// URL is the GOPROXY entry that names the proxy.
func (p *Proxy) URL() string {
	return "file://" + filepath.ToSlash(p.Dir)
}

// Served lists what the proxy holds, sorted.
func (p *Proxy) Served() []module.Version {
	var vs []module.Version
	for m := range p.served {
		vs = append(vs, m)
	}
	module.Sort(vs)
	return vs
}

// Add serves module path at rev, and then every version of a module of
// this repository that its go.mod requires, and theirs, as the go command
// would need them. It fails if a requirement is not a pseudo-version of a
// commit of the repository (a v0.0.0, or a commit it does not hold).
func (p *Proxy) Add(path, rev string) (module.Version, error) {
	c, v, err := PseudoVersion(p.repo, path, rev)
	if err != nil {
		return module.Version{}, err
	}
	m := module.Version{Path: path, Version: v}
	return m, p.add(m, c)
}

func (p *Proxy) add(m module.Version, c Commit) error {
	if p.served[m] {
		return nil
	}
	sub := Subdir(m.Path)
	gomod, err := Git(p.repo, "show", c.Hash+":"+filepath.ToSlash(filepath.Join(sub, "go.mod")))
	if err != nil {
		return fmt.Errorf("%s: no go.mod at %s: %w", m, c.Hash[:12], err)
	}
	f, err := modfile.ParseLax("go.mod", gomod, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", m, err)
	}
	if f.Module == nil || f.Module.Mod.Path != m.Path {
		return fmt.Errorf("%s: the go.mod at %s is not module %s", m, c.Hash[:12], m.Path)
	}
	if err := p.write(m, c, gomod); err != nil {
		return err
	}
	p.served[m] = true
	return p.AddRequirements(m.String(), f)
}

// AddRequirements serves every version of a module of this repository
// that f requires (and, through Add, theirs). who names f in errors.
func (p *Proxy) AddRequirements(who string, f *modfile.File) error {
	for _, r := range f.Require {
		if !InRepo(r.Mod.Path) {
			continue
		}
		c, err := CommitOf(p.repo, r.Mod.Path, r.Mod.Version)
		if err != nil {
			return fmt.Errorf("%s requires %w", who, err)
		}
		if err := p.add(r.Mod, c); err != nil {
			return err
		}
	}
	return nil
}

// write puts m's .info, .mod and .zip in the proxy and m.Version in the
// module's list.
func (p *Proxy) write(m module.Version, c Commit, gomod []byte) error {
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	dir := filepath.Join(p.Dir, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, c.Time})
	if err != nil {
		return err
	}
	var z bytes.Buffer
	if err := p.zip(&z, m, c); err != nil {
		return err
	}
	for ext, data := range map[string][]byte{".info": info, ".mod": gomod, ".zip": z.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, m.Version+ext), data, 0o644); err != nil {
			return err
		}
	}
	return appendList(filepath.Join(dir, "list"), m.Version)
}

func appendList(name, v string) error {
	old, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	vs := strings.Fields(string(old))
	if !slices.Contains(vs, v) {
		vs = append(vs, v)
	}
	semver.Sort(vs)
	return os.WriteFile(name, []byte(strings.Join(vs, "\n")+"\n"), 0o644)
}

// zip writes m's module zip: what `git archive` holds under the module's
// directory at c, as golang.org/x/mod/zip.CreateFromVCS takes it (which
// insists on a .git directory, and a worktree has a .git file), less what
// zip.Create leaves out (nested modules, vendor/), plus the repository's
// LICENSE when the module's directory has none.
func (p *Proxy) zip(w io.Writer, m module.Version, c Commit) error {
	sub := Subdir(m.Path)
	args := []string{"-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", c.Hash}
	if sub != "" {
		args = append(args, sub)
	}
	out, err := Git(p.repo, args...)
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(bytes.NewReader(out), int64(len(out)))
	if err != nil {
		return err
	}
	var files []modzip.File
	haveLicense := false
	for _, zf := range zr.File {
		name := zf.Name
		if sub != "" {
			var ok bool
			if name, ok = strings.CutPrefix(name, sub+"/"); !ok {
				continue
			}
		}
		if name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		files = append(files, zipFile{name: name, f: zf})
		haveLicense = haveLicense || name == "LICENSE"
	}
	if !haveLicense && sub != "" {
		if lic, err := Git(p.repo, "cat-file", "blob", c.Hash+":LICENSE"); err == nil {
			files = append(files, dataFile{name: "LICENSE", data: lic})
		}
	}
	return modzip.Create(w, m, files)
}

type zipFile struct {
	name string
	f    *zip.File
}

func (f zipFile) Path() string                 { return f.name }
func (f zipFile) Lstat() (os.FileInfo, error)  { return f.f.FileInfo(), nil }
func (f zipFile) Open() (io.ReadCloser, error) { return f.f.Open() }

type dataFile struct {
	name string
	data []byte
}

func (f dataFile) Path() string                { return f.name }
func (f dataFile) Lstat() (os.FileInfo, error) { return dataFileInfo(f), nil }
func (f dataFile) Open() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(f.data)), nil
}

type dataFileInfo dataFile

func (fi dataFileInfo) Name() string       { return filepath.Base(fi.name) }
func (fi dataFileInfo) Size() int64        { return int64(len(fi.data)) }
func (fi dataFileInfo) Mode() os.FileMode  { return 0o644 }
func (fi dataFileInfo) ModTime() time.Time { return time.Time{} }
func (fi dataFileInfo) IsDir() bool        { return false }
func (fi dataFileInfo) Sys() any           { return nil }

// Env is the environment for a go command outside any workspace that
// takes this repository's modules from p and every other module from the
// module cache in use, then from upstream (a GOPROXY list), as a user's
// would once the repository is published: GOWORK=off, GOFLAGS=-mod=mod,
// no checksum database for github.com/retryhttp (its versions are not in
// sum.golang.org yet), and modcache as GOMODCACHE, so that the versions
// built here stay out of the module cache in use.
func (p *Proxy) Env(upstream, modcache string) ([]string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	cache := "file://" + filepath.ToSlash(filepath.Join(strings.TrimSpace(string(out)), "cache", "download"))
	return append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=-mod=mod",
		"GOPROXY="+p.URL()+","+cache+","+upstream,
		"GOPRIVATE=",
		"GONOPROXY=",
		"GONOSUMDB=github.com/retryhttp",
		"GOTOOLCHAIN=local",
		"GOMODCACHE="+modcache,
	), nil
}
