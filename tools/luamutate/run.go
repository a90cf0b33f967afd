package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed" // equivalent.txt
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A scriptGuard holds the script's own bytes and puts them back: after
// each mutant, at the end, and on a signal.
type scriptGuard struct {
	path, backup string
	orig         string

	mu    sync.Mutex
	child *exec.Cmd // the test running now, if any
	stop  func()
}

// guard reads the script, restoring it first from the backup a killed run
// left, and keeps a backup of it until done.
func guard(path string) (*scriptGuard, error) {
	g := &scriptGuard{path: path, backup: filepath.Join(filepath.Dir(path), ".luamutate-backup")}
	if b, err := os.ReadFile(g.backup); err == nil {
		fmt.Fprintf(os.Stderr, "luamutate: %s was left by a run that did not end: restoring %s from it\n", g.backup, path)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	g.orig = string(b)
	if err := os.WriteFile(g.backup, b, 0o644); err != nil {
		return nil, err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	g.stop = func() { signal.Stop(sigs) }
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		g.mu.Lock()
		if g.child != nil && g.child.Process != nil {
			_ = syscall.Kill(-g.child.Process.Pid, syscall.SIGKILL)
		}
		g.restore()
		_ = os.Remove(g.backup)
		fmt.Fprintf(os.Stderr, "luamutate: %v: %s restored\n", s, path)
		os.Exit(130)
	}()
	return g, nil
}

// restore writes the script's own bytes back; it exits the process if it
// cannot (better than running on with a mutant in place).
func (g *scriptGuard) restore() {
	if err := os.WriteFile(g.path, []byte(g.orig), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "luamutate: CANNOT RESTORE %s (its bytes are in %s): %v\n", g.path, g.backup, err)
		os.Exit(3)
	}
}

// done restores the script, checks it, and drops the backup.
func (g *scriptGuard) done() {
	g.stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.restore()
	if b, err := os.ReadFile(g.path); err != nil || string(b) != g.orig {
		fmt.Fprintf(os.Stderr, "luamutate: %s differs from what it was: its bytes are in %s\n", g.path, g.backup)
		os.Exit(3)
	}
	_ = os.Remove(g.backup)
}

// try runs the kit on m: its status, how long it took, and the tests that
// failed (for the log). The script is restored before try returns.
func (g *scriptGuard) try(c config, m mutant) (status string, secs float64, failed string, err error) {
	g.mu.Lock()
	err = os.WriteFile(g.path, []byte(m.apply(g.orig)), 0o644)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.restore()
	}()
	if err != nil {
		return "", 0, "", err
	}
	start := time.Now()
	out, timedOut, runErr := g.runChild(g.command(c), c.timeout)
	secs = time.Since(start).Seconds()
	var exit *exec.ExitError
	switch {
	case timedOut:
		return "TIMED OUT", secs, "", nil
	case runErr == nil:
		return "LIVED", secs, "", nil
	case errors.As(runErr, &exit):
		return "KILLED", secs, firstFails(out), nil
	}
	return "", secs, "", fmt.Errorf("mutant %d: %v", m.ID, runErr)
}

// runChild runs cmd bounded, as the child a signal kills.
func (g *scriptGuard) runChild(cmd *exec.Cmd, d time.Duration) (out []byte, timedOut bool, err error) {
	g.mu.Lock()
	g.child = cmd
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.child = nil
		g.mu.Unlock()
	}()
	return runBounded(cmd, d)
}

func (*scriptGuard) command(c config) *exec.Cmd {
	// -failfast: a mutant killed stops the kit at its first failure.
	cmd := exec.Command("go", "test", "-count=1", "-failfast", "-run", c.run, "./")
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("DIFF_SEQUENCES=%d", c.sequences))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // one group: go, the test binary, its redis-server
	return cmd
}

// runBounded runs cmd for at most d, killing its process group after.
func runBounded(cmd *exec.Cmd, d time.Duration) (out []byte, timedOut bool, err error) {
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		timedOut = true
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever the test left running
	return buf.Bytes(), timedOut, err
}

// firstFails names the deepest failing tests of out, a few at most.
func firstFails(out []byte) string {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, ok := strings.CutPrefix(line, "--- FAIL: "); ok {
			name, _, _ = strings.Cut(name, " ")
			names = append(names, name)
		}
	}
	slices.SortStableFunc(names, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	if len(names) > 3 { // the deepest
		names = names[:3]
	}
	if len(names) == 0 {
		return ""
	}
	return "  [" + strings.Join(names, " ") + "]"
}

// baseline runs the kit on the script as it is: it must pass.
func (g *scriptGuard) baseline(c config) (time.Duration, error) {
	start := time.Now()
	out, timedOut, err := g.runChild(g.command(c), 10*time.Minute)
	if timedOut || err != nil {
		return 0, fmt.Errorf("the kit fails on the script as it is (%v):\n%s", err, out)
	}
	return time.Since(start), nil
}

//go:embed equivalent.txt
var equivalentTxt string

// readEquivalent reads equivalent.txt: "line:col from to  why" a line.
func readEquivalent() (map[string]string, error) {
	m := map[string]string{}
	for i, line := range strings.Split(equivalentTxt, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return nil, fmt.Errorf("equivalent.txt:%d: want \"line:col from to why\"", i+1)
		}
		m[f[0]+" "+f[1]+" "+f[2]] = strings.Join(f[3:], " ")
	}
	return m, nil
}

func equivKey(m mutant) string {
	return fmt.Sprintf("%d:%d %s %s", m.Line, m.Col, m.From, show(m.To))
}
