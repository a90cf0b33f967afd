package retryredis

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// A real Redis for the tests (nothing stands in for it): a
// redis-server of its own on a free port of 127.0.0.1, with no
// persistence, or the one at REDIS_ADDR. Nothing else is reached.

type redisServer struct {
	t    testing.TB
	addr string
	port int
	dir  string
	cmd  *exec.Cmd
}

// sharedRedis is a Redis a test may share with others: REDIS_ADDR when
// set, else a server of its own. A test on it uses a prefix of its own.
func sharedRedis(t testing.TB) *redisServer {
	t.Helper()
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return &redisServer{t: t, addr: addr}
	}
	return ownRedis(t)
}

// ownRedis starts a redis-server that the test may kill, stop and flush;
// it is killed when the test ends.
func ownRedis(t testing.TB) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("REDIS_ADDR") != "" {
			t.Skip("redis-server not installed: this test controls a server of its own")
		}
		t.Fatal("redis-server not installed (.ci/run installs Debian's redis-server) and REDIS_ADDR unset")
	}
	s := &redisServer{t: t, dir: t.TempDir()}
	for try := 0; ; try++ {
		s.port = freePort(t)
		s.addr = "127.0.0.1:" + strconv.Itoa(s.port)
		if s.start() {
			break
		}
		require.Less(t, try, 3, "redis-server did not start")
	}
	t.Cleanup(s.kill)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start starts redis-server on s.port and waits until it answers PING.
func (s *redisServer) start() bool { return s.startWith() }

// portFree reports whether nothing listens on port of 127.0.0.1.
func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// startWith is start with more arguments for redis-server.
func (s *redisServer) startWith(more ...string) bool {
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning", "--dir", s.dir}, more...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	s.cmd.Cancel = nil
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		select {
		case <-done:
			return false // exited: the port was taken
		default:
		}
		if ping(s.addr) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.kill()
	return false
}

// ping reports whether a Redis answers PING at addr within 100 ms.
func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// kill ends the server at once (SIGKILL), resuming it first if stopped.
func (s *redisServer) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	for ping(s.addr) {
		time.Sleep(time.Millisecond)
	}
	s.cmd = nil
}

// restart kills the server and starts a new one, empty, on the same port.
func (s *redisServer) restart() {
	s.t.Helper()
	s.kill()
	for try := 0; !s.start(); try++ {
		require.Less(s.t, try, 20, "redis-server did not start again on its port")
		time.Sleep(20 * time.Millisecond)
	}
}

// stop and resume stall the server (SIGSTOP, SIGCONT): it accepts
// connections and answers nothing.
func (s *redisServer) stop()   { require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGSTOP)) }
func (s *redisServer) resume() { require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGCONT)) }

// client returns a client of the server, closed when the test ends: the
// context's deadline bounds its I/O, as the package doc asks.
func (s *redisServer) client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr, ContextTimeoutEnabled: true, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newStore returns a Store on c, closed when the test ends.
func newStore(t testing.TB, c redis.UniversalClient, opts ...Option) *Store {
	t.Helper()
	s := NewStore(c, opts...)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// testPrefix is a prefix of the test's own, so that tests on one REDIS_ADDR
// do not meet.
func testPrefix(t testing.TB) string {
	return "retryredis-test:" + t.Name() + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
}

// flush empties the server's every key.
func (s *redisServer) flush(t testing.TB) {
	t.Helper()
	require.NoError(t, s.client(t).FlushAll(context.Background()).Err())
}
