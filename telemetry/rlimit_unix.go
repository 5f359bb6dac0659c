//go:build unix

package telemetry

import "syscall"

// fileLimit is the process's soft RLIMIT_NOFILE, 0 when it cannot be read. Go raises the soft
// limit to the hard limit when the process starts, so this is the most the worker may open.
func fileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}
