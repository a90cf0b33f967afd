package main

import (
	"sort"
	"strconv"
	"strings"
)

// benchSet is the result lines of `go test -bench` output: for each
// benchmark (its name without the -GOMAXPROCS suffix), for each unit, every
// sample, in the order they came.
type benchSet struct {
	names   []string
	samples map[string]map[string][]float64
	cpu     string // the "cpu:" header line
}

func parseBench(text string) benchSet {
	s := benchSet{samples: map[string]map[string][]float64{}}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "cpu:"); ok && s.cpu == "" {
			s.cpu = strings.TrimSpace(v)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue // not a result line
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		units, ok := s.samples[name]
		if !ok {
			units = map[string][]float64{}
			s.samples[name] = units
			s.names = append(s.names, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			units[f[i+1]] = append(units[f[i+1]], v)
		}
	}
	return s
}

// median returns the median of the samples of name in unit, and whether
// there were any.
func (s benchSet) median(name, unit string) (float64, bool) {
	v := append([]float64(nil), s.samples[name][unit]...)
	if len(v) == 0 {
		return 0, false
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

// count returns how many samples of name there are.
func (s benchSet) count(name string) int { return len(s.samples[name]["ns/op"]) }

// span returns the lowest and the highest sample of name in unit.
func (s benchSet) span(name, unit string) (lo, hi float64, ok bool) {
	v := s.samples[name][unit]
	if len(v) == 0 {
		return 0, 0, false
	}
	lo, hi = v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi, true
}
