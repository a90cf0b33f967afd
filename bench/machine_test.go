package bench

import "testing"

// TestMachineLoadRange: no sample is "?", then the lowest and the highest.
func TestMachineLoadRange(t *testing.T) {
	m := &Machine{lo: 1e9, hi: -1e9}
	if low, high := m.LoadRange(); low != "?" || high != "?" {
		t.Errorf("before a sample: %s, %s; want ?, ?", low, high)
	}
	m = NewMachine()
	m.Sample()
	m.Sample()
	if low, high := m.LoadRange(); LoadAvg() != "?" && (low == "?" || high == "?") {
		t.Errorf("after two samples: %s, %s", low, high)
	}
	if m.Commit == "" || m.CPU == "" || m.LoadStart == "" {
		t.Errorf("NewMachine: %+v", m)
	}
}
