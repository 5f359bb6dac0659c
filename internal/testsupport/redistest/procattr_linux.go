//go:build linux

package redistest

import "syscall"

// procAttr puts redis-server in its own process group (a ^C to go test does not race the
// cleanup) and has the kernel SIGKILL it if the test binary dies without running cleanups.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
