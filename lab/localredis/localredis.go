// Package localredis starts a throwaway redis-server for the lab's commands (demo, bench): a
// free loopback port, a temporary directory, no persistence. It is for trying and measuring
// the product, never for production.
package localredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Server is one throwaway redis-server process.
type Server struct {
	cmd *exec.Cmd
	dir string
	url string
}

// ErrNotInstalled is Start's error when there is no redis-server to start.
var ErrNotInstalled = errors.New("redis-server is not on PATH: install it (make deps, or apt-get install redis-server) or pass --redis URL")

// Start runs redis-server from PATH on a free 127.0.0.1 port and waits until it accepts
// connections. Stop ends it.
func Start(ctx context.Context) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "gateway-lab-redis-")
	if err != nil {
		return nil, err
	}
	// The kernel picks a free port; redis binds it a moment later. Another process could take
	// it in between, so a failed start is tried again on a new port.
	for range 3 {
		port, err := FreePort()
		if err != nil {
			break
		}
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "yes")
		// A process group of its own: the Ctrl-C that stops the demo must not kill the Redis
		// the demo still writes its last outcomes and its summary to (nor the bench's).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		r := &Server{cmd: cmd, dir: dir, url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
		if waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second) == nil {
			return r, nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	os.RemoveAll(dir)
	return nil, errors.New("redis-server did not start on a free port")
}

// URL is the server's redis:// URL.
func (r *Server) URL() string { return r.url }

// Stop ends the server and removes its directory.
func (r *Server) Stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	os.RemoveAll(r.dir)
}

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago: the kernel picks it and the
// listener is closed again, so another process may take it before the caller binds it.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitTCP polls until addr accepts a connection.
func waitTCP(ctx context.Context, addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := (&net.Dialer{Timeout: 200 * time.Millisecond}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
