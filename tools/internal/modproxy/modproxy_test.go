package modproxy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
)

// gitRepo makes a repository shaped like this one: the root module, a
// nested module with no LICENSE (retryredis), a nested module the root's
// zip leaves out (tools), an ignored file, and one commit at a known time.
func gitRepo(t *testing.T, redisGoMod string) (string, Commit) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":                 "module github.com/retryhttp/retryhttp\n\ngo 1.26.0\n",
		"LICENSE":                "MIT\n",
		"a.go":                   "package retryhttp\n",
		"examples/flaky/main.go": "package main\n\nfunc main() {}\n",
		".gitignore":             "*.test\n",
		"retryredis/go.mod":      redisGoMod,
		"retryredis/r.go":        "package retryredis\n",
		"tools/go.mod":           "module github.com/retryhttp/retryhttp/tools\n\ngo 1.26.0\n",
		"tools/t.go":             "package tools\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "x.test"), []byte("ignored"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "git", "init", "-q", "-b", "main")
	run(t, dir, "git", "add", ".")
	run(t, dir, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one")
	c, err := ResolveCommit(dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return dir, c
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_COMMITTER_DATE=2026-12-02T11:34:50+01:00", "GIT_AUTHOR_DATE=2026-12-01T00:00:00Z",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

const redisOK = "module github.com/retryhttp/retryhttp/retryredis\n\ngo 1.26.0\n\nrequire github.com/retryhttp/retryhttp v0.0.0-20261202103450-"

func TestPseudoVersion(t *testing.T) {
	dir, c := gitRepo(t, "module github.com/retryhttp/retryhttp/retryredis\n")
	// The committer's time, in UTC (10:34:50), not the author's.
	want := "v0.0.0-20261202103450-" + c.Hash[:12]
	if got := c.PseudoVersion(); got != want {
		t.Errorf("PseudoVersion() = %s, want %s", got, want)
	}
	run(t, dir, "git", "tag", "retryredis/v0.1.0")
	if _, v, err := PseudoVersion(dir, RootPath, "HEAD"); err != nil || v != want {
		t.Errorf("root with retryredis's tag: %s, %v; want %s", v, err, want)
	}
	if _, _, err := PseudoVersion(dir, RootPath+"/retryredis", "HEAD"); err == nil {
		t.Error("retryredis with a tag of its own: no error")
	}
}

func TestAddFollowsRequirements(t *testing.T) {
	dir, c := gitRepo(t, "module github.com/retryhttp/retryhttp/retryredis\n")
	v := c.PseudoVersion()
	// A second commit whose retryredis requires the root module at the first.
	if err := os.WriteFile(filepath.Join(dir, "retryredis/go.mod"), []byte(redisOK+c.Hash[:12]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-am", "two")
	p := New(dir, t.TempDir())
	m, err := p.Add(RootPath+"/retryredis", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	got := p.Served()
	if len(got) != 2 || got[0] != (module.Version{Path: RootPath, Version: v}) || got[1] != m {
		t.Fatalf("Served() = %v, want the root at %s and %s", got, v, m)
	}
	var info struct {
		Version string
		Time    time.Time
	}
	data, err := os.ReadFile(filepath.Join(p.Dir, "github.com/retryhttp/retryhttp/@v", v+".info"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &info); err != nil || info.Version != v || !info.Time.Equal(c.Time) {
		t.Errorf(".info = %s (%v), want %s at %s", data, err, v, c.Time)
	}
}

func TestAddRefusesWhatGoGetCannotResolve(t *testing.T) {
	for _, req := range []string{
		"v0.0.0",                             // the replace's requirement
		"v0.0.0-20261202103450-0123456789ab", // no such commit
		"v0.0.0-20261202113450-%s",           // the commit, at the wrong time
		"v0.0.0-00010101000000-000000000000", // what go mod tidy writes for a replace
		"v1.2.3",                             // no such tag
	} {
		dir, c := gitRepo(t, "module github.com/retryhttp/retryhttp/retryredis\n")
		if strings.Contains(req, "%s") {
			req = strings.ReplaceAll(req, "%s", c.Hash[:12])
		}
		gomod := "module github.com/retryhttp/retryhttp/retryredis\n\nrequire github.com/retryhttp/retryhttp " + req + "\n"
		if err := os.WriteFile(filepath.Join(dir, "retryredis/go.mod"), []byte(gomod), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, dir, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-am", "two")
		if _, err := New(dir, t.TempDir()).Add(RootPath+"/retryredis", "HEAD"); err == nil {
			t.Errorf("requirement %s: no error", req)
		}
	}
}

// TestZipIsTheGoCommands checks that the zips hash as the ones the go
// command makes from the repository itself (GOPROXY=direct, git's URL of
// github.com/retryhttp/retryhttp rewritten to the test's repository), so
// that a go.sum filled from a Proxy holds once the repository is published.
func TestZipIsTheGoCommands(t *testing.T) {
	dir, c := gitRepo(t, "module github.com/retryhttp/retryhttp/retryredis\n\ngo 1.26.0\n")
	p := New(dir, t.TempDir())
	gitconfig := filepath.Join(t.TempDir(), "gitconfig")
	cfg := "[url \"file://" + dir + "\"]\n\tinsteadOf = https://github.com/retryhttp/retryhttp\n"
	if err := os.WriteFile(gitconfig, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	modcache := t.TempDir()
	env := append(os.Environ(), "GOPROXY=direct", "GOWORK=off", "GOFLAGS=-mod=mod",
		"GONOSUMDB=github.com/retryhttp", "GOPRIVATE=", "GONOPROXY=", "GOTOOLCHAIN=local",
		"GOMODCACHE="+modcache, "GIT_CONFIG_GLOBAL="+gitconfig, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	t.Cleanup(func() { // the module cache's files are read-only
		cmd := exec.Command("go", "clean", "-modcache")
		cmd.Env = env
		_ = cmd.Run()
	})
	for _, path := range []string{RootPath, RootPath + "/retryredis"} {
		m, err := p.Add(path, "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		esc, _ := module.EscapePath(path)
		ours, err := dirhash.HashZip(filepath.Join(p.Dir, esc, "@v", m.Version+".zip"), dirhash.Hash1)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", "mod", "download", "-json", path+"@"+c.Hash)
		cmd.Dir = t.TempDir()
		cmd.Env = env
		out, err := cmd.Output()
		var got struct{ Version, Sum string }
		if err != nil || json.Unmarshal(out, &got) != nil {
			t.Fatalf("go mod download %s: %v\n%s", path, err, out)
		}
		if got.Version != m.Version || got.Sum != ours {
			t.Errorf("%s: the go command's %s %s, ours %s %s", path, got.Version, got.Sum, m.Version, ours)
		}
	}
}
