package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// What the commands' tables write of a row's runs: a range over the runs,
// and the targets met.

// Span is the range of f over runs, each end written with format: one
// value when both ends read the same, else "min–max". A run whose f is NaN
// is left out; "—" when every run's is.
func Span[R any](runs []R, format string, f func(R) float64) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range runs {
		if v := f(r); !math.IsNaN(v) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if lo > hi {
		return "—"
	}
	a, b := fmt.Sprintf(format, lo), fmt.Sprintf(format, hi)
	if a == b {
		return a
	}
	return a + "–" + b
}

// DurSpan is Span for durations, each end written by secs: "1.39–1.52 s"
// when both ends have the same unit. A run whose f is negative has none:
// absent when every run has none, and ", absent" after the range when
// some have.
func DurSpan[R any](runs []R, secs func(time.Duration) string, absent string, f func(R) time.Duration) string {
	var ds []time.Duration
	none := false
	for _, r := range runs {
		if d := f(r); d >= 0 {
			ds = append(ds, d)
		} else {
			none = true
		}
	}
	if len(ds) == 0 {
		return absent
	}
	a, b := secs(slices.Min(ds)), secs(slices.Max(ds))
	an, au, _ := strings.Cut(a, " ")
	bn, bu, _ := strings.Cut(b, " ")
	s := a + "–" + b
	switch {
	case a == b:
		s = a
	case au == bu:
		s = an + "–" + bn + " " + bu
	}
	if none {
		s += ", " + absent
	}
	return s
}

// Met says in how many runs every target was met ("2/3"), and names the
// targets missed in any run, once each, in order's order.
func Met[R any](runs []R, missed func(R) []string, order []string) string {
	all := 0
	var names []string
	for _, r := range runs {
		m := missed(r)
		if len(m) == 0 {
			all++
		}
		names = append(names, m...)
	}
	slices.SortStableFunc(names, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
	names = slices.Compact(names)
	s := fmt.Sprintf("%d/%d", all, len(runs))
	if len(names) > 0 {
		s += " (" + strings.Join(names, ", ") + ")"
	}
	return s
}
