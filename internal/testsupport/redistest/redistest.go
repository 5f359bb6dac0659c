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
)

// startTimeout bounds how long Start and Restart wait for PING to answer; AOF replay of a
// test-sized file takes milliseconds, so hitting this means the server is broken.
const startTimeout = 15 * time.Second

// Server is one redis-server process owned by a test: a standalone server, a node of a Cluster
// or a member of a Sentinel setup. Its methods are safe for concurrent use.
type Server struct {
	t       testing.TB
	bin     string
	dir     string // immutable after launch
	port    int    // immutable after launch
	busPort int    // cluster bus port, 0 outside a cluster; immutable after launch
	mode    mode   // immutable
	args    []string

	mu        sync.Mutex
	cmd       *exec.Cmd     // guarded by mu; nil while stopped
	done      chan struct{} // guarded by mu; closed when cmd has exited
	replicaOf string        // guarded by mu; host:port passed as --replicaof at each start, "" for none
}

// mode is the kind of process a Server runs.
type mode int

const (
	standalone mode = iota
	clusterNode
	sentinel
)

// sentinelConf is the file a Sentinel reads at start and rewrites with what it learns.
const sentinelConf = "sentinel.conf"

// Option changes how the server is started.
type Option func(*config)

type config struct {
	extra []string
}

// WithConfig adds a redis-server configuration directive (name without the leading dashes),
// for example WithConfig("maxmemory", "64mb"). Later options override earlier ones.
func WithConfig(name string, values ...string) Option {
	return func(c *config) { c.extra = append(c.extra, directive(name, values)...) }
}

// directive is a configuration directive as redis-server command-line arguments.
func directive(name string, values []string) []string {
	return append([]string{"--" + name}, values...)
}

// Start runs redis-server on a free 127.0.0.1 port with AOF on (appendfsync always), no RDB
// snapshots and t.TempDir() as its directory. The server is stopped at cleanup. Start fails
// the test, never skips it, when redis-server is not on PATH.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var c config
	for _, o := range opts {
		o(&c)
	}
	return launch(t, lookBinary(t, "redis-server"), spec{extra: c.extra})
}

// spec says how launch starts one process.
type spec struct {
	mode      mode
	extra     []string // configuration arguments, after the ones launch sets
	replicaOf string   // host:port to replicate from, "" for none
	conf      string   // content of sentinel.conf; sentinel mode only
}

// binaries says which Debian package installs each binary the helpers run.
var binaries = map[string]string{"redis-server": "redis-server", "redis-cli": "redis-tools"}

// lookBinary finds name on PATH or fails the test saying how to install it.
func lookBinary(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("redistest: %s is not on PATH (%v); install it (Debian: apt-get install %s) — these tests need a real Redis", name, err, binaries[name])
	}
	return bin
}

// launch starts one redis-server process described by sp on free ports, in a new temporary
// directory, and stops it at cleanup.
func launch(t testing.TB, bin string, sp spec) *Server {
	t.Helper()
	s := &Server{t: t, bin: bin, dir: t.TempDir(), mode: sp.mode, args: sp.extra, replicaOf: sp.replicaOf}
	if sp.mode == sentinel {
		if err := os.WriteFile(filepath.Join(s.dir, sentinelConf), []byte(sp.conf), 0o600); err != nil {
			t.Fatalf("redistest: write %s: %v", sentinelConf, err)
		}
	}
	nports := 1
	if sp.mode == clusterNode {
		nports = 2
	}
	// The ports are picked by the kernel and released before redis binds them; another
	// process can take one in between, so a failed start is retried on new ports.
	var lastErr error
	for range 5 {
		ports, err := freePorts(nports)
		if err != nil {
			t.Fatalf("redistest: find a free port: %v", err)
		}
		s.port = ports[0]
		if nports > 1 {
			s.busPort = ports[1]
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

// freePorts returns n distinct loopback ports that were free a moment ago. The listeners are
// held until all n are picked, so the kernel cannot hand out one port twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// argv is the command line of the next start. Caller must hold mu.
func (s *Server) argv() []string {
	var args []string
	if s.mode == sentinel {
		// The configuration file must come first; Sentinel rewrites it, so it stays in dir.
		args = append(args, filepath.Join(s.dir, sentinelConf), "--sentinel")
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", "redis.log",
	)
	if s.mode != sentinel {
		args = append(args,
			"--appendonly", "yes",
			"--appendfsync", "always",
			"--save", "",
			"--databases", "16",
			// A master otherwise waits 5 s for more replicas before a full sync starts.
			"--repl-diskless-sync-delay", "0",
		)
	}
	if s.mode == clusterNode {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(s.busPort),
		)
	}
	if s.replicaOf != "" {
		host, port, _ := net.SplitHostPort(s.replicaOf)
		args = append(args, "--replicaof", host, port)
	}
	return append(args, s.args...)
}

// start launches the process and waits until it answers PING. Caller must not hold mu.
func (s *Server) start() error {
	s.mu.Lock()
	args := s.argv()
	s.mu.Unlock()
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

	if err := s.waitReady(done, cmd.Process.Pid); err != nil {
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
// The server that answers must be process pid: a port found free can be taken by another
// test's server before ours binds it, and ours then exits while the other one answers.
func (s *Server) waitReady(done <-chan struct{}, pid int) error {
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
		var info string
		if err == nil {
			info, err = c.Info(ctx, "server").Result()
		}
		cancel()
		if err == nil {
			if got := infoField(info, "process_id"); got != strconv.Itoa(pid) {
				return fmt.Errorf("%s is answered by process %s, not by the redis-server started (%d)", s.Addr(), got, pid)
			}
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

// infoField is the value of name in the text of an INFO section, "" when it is not there.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == name {
			return v
		}
	}
	return ""
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

// Dir is the server's data directory (AOF files and redis.log; nodes.conf in a cluster,
// sentinel.conf for a Sentinel).
func (s *Server) Dir() string { return s.dir }

// running reports whether the process has been started and not stopped or killed.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// setReplicaOf sets the master the next start replicates from ("" for none).
func (s *Server) setReplicaOf(addr string) {
	s.mu.Lock()
	s.replicaOf = addr
	s.mu.Unlock()
}

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

// Restart starts the server again on the same port (and cluster bus port) and directory (the
// AOF is replayed) and waits until PING answers. A running server is killed first.
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
