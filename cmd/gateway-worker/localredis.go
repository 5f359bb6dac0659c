package main

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

// localRedis is a throwaway redis-server for the demo: a free loopback port, a temporary
// directory, no persistence. It is for trying the product, never for production.
type localRedis struct {
	cmd *exec.Cmd
	dir string
	url string
}

var errNoRedis = errors.New("redis-server is not on PATH: install it (make deps, or apt-get install redis-server) or pass --redis URL")

func startLocalRedis(ctx context.Context) (*localRedis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedis
	}
	dir, err := os.MkdirTemp("", "gateway-demo-redis-")
	if err != nil {
		return nil, err
	}
	// The kernel picks a free port; redis binds it a moment later. Another process could take
	// it in between, so a failed start is tried again on a new port.
	for range 3 {
		port, err := freePort()
		if err != nil {
			break
		}
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "yes")
		// A process group of its own: the Ctrl-C that stops the demo must not kill the Redis
		// the demo still writes its last outcomes and its summary to.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		r := &localRedis{cmd: cmd, dir: dir, url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
		if waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second) == nil {
			return r, nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	os.RemoveAll(dir)
	return nil, errors.New("redis-server did not start on a free port")
}

// Stop ends the server and removes its directory.
func (r *localRedis) Stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	os.RemoveAll(r.dir)
}

func freePort() (int, error) {
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
