package main

import "testing"

func TestParseBench(t *testing.T) {
	out := `goos: linux
cpu: Some CPU
BenchmarkHappy/base=stub/lib=bare-2   	1000	  4.5 ns/op	  0 B/op	  0 allocs/op
BenchmarkHappy/base=stub/lib=bare-2   	1000	  5.5 ns/op	  0 B/op	  0 allocs/op
BenchmarkHappy/base=stub/lib=bare-2   	1000	  9.0 ns/op	  0 B/op	  0 allocs/op
BenchmarkLoopbackPaired/lib=retryhttp-2	10000	37612 ns/op	37381 bare-ns/op	1.006 vs-bare
BenchmarkBroken-2 notanumber 1 ns/op
PASS
`
	s := parseBench(out)
	if s.cpu != "Some CPU" {
		t.Errorf("cpu = %q", s.cpu)
	}
	if got, want := len(s.names), 2; got != want {
		t.Fatalf("names %q, want %d", s.names, want)
	}
	if got, ok := s.median("BenchmarkHappy/base=stub/lib=bare", "ns/op"); !ok || got != 5.5 {
		t.Errorf("median ns/op = %v, %v; want 5.5", got, ok)
	}
	if got, _ := s.median("BenchmarkLoopbackPaired/lib=retryhttp", "vs-bare"); got != 1.006 {
		t.Errorf("vs-bare = %v, want 1.006", got)
	}
	if lo, hi, _ := s.span("BenchmarkHappy/base=stub/lib=bare", "ns/op"); lo != 4.5 || hi != 9 {
		t.Errorf("span = %v..%v, want 4.5..9", lo, hi)
	}
	if _, ok := s.median("BenchmarkNone", "ns/op"); ok {
		t.Error("median of a missing benchmark is ok")
	}
	if got := s.count("BenchmarkHappy/base=stub/lib=bare"); got != 3 {
		t.Errorf("count = %d, want 3", got)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[string]string{"12": "12", "1234": "1234", "12345": "12 345", "1234567": "1 234 567"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%q) = %q, want %q", in, got, want)
		}
	}
}
