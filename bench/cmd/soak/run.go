package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/bench"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// A scene is what the fleet lives through.
type scene struct {
	name, title string
	redisDown   bool // Redis killed at downFrom, started again at downUntil
	hotLoop     bool // the provider asks for askFor; each replica calls in a tight loop, each call with a Budget
}

var scenes = []scene{
	{name: "a", title: "a: healthy paced soak"},
	{name: "b", title: "b: Redis killed, then restarted", redisDown: true},
	{name: "c", title: "c: a caller's hot loop, Retry-After: 60", hotLoop: true},
}

// A config is one run's parameters, the same for every scene.
type config struct {
	k                   int
	duration            time.Duration
	workers             int
	rate                float64 // the provider's request limit, a second
	latency             time.Duration
	downFrom, downUntil time.Duration // scene b
	askFor              time.Duration // scene c
	top                 int           // messages reported a run
}

// A result is one scene's run, with go-redis's default logger or the
// adapter.
type result struct {
	scene      scene
	adapter    bool
	tally      *tally
	ok, failed int64
	admitted   int64 // by the provider
}

// run runs sc once: a redis-server, the provider on 127.0.0.1, and K
// replica processes, each counted line by line.
func run(cfg config, sc scene, adapter bool) (result, error) {
	addr, stopRedis, err := bench.StartRedis()
	if err != nil {
		return result{}, err
	}
	defer func() { stopRedis() }()
	p := retryhttptest.NewProvider(retryhttptest.ProviderConfig{
		Requests: retryhttptest.Limit{Rate: cfg.rate, Size: int64(cfg.rate)},
		Latency:  cfg.latency,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	start := time.Now().Add(time.Second) // the replicas are up by then
	if sc.hotLoop {
		p.Outage(start.Add(cfg.askFor))
	}
	r := result{scene: sc, adapter: adapter, tally: newTally(start, int(cfg.duration/time.Second))}
	args := []string{"-provider", "http://" + ln.Addr().String(), "-redis", addr,
		"-start", strconv.FormatInt(start.UnixNano(), 10), "-duration", cfg.duration.String(),
		"-workers", strconv.Itoa(cfg.workers), "-hot-loop=" + strconv.FormatBool(sc.hotLoop),
		"-adapter=" + strconv.FormatBool(adapter)}
	wait, err := spawn(cfg.k, args, &r)
	if err != nil {
		return result{}, err
	}
	if sc.redisDown {
		_, ps, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(ps)
		time.Sleep(time.Until(start.Add(cfg.downFrom)))
		stopRedis()
		stopRedis = func() {}
		time.Sleep(time.Until(start.Add(cfg.downUntil)))
		if _, stopRedis, err = bench.StartRedisAt(port); err != nil {
			stopRedis = func() {}
			return result{}, fmt.Errorf("restarting redis-server: %w", err)
		}
	}
	if err := wait(start.Add(cfg.duration + 30*time.Second)); err != nil {
		return result{}, err
	}
	r.admitted = p.Stats().Admitted
	return r, nil
}

// spawn starts k replicas of this program with args, each line they
// write counted in r, and returns what waits for them all (killing those
// still running at the deadline).
func spawn(k int, args []string, r *result) (wait func(deadline time.Time) error, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var cmds []*exec.Cmd
	var readers sync.WaitGroup
	var ok, failed atomic.Int64
	for range k {
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(), replicaEnv+"=1")
		stdout, err1 := cmd.StdoutPipe()
		stderr, err2 := cmd.StderrPipe()
		if err := firstErr(err1, err2, cmd.Start()); err != nil {
			killAll(cmds)
			for _, c := range cmds {
				_ = c.Wait()
			}
			return nil, fmt.Errorf("starting a replica: %w", err)
		}
		cmds = append(cmds, cmd)
		for _, pipe := range []io.Reader{stdout, stderr} {
			readers.Go(func() { read(pipe, r.tally, &ok, &failed) })
		}
	}
	return func(deadline time.Time) error {
		timer := time.AfterFunc(time.Until(deadline), func() { killAll(cmds) })
		defer timer.Stop()
		readers.Wait() // the pipes close as the replicas exit
		var errs []error
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				errs = append(errs, err)
			}
		}
		r.ok, r.failed = ok.Load(), failed.Load()
		if len(errs) > 0 {
			return fmt.Errorf("%d of %d replicas failed: %w", len(errs), k, errs[0])
		}
		return nil
	}, nil
}

// read counts each line from a replica, when it arrives; the stats line
// it adds to ok and failed.
func read(pipe io.Reader, t *tally, ok, failed *atomic.Int64) {
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64<<10), 4<<20) // a stack trace in a line
	for sc.Scan() {
		line := sc.Text()
		if s, found := strings.CutPrefix(line, statsPrefix); found {
			var o, f int64
			if _, err := fmt.Sscan(s, &o, &f); err == nil {
				ok.Add(o)
				failed.Add(f)
				continue
			}
		}
		t.add(time.Now(), line)
	}
	_, _ = io.Copy(io.Discard, pipe)
}

func killAll(cmds []*exec.Cmd) {
	for _, c := range cmds {
		_ = c.Process.Kill()
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
