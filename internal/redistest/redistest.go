// Package redistest starts real redis-server processes for tests: each on a free loopback
// port, with its own temporary directory, AOF on and fsynced on every write, so that a test can
// SIGKILL the server, start it again on the same port and directory, and see exactly what a
// production Redis with appendfsync always would have kept.
//
// Tests never skip when redis-server is missing: Start fails the test with a message that says
// how to install it, because a silently skipped storage test is a storage test that never ran.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/localredis"
)

// startTimeout bounds how long Start and Restart wait for PING to answer; AOF replay of a
// test-sized file takes milliseconds, so hitting this means the server is broken.
const startTimeout = 15 * time.Second

// Server is one redis-server process owned by a test. Its methods are safe for concurrent use.
type Server struct {
	t    testing.TB
	bin  string
	dir  string // immutable after Start
	port int    // immutable after Start
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd     // guarded by mu; nil while stopped
	done chan struct{} // guarded by mu; closed when cmd has exited
}

// Option changes how the server is started.
type Option func(*config)

type config struct {
	extra []string
}

// WithConfig adds a redis-server configuration directive (name without the leading dashes),
// for example WithConfig("maxmemory", "64mb"). Later options override earlier ones.
func WithConfig(name string, values ...string) Option {
	return func(c *config) {
		c.extra = append(c.extra, "--"+name)
		c.extra = append(c.extra, values...)
	}
}

// Start runs redis-server on a free 127.0.0.1 port with AOF on (appendfsync always), no RDB
// snapshots and t.TempDir() as its directory. The server is stopped at cleanup. Start fails
// the test, never skips it, when redis-server is not on PATH.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server is not on PATH (%v); install it (Debian: apt-get install redis-server) — these tests need a real Redis", err)
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	s.args = c.extra
	// The port is picked by the kernel and released before redis binds it; another process
	// can take it in between, so a failed bind is retried on a new port.
	var lastErr error
	for range 5 {
		s.port, err = localredis.FreePort()
		if err != nil {
			t.Fatalf("redistest: find a free port: %v", err)
		}
		if lastErr = s.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("redistest: start redis-server: %v", lastErr)
	}
	t.Cleanup(s.Stop)
	return s
}

// start launches the process and waits until it answers PING. Caller must not hold mu.
func (s *Server) start() error {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--appendonly", "yes",
		"--appendfsync", "always",
		"--save", "",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", "redis.log",
		"--databases", "16",
	}
	args = append(args, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	if err := s.waitReady(done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		s.mu.Lock()
		s.cmd, s.done = nil, nil
		s.mu.Unlock()
		return fmt.Errorf("%w; log tail:\n%s", err, s.logTail(20))
	}
	return nil
}

// waitReady polls PING until it answers PONG (not LOADING), the process exits, or the deadline.
func (s *Server) waitReady(done <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second, PoolSize: 1})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	var err error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return errors.New("redis-server exited during start-up")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return errors.New("redis-server exited during start-up")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("redis-server did not answer PING within %v: %v", startTimeout, err)
}

func (s *Server) logTail(n int) string {
	f, err := os.Open(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the redis:// URL of database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir is the server's data directory (AOF files and redis.log).
func (s *Server) Dir() string { return s.dir }

// Client returns a new client for the server, closed at the test's cleanup (before the server
// stops, since cleanups run last-registered first).
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL and waits for the process to exit: nothing is flushed that appendfsync
// always had not already written.
func (s *Server) Kill() {
	s.signal(syscall.SIGKILL)
}

// Stop shuts the server down gracefully (SIGTERM) and waits for it. Stopping a stopped server
// does nothing.
func (s *Server) Stop() {
	s.signal(syscall.SIGTERM)
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(startTimeout):
		// A server that ignores SIGTERM this long is wedged; do not leak it past the test.
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart starts the server again on the same port and directory (the AOF is replayed) and
// waits until PING answers. A running server is killed first.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	// The port was ours a moment ago; a bind failure here is another process racing for it,
	// which is rare enough that a short retry covers it.
	for range 50 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart redis-server on %s: %v", s.Addr(), err)
}

// CommandStats returns INFO commandstats as calls per command (lower case, subcommands as
// "xgroup|create"). Commands run inside Lua scripts are counted too, which is what Redis reports.
func (s *Server) CommandStats(t testing.TB) map[string]int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("redistest: INFO commandstats: %v", err)
	}
	return ParseCommandStats(info)
}

// ParseCommandStats parses the text of INFO commandstats.
func ParseCommandStats(info string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			if k == "calls" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err == nil {
					out[strings.TrimPrefix(name, "cmdstat_")] = n
				}
			}
		}
	}
	return out
}

// ResetStats clears INFO commandstats (CONFIG RESETSTAT), so a benchmark can count only its
// own commands.
func (s *Server) ResetStats(t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatalf("redistest: CONFIG RESETSTAT: %v", err)
	}
}
