// Command luamutate is mutation testing of retryredis's apply.lua (issue
// 29): it makes every one-token change of the script's arithmetic and
// comparisons (each comparison to each of the others, + and - swapped, a
// unary minus dropped, * and /, math.max and math.min, and and or, true
// and false, a numeric literal one more and one less; comments and
// strings are left alone), and for each runs retryredis's conformance kit
// on a real Redis
//
//	cd retryredis && DIFF_SEQUENCES=2000 go test -count=1 -failfast -run '^TestKitOnRedis$' ./
//
// within a time bound. KILLED: the kit failed; LIVED: it passed; TIMED
// OUT: it outlived the bound (its process group is killed, the test's
// redis-server with it). The script is restored after every mutant
// (deferred, and on SIGINT, SIGTERM or SIGHUP); a copy of it is kept in
// retryredis/.luamutate-backup for the run, and a run that finds one left
// by a run that was killed restores it first. From the repo root:
//
//	go -C tools run ./luamutate -list          the mutants, numbered
//	go -C tools run ./luamutate -o /tmp/lua.json   all of them (about an hour on 2 cores)
//	go -C tools run ./luamutate -only 12,40-45  some, by number
//
// Mutants listed in equivalent.txt (beside this file: "line from to why")
// that live are reported as equivalent, with the reason; they count as
// lived all the same.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type config struct {
	dir       string // the module whose tests run: retryredis
	script    string
	run       string
	sequences int
	timeout   time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.dir, "dir", "../retryredis", "the retryredis module (relative to the tools directory)")
	flag.StringVar(&c.run, "run", "^TestKitOnRedis$", "the tests that must catch a mutant (go test -run)")
	flag.IntVar(&c.sequences, "sequences", 2000, "the kit's random sequences (DIFF_SEQUENCES)")
	flag.DurationVar(&c.timeout, "timeout", 0, "each mutant's bound (0: 3 times the unmutated run, at least 60 s)")
	list := flag.Bool("list", false, "list the mutants and run nothing")
	only := flag.String("only", "", "run only these mutants: 3,7,10-20")
	out := flag.String("o", "", "write the results as JSON to this file")
	flag.Parse()
	c.script = filepath.Join(c.dir, "apply.lua")
	if err := run(c, *list, *only, *out); err != nil {
		fmt.Fprintln(os.Stderr, "luamutate:", err)
		os.Exit(1)
	}
}

func run(c config, list bool, only, out string) error {
	equiv, err := readEquivalent()
	if err != nil {
		return err
	}
	if list {
		src, err := os.ReadFile(c.script)
		if err != nil {
			return err
		}
		for _, m := range mutants(string(src)) {
			fmt.Printf("%4d  %d:%d  %s -> %s  (%s)  %s\n", m.ID, m.Line, m.Col, m.From, show(m.To), m.Kind, m.Source)
		}
		return nil
	}
	g, err := guard(c.script)
	if err != nil {
		return err
	}
	defer g.done()
	ms, err := pick(mutants(g.orig), only)
	if err != nil {
		return err
	}
	if c.timeout == 0 {
		base, err := g.baseline(c)
		if err != nil {
			return err
		}
		c.timeout = max(3*base, time.Minute)
		fmt.Printf("the unmutated kit passes in %.1f s: each mutant's bound is %s\n", base.Seconds(), c.timeout)
	}
	start := time.Now()
	for i := range ms {
		m := &ms[i]
		status, secs, failed, err := g.try(c, *m)
		if err != nil {
			return err
		}
		m.Status, m.Seconds = status, strconv.FormatFloat(secs, 'f', 1, 64)
		if status == "LIVED" {
			m.Equivalent = equiv[equivKey(*m)]
		}
		fmt.Printf("%-9s %4d  %d:%d  %s -> %s  %.1fs  %s%s\n", status, m.ID, m.Line, m.Col, m.From, show(m.To), secs, m.Source, failed)
	}
	summary(ms, time.Since(start))
	if out != "" {
		b, _ := json.MarshalIndent(ms, "", "  ")
		return os.WriteFile(out, append(b, '\n'), 0o644)
	}
	return nil
}

func show(s string) string {
	if s == "" {
		return "(nothing)"
	}
	return s
}

// summary prints the counts, and the mutants that lived.
func summary(ms []mutant, took time.Duration) {
	n := map[string]int{}
	for _, m := range ms {
		n[m.Status]++
	}
	k, l := n["KILLED"], n["LIVED"]
	eff := 0.0
	if k+l > 0 {
		eff = 100 * float64(k) / float64(k+l)
	}
	fmt.Printf("\n%d mutants in %s: %d killed, %d lived, %d timed out; efficacy %.2f%%\n",
		len(ms), took.Round(time.Second), k, l, n["TIMED OUT"], eff)
	for _, m := range ms {
		if m.Status == "LIVED" {
			why := "NOT KNOWN EQUIVALENT"
			if m.Equivalent != "" {
				why = "equivalent: " + m.Equivalent
			}
			fmt.Printf("  lived %4d  line %d  %s -> %s  %s\n      %s\n", m.ID, m.Line, m.From, show(m.To), m.Source, why)
		}
	}
}

// pick keeps the mutants whose numbers only lists ("" keeps all).
func pick(ms []mutant, only string) ([]mutant, error) {
	if only == "" {
		return ms, nil
	}
	keep := map[int]bool{}
	for _, part := range strings.Split(only, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		if isRange && err == nil {
			b, err = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err != nil {
			return nil, fmt.Errorf("-only %q: %v", only, err)
		}
		for i := a; i <= b; i++ {
			keep[i] = true
		}
	}
	var out []mutant
	for _, m := range ms {
		if keep[m.ID] {
			out = append(out, m)
		}
	}
	return out, nil
}
