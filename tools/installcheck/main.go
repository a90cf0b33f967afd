// Command installcheck tries a user's install of retryhttp and retryredis
// at a commit of this repository, before the repository is published
// (issue 32). It serves the root module and retryredis at the commit's
// pseudo-version from a GOPROXY directory built from the git history (and
// every version of them their go.mod files require, see
// tools/internal/modproxy), then, in a new module in a temp directory, with
// GOWORK=off, GOFLAGS=-mod=mod, no checksum database for github.com/retryhttp
// and GOPROXY=file://<dir>,<-upstream>:
//
//  1. go get github.com/retryhttp/retryhttp/retryredis@<v> alone, so the
//     root module is the version retryredis's go.mod requires, and go build
//     and go vet a main using retryhttp.New, retryhttp.NewCooldown with
//     retryhttp.WithStore(retryredis.NewStore(rdb)), and go vet retryredis
//     with its tests: this fails when the commit retryredis requires lacks a
//     root name that retryredis uses;
//  2. go get github.com/retryhttp/retryhttp/retryredis@<v>
//     github.com/retryhttp/retryhttp@<v>, as the README says, then go build
//     and run the main.
//
// It checks committed code: the commit's tree, not the work tree. From the
// repo root (as CI runs it; it needs the module proxy, and about 15 s once
// the build cache is warm):
//
//	go -C tools run ./installcheck            HEAD
//	go -C tools run ./installcheck -rev <commit>
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/tools/internal/modproxy"
)

const redisPath = modproxy.RootPath + "/retryredis"

// appMain is the user's program: the README's fleet setup. It never sends
// a request, so it needs no Redis.
const appMain = `package main

import (
	"fmt"
	"net/http"

	"github.com/redis/go-redis/v9"
	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryredis"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	store := retryredis.NewStore(rdb, retryredis.WithPrefix("app"))
	defer store.Close()
	cooldown := retryhttp.NewCooldown(nil, retryhttp.WithStore(store))
	client := &http.Client{Transport: retryhttp.New(http.DefaultTransport, retryhttp.WithCooldown(cooldown))}
	fmt.Printf("built: %T with a Cooldown on %T\n", client.Transport, store)
}
`

type check struct {
	proxy *modproxy.Proxy
	app   string
	env   []string
}

func main() {
	rev := flag.String("rev", "HEAD", "the commit whose pseudo-version to install")
	upstream := flag.String("upstream", "https://proxy.golang.org", "where every other module comes from (a GOPROXY list)")
	keep := flag.Bool("keep", false, "keep the temp directory (the proxy and the app) and print its path")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: installcheck [-rev commit] [-upstream list] [-keep] [repo root, default: git's of .]")
		flag.PrintDefaults()
	}
	flag.Parse()
	start := time.Now()
	if err := run(*rev, *upstream, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "installcheck:", err)
		os.Exit(1)
	}
	fmt.Printf("install check passed (%.1f s)\n", time.Since(start).Seconds())
}

func run(rev, upstream string, keep bool) error {
	repo, err := repoRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "installcheck-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("kept:", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	c := &check{proxy: modproxy.New(repo, filepath.Join(tmp, "proxy")), app: filepath.Join(tmp, "app")}
	v, err := c.serve(rev)
	if err != nil {
		return err
	}
	if c.env, err = c.proxy.Env(upstream, filepath.Join(tmp, "modcache")); err != nil {
		return err
	}
	if !keep {
		// The module cache's files are read-only: go clean removes them.
		defer c.goCmd(c.app, "clean", "-modcache")
	}
	if err := c.user(v); err != nil {
		return err
	}
	return nil
}

func repoRoot() (string, error) {
	if flag.NArg() > 0 {
		return filepath.Abs(flag.Arg(0))
	}
	return modproxy.TopLevel(".")
}

// serve fills the proxy and returns the version to install.
func (c *check) serve(rev string) (string, error) {
	root, err := c.proxy.Add(modproxy.RootPath, rev)
	if err != nil {
		return "", err
	}
	if _, err := c.proxy.Add(redisPath, rev); err != nil {
		return "", err
	}
	fmt.Printf("== a GOPROXY of this repository's history at %s, for %s:\n", c.proxy.URL(), rev)
	for _, m := range c.proxy.Served() {
		fmt.Println("  ", m)
	}
	return root.Version, nil
}

// user walks the user's path in a new module.
func (c *check) user(v string) error {
	if err := os.MkdirAll(c.app, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.app, "main.go"), []byte(appMain), 0o644); err != nil {
		return err
	}
	steps := [][]string{
		{"mod", "init", "example.com/app"},
		{"get", redisPath + "@" + v},
		{"list", "-m", modproxy.RootPath, redisPath},
		{"build", "-o", os.DevNull, "."},
		{"vet", ".", redisPath},
		{"get", redisPath + "@" + v, modproxy.RootPath + "@" + v},
		{"list", "-m", modproxy.RootPath, redisPath},
		{"build", "-o", "app", "."},
	}
	for i, args := range steps {
		if i == 1 {
			fmt.Println("== 1. retryredis alone: the root module is the version retryredis requires")
		}
		if i == 5 {
			fmt.Println("== 2. both, as the README says")
		}
		if err := c.goCmd(c.app, args...); err != nil {
			return err
		}
	}
	return c.cmd(c.app, filepath.Join(c.app, "app"))
}

func (c *check) goCmd(dir string, args ...string) error {
	return c.cmd(dir, "go", args...)
}

func (c *check) cmd(dir, name string, args ...string) error {
	fmt.Printf("+ %s %s\n", filepath.Base(name), strings.Join(args, " "))
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = c.env
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}
