package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// A tally counts the lines the replicas wrote, by level and message, in
// each second of a scene from its start; lines outside the scene's
// seconds (a replica's start, its close) are counted apart.
type tally struct {
	start time.Time
	secs  int

	mu      sync.Mutex
	perSec  map[lineKey][]int // each second's lines of a level and message
	outside int
}

// A lineKey is a line's level and message, as counted.
type lineKey struct{ level, msg string }

// unstructured is the level of a line that is not a JSON log entry:
// go-redis's default logger's, on stderr.
const unstructured = "unstructured"

// levels are the levels reported, in order.
var levels = []string{"error", "warn", "info", "debug", unstructured}

func newTally(start time.Time, secs int) *tally {
	return &tally{start: start, secs: secs, perSec: make(map[lineKey][]int)}
}

// add counts line, written at at.
func (t *tally) add(at time.Time, line string) {
	k := classify(line)
	sec := int(at.Sub(t.start) / time.Second)
	t.mu.Lock()
	defer t.mu.Unlock()
	if at.Before(t.start) || sec >= t.secs {
		t.outside++
		return
	}
	c := t.perSec[k]
	if c == nil {
		c = make([]int, t.secs)
		t.perSec[k] = c
	}
	c[sec]++
}

// goRedisPrefix is what go-redis's default logger puts in front of each
// line: "redis: ", the date and time, and the file and line.
var goRedisPrefix = regexp.MustCompile(`^redis: \d{4}/\d\d/\d\d \d\d:\d\d:\d\d \S+\.go:\d+: `)

var digits = regexp.MustCompile(`\d+`)

// classify is a line's level and message: a JSON entry's level and msg,
// or unstructured and the text without go-redis's prefix; numbers as #
// (ports, counts, ids), so that lines of one kind count together.
func classify(line string) lineKey {
	var e struct{ Level, Msg string }
	k := lineKey{level: unstructured, msg: goRedisPrefix.ReplaceAllString(line, "")}
	if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &e) == nil && e.Level != "" {
		k = lineKey{level: strings.ToLower(e.Level), msg: e.Msg}
	}
	k.msg = digits.ReplaceAllString(k.msg, "#")
	if len(k.msg) > 110 {
		k.msg = k.msg[:110] + "…"
	}
	return k
}

// A rate is lines a second of a level, or of a message.
type rate struct {
	lines int     // in all
	max   int     // in the busiest second
	mean  float64 // a second, over the scene
}

func rateOf(perSec []int) rate {
	r := rate{}
	for _, n := range perSec {
		r.lines += n
		r.max = max(r.max, n)
	}
	if len(perSec) > 0 {
		r.mean = float64(r.lines) / float64(len(perSec))
	}
	return r
}

// byLevel is each level's rate.
func (t *tally) byLevel() map[string]rate {
	out := make(map[string]rate)
	for l, s := range t.series() {
		out[l] = rateOf(s)
	}
	return out
}

// series is each level's lines in each second.
func (t *tally) series() map[string][]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	sum := make(map[string][]int)
	for k, c := range t.perSec {
		s := sum[k.level]
		if s == nil {
			s = make([]int, t.secs)
			sum[k.level] = s
		}
		for i, n := range c {
			s[i] += n
		}
	}
	return sum
}

// A message is one kind of line and its rate.
type message struct {
	lineKey
	rate
}

// top is the n messages with the most lines, most first.
func (t *tally) top(n int) []message {
	t.mu.Lock()
	var all []message
	for k, c := range t.perSec {
		all = append(all, message{k, rateOf(c)})
	}
	t.mu.Unlock()
	slices.SortFunc(all, func(a, b message) int {
		if a.lines != b.lines {
			return b.lines - a.lines
		}
		return strings.Compare(a.level+a.msg, b.level+b.msg)
	})
	return all[:min(n, len(all))]
}
