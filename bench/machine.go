package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine is what a measurement ran on, for its report: the CPU's model
// name, the commit (marked when the tree has uncommitted changes), and the
// load averages at the start and, sampled as the runs go, the 1-minute
// one's lowest and highest.
type Machine struct {
	CPU, Commit, LoadStart string
	lo, hi                 float64
}

// NewMachine reads the machine now: /proc/cpuinfo, git, /proc/loadavg.
func NewMachine() *Machine {
	m := &Machine{CPU: "unknown CPU", Commit: "unknown", LoadStart: LoadAvg(), lo: math.Inf(1), hi: math.Inf(-1)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(b))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	return m
}

// Sample notes the 1-minute load average now.
func (m *Machine) Sample() {
	f := strings.Fields(LoadAvg())
	if len(f) == 0 {
		return
	}
	if v, err := strconv.ParseFloat(f[0], 64); err == nil {
		m.lo, m.hi = min(m.lo, v), max(m.hi, v)
	}
}

// LoadRange is the lowest and the highest 1-minute load average sampled,
// to two decimals; "?" for both before a sample.
func (m *Machine) LoadRange() (low, high string) {
	if m.lo > m.hi {
		return "?", "?"
	}
	return strconv.FormatFloat(m.lo, 'f', 2, 64), strconv.FormatFloat(m.hi, 'f', 2, 64)
}

// LoadAvg is the 1, 5 and 15 minute load averages, "?" when unknown.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// WriteHead writes what every report's table of parameters starts with:
// the date the runs started, the machine (the load at the start, at the
// end, and the 1-minute one's range as sampled), Go and the commit.
func (m *Machine) WriteHead(w io.Writer, started time.Time, loadEnd string) {
	load := fmt.Sprintf("load average %s at start, %s at end", m.LoadStart, loadEnd)
	if low, high := m.LoadRange(); low != "?" {
		load += fmt.Sprintf(", the 1-minute one from %s to %s during the runs", low, high)
	}
	fmt.Fprintf(w, "| | |\n|---|---|\n")
	fmt.Fprintf(w, "| date | %s |\n", started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "| machine | %s, %d cores, shared with other work; %s |\n", m.CPU, runtime.NumCPU(), load)
	fmt.Fprintf(w, "| Go | %s %s/%s |\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "| commit | %s |\n", m.Commit)
}
