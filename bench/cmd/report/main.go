// Command report runs the scenarios of package bench that are not Go
// benchmarks (a large POST, a full outage, Retry-After) and writes
// RESULTS.md from them and from the benchmark output that bench/run saved.
// bench/run is the way to call it.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func main() {
	var (
		childPost = flag.String("child-post", "", "internal: run the POST scenario for this library and print JSON")
		sizeMiB   = flag.Int("size", 64, "request body of the POST scenario, in MiB")
		callers   = flag.Int("callers", 32, "concurrent callers in the outage scenario")
		calls     = flag.Int("calls", 25, "calls each caller makes in the outage scenario")
		raCalls   = flag.Int("ra-calls", 8, "calls per library and status in the Retry-After scenario")
		libRaw    = flag.String("lib-bench", "", "raw `go test -bench` output of the library module")
		libStat   = flag.String("lib-stat", "", "benchstat output of -lib-bench")
		cmpRaw    = flag.String("cmp-bench", "", "raw `go test -bench` output of this module")
		cmpStat   = flag.String("cmp-stat", "", "benchstat -col /lib output of -cmp-bench")
		commands  = flag.String("commands", "", "file listing the commands bench/run ran")
		out       = flag.String("out", "RESULTS.md", "where to write the report")
	)
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("report: ")

	if *childPost != "" {
		lib, ok := bench.LibByName(*childPost)
		if !ok {
			log.Fatalf("no library %q", *childPost)
		}
		r, err := bench.Post(lib, *sizeMiB<<20)
		if err != nil {
			log.Fatal(err)
		}
		json.NewEncoder(os.Stdout).Encode(r)
		return
	}

	rep := &report{
		libRaw: parseBench(mustRead(*libRaw)), libStat: mustRead(*libStat),
		cmpRaw: parseBench(mustRead(*cmpRaw)), cmpStat: mustRead(*cmpStat),
		commands: mustRead(*commands), sizeMiB: *sizeMiB,
	}

	log.Printf("POST of %d MiB, one fresh process per library", *sizeMiB)
	for _, lib := range bench.Compared() {
		r, err := postInChild(lib, *sizeMiB)
		if err != nil {
			log.Fatalf("POST through %s: %v", lib.Name, err)
		}
		rep.posts = append(rep.posts, r)
	}

	log.Printf("outage: %d callers x %d calls", *callers, *calls)
	for _, lib := range []bench.Lib{bench.Bare, bench.RetryHTTP, bench.RetryHTTPQuota, bench.Retryablehttp, bench.Failsafe, bench.FailsafeBudget} {
		rep.outages = append(rep.outages, bench.Outage(lib, *callers, *calls))
	}

	log.Printf("Retry-After: %v, %d calls per library and status, one window", bench.RetryAfterAsk, *raCalls)
	rep.raLibs = []bench.Lib{bench.RetryHTTP, bench.Retryablehttp, bench.Failsafe, bench.FailsafeNoJitter}
	rep.retryAfter = bench.RetryAfter(rep.raLibs, *raCalls)

	rep.now = time.Now()
	rep.env = environment()
	var buf bytes.Buffer
	rep.write(&buf)
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s", *out)
}

// postInChild runs the POST scenario in a fresh process, so that its
// memory figures hold that call and nothing else.
func postInChild(lib bench.Lib, sizeMiB int) (bench.PostResult, error) {
	var r bench.PostResult
	self, err := os.Executable()
	if err != nil {
		return r, err
	}
	cmd := exec.Command(self, "-child-post", lib.Name, "-size", fmt.Sprint(sizeMiB))
	cmd.Stderr = os.Stderr
	outb, err := cmd.Output()
	if err != nil {
		return r, err
	}
	err = json.Unmarshal(outb, &r)
	return r, err
}

func mustRead(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	return string(b)
}

type env struct {
	cpu, cores, mem, kernel, goVersion, commit string
}

func environment() env {
	e := env{
		cpu:       "unknown",
		cores:     fmt.Sprint(runtime.NumCPU()),
		goVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		kernel:    runtime.GOOS,
		mem:       "unknown",
		commit:    "unknown",
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				e.cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			e.mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	if b, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		e.commit = strings.TrimSpace(string(b))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			e.commit += " (with uncommitted changes)"
		}
	}
	return e
}
