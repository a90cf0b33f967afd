package main

import "testing"

func TestCount(t *testing.T) {
	got, err := count("testdata/p")
	if err != nil {
		t.Fatal(err)
	}
	if got["p"] != 8 { // A, B, V, F, T, T.X, NewT, T.M
		t.Errorf("count = %v, want p: 8", got)
	}
}
