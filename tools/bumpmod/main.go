// Command bumpmod moves this repository's requirements of its own modules
// to the pseudo-version of a commit (issue 32). In every module of the
// repository's go.work that requires them, github.com/retryhttp/retryhttp
// (required by retryredis, bench and the examples) and
// github.com/retryhttp/retryhttp/retryredis (bench, examples/fleet) become
// <path>@<the commit's pseudo-version>. Then, in each module it changed,
// outside the workspace (GOWORK=off) and against a GOPROXY of the git
// history (tools/internal/modproxy), it runs go mod tidy, so that go.sum
// gets the checksums the published versions will have, and go vet ./...,
// so that the module, its tests too, builds against the versions it now
// requires: what a user's go get gives, not the workspace's local copies.
// Last, it makes go.work's replace directives the versions of the
// workspace's modules that its go.mod files now require, each to its local
// copy (see syncWork: the go command reads those versions' go.mod even in
// workspace mode, and they need not be on the module proxy yet).
//
// The commit must be committed (its tree is what a user gets); for
// retryredis it must be one whose retryredis/go.mod requires a version of
// the root module a user can resolve. From the repo root:
//
//	go -C tools run ./bumpmod <commit>                 both, every module
//	go -C tools run ./bumpmod -root <commit> retryredis   the root module's, in retryredis only
//	go -C tools run ./bumpmod -root <c1> -retryredis <c2>
//
// then commit go.work and the go.mod and go.sum files, and run go -C tools
// run ./installcheck on that commit (.ci/run does).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"

	"github.com/retryhttp/retryhttp/tools/internal/modproxy"
)

const redisPath = modproxy.RootPath + "/retryredis"

// A mod is one module of the workspace.
type mod struct {
	dir  string // absolute
	path string
	file *modfile.File
}

func main() {
	root := flag.String("root", "", "the commit for the requirements of "+modproxy.RootPath+" (default: the argument's)")
	redis := flag.String("retryredis", "", "the commit for the requirements of "+redisPath+" (default: the argument's)")
	upstream := flag.String("upstream", "https://proxy.golang.org", "where every other module comes from (a GOPROXY list)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: bumpmod [-root commit] [-retryredis commit] [-upstream list] [commit] [module dir, from the repo root ...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	revs := map[string]string{modproxy.RootPath: *root, redisPath: *redis}
	if *root == "" && *redis == "" {
		if len(args) == 0 {
			flag.Usage()
			os.Exit(2)
		}
		revs = map[string]string{modproxy.RootPath: args[0], redisPath: args[0]}
		args = args[1:]
	}
	if err := run(revs, args, *upstream); err != nil {
		fmt.Fprintln(os.Stderr, "bumpmod:", err)
		os.Exit(1)
	}
}

// run bumps the requirement of each module path in revs that has a commit
// to that commit's pseudo-version, in the modules in dirs (every module of
// go.work when none).
func run(revs map[string]string, dirs []string, upstream string) error {
	repo, err := modproxy.TopLevel(".")
	if err != nil {
		return err
	}
	mods, err := modules(repo, dirs)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "bumpmod-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	proxy := modproxy.New(repo, filepath.Join(tmp, "proxy"))
	want := map[string]string{}
	for _, p := range []string{modproxy.RootPath, redisPath} {
		if revs[p] == "" {
			continue
		}
		m, err := proxy.Add(p, revs[p]) // fails if p at the commit is not installable
		if err != nil {
			return err
		}
		want[p] = m.Version
		fmt.Printf("%s -> %s\n", p, m.Version)
	}
	env, err := proxy.Env(upstream, filepath.Join(tmp, "modcache"))
	if err != nil {
		return err
	}
	defer goCmd(repo, env, "clean", "-modcache")
	for _, m := range mods {
		if err := bump(m, want, proxy, env); err != nil {
			return err
		}
	}
	if err := syncWork(repo); err != nil {
		return err
	}
	fmt.Println("bumped; commit go.work and the go.mod and go.sum files, then: go -C tools run ./installcheck")
	return nil
}

// bump rewrites m's requirements of the paths in want, then tidies and
// vets m outside the workspace.
func bump(m mod, want map[string]string, proxy *modproxy.Proxy, env []string) error {
	var edits []string
	for _, r := range m.file.Require {
		if v, ok := want[r.Mod.Path]; ok && r.Mod.Version != v {
			edits = append(edits, "-require="+r.Mod.Path+"@"+v)
		}
	}
	if len(edits) == 0 {
		return nil
	}
	fmt.Printf("== %s\n", m.path)
	if err := goCmd(m.dir, env, append([]string{"mod", "edit"}, edits...)...); err != nil {
		return err
	}
	f, err := readMod(m.dir)
	if err != nil {
		return err
	}
	// Serve the versions of the repository's modules m now requires that
	// are not the bumped ones (fleet's retryredis, with -mod).
	if err := proxy.AddRequirements(m.path, f); err != nil {
		return err
	}
	if err := goCmd(m.dir, env, "mod", "tidy"); err != nil {
		return err
	}
	return goCmd(m.dir, env, "vet", "./...")
}

// modules reads the modules in dirs (from the repo root), or, when there
// are none, every module go.work uses but the root module (it requires
// none of the others).
func modules(repo string, dirs []string) ([]mod, error) {
	if len(dirs) == 0 {
		data, err := os.ReadFile(filepath.Join(repo, "go.work"))
		if err != nil {
			return nil, err
		}
		w, err := modfile.ParseWork("go.work", data, nil)
		if err != nil {
			return nil, err
		}
		for _, u := range w.Use {
			dirs = append(dirs, u.Path)
		}
	}
	var mods []mod
	for _, d := range dirs {
		dir := filepath.Join(repo, filepath.FromSlash(d))
		f, err := readMod(dir)
		if err != nil {
			return nil, err
		}
		if f.Module.Mod.Path != modproxy.RootPath {
			mods = append(mods, mod{dir: dir, path: f.Module.Mod.Path, file: f})
		}
	}
	return mods, nil
}

func readMod(dir string) (*modfile.File, error) {
	name := filepath.Join(dir, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(name, data, nil)
	if err == nil && f.Module == nil {
		err = fmt.Errorf("%s: no module line", name)
	}
	return f, err
}

func goCmd(dir string, env []string, args ...string) error {
	fmt.Printf("+ go %s\n", strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: go %s: %w", dir, strings.Join(args, " "), err)
	}
	return nil
}
