package bench

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestSpan(t *testing.T) {
	id := func(v float64) float64 { return v }
	for _, tc := range []struct {
		runs []float64
		want string
	}{
		{[]float64{0.5}, "0.50"},
		{[]float64{0.501, 0.499}, "0.50"},
		{[]float64{0.9, 0.5, 0.7}, "0.50–0.90"},
		{[]float64{math.NaN(), 0.7}, "0.70"},
		{[]float64{math.NaN()}, "—"},
		{nil, "—"},
	} {
		if got := Span(tc.runs, "%.2f", id); got != tc.want {
			t.Errorf("Span(%v) = %q, want %q", tc.runs, got, tc.want)
		}
	}
}

func TestDurSpan(t *testing.T) {
	secs := func(d time.Duration) string {
		if d < time.Second {
			return fmt.Sprintf("%d ms", d.Milliseconds())
		}
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	id := func(d time.Duration) time.Duration { return d }
	ms := time.Millisecond
	for _, tc := range []struct {
		runs []time.Duration
		want string
	}{
		{[]time.Duration{71 * ms, 84 * ms}, "71–84 ms"},
		{[]time.Duration{84 * ms, 84 * ms}, "84 ms"},
		{[]time.Duration{900 * ms, 1500 * ms}, "900 ms–1.50 s"},
		{[]time.Duration{1390 * ms, -1, 1520 * ms}, "1.39–1.52 s, never"},
		{[]time.Duration{-1, -1}, "never"},
	} {
		if got := DurSpan(tc.runs, secs, "never", id); got != tc.want {
			t.Errorf("DurSpan(%v) = %q, want %q", tc.runs, got, tc.want)
		}
	}
}

func TestMet(t *testing.T) {
	order := []string{"people", "p99", "goodput"}
	for _, tc := range []struct {
		runs [][]string
		want string
	}{
		{[][]string{nil, nil, nil}, "3/3"},
		{[][]string{{"goodput"}, nil, {"p99", "people"}}, "1/3 (people, p99, goodput)"},
		{[][]string{{"p99"}, {"p99"}}, "0/2 (p99)"},
	} {
		if got := Met(tc.runs, func(m []string) []string { return m }, order); got != tc.want {
			t.Errorf("Met(%v) = %q, want %q", tc.runs, got, tc.want)
		}
	}
}
