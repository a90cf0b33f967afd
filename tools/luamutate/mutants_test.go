package main

import (
	"os"
	"strings"
	"testing"
)

// TestMutants: comments and strings are left alone; each comparison goes
// to each of the others; a binary minus becomes a plus and a unary one
// goes; literals move by one; math.max, and/or, true/false swap.
func TestMutants(t *testing.T) {
	src := "-- a < b in a comment\n" +
		"local x = math.max(a, -b) - 1 -- x + y\n" +
		"if x <= 2.5 and s ~= 'a<b' then return true end\n" +
		"--[[ long < comment ]] local y = [[ long > string ]]\n"
	var got []string
	for _, m := range mutants(src) {
		got = append(got, m.From+">"+show(m.To))
		if m.apply(src) == src {
			t.Errorf("mutant %d changes nothing", m.ID)
		}
	}
	want := []string{"math.max>math.min", "->(nothing)", "->+", "1>2", "1>0",
		"<=><", "<=>>", "<=>>=", "<=>==", "<=>~=", "2.5>3.5", "2.5>1.5", "and>or",
		"~=><", "~=><=", "~=>>", "~=>>=", "~=>==", "true>false"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("mutants:\n got %v\nwant %v", got, want)
	}
	ms := mutants(src)
	if m := ms[0]; m.Line != 2 || m.Col != 11 || m.Source != "local x = math.max(a, -b) - 1 -- x + y" {
		t.Errorf("first mutant at %d:%d %q", m.Line, m.Col, m.Source)
	}
}

// TestMutantsOfTheScript: every mutant of apply.lua changes it, and the
// script has some of each kind.
func TestMutantsOfTheScript(t *testing.T) {
	b, err := os.ReadFile("../../retryredis/apply.lua")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, m := range mutants(string(b)) {
		kinds[m.Kind]++
		if m.apply(string(b)) == string(b) || strings.Contains(m.From, "--") {
			t.Errorf("mutant %d (%s -> %s at %d:%d) is no change", m.ID, m.From, m.To, m.Line, m.Col)
		}
	}
	for _, k := range []string{"comparison", "arithmetic", "unary", "minmax", "logical", "boolean", "literal"} {
		if kinds[k] == 0 {
			t.Errorf("no %s mutant of apply.lua", k)
		}
	}
}
