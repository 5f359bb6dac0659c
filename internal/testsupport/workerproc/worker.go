package workerproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
)

// Options say how Start runs the binary.
type Options struct {
	// Logs gets the process's standard output and error, in a new file of its own. Required.
	Logs *proctest.Logs
	// Name is the file's name pattern, as os.CreateTemp takes it; "worker-*.log" when empty.
	Name string
	// NoFile, when above 0, is the RLIMIT_NOFILE (soft and hard) the process runs under, set by
	// the shell it is exec'd from (so the process keeps the shell's pid).
	NoFile int
}

// Worker is one process of the built binary, waited on from its start.
type Worker struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // the exit status, once done is closed
}

// ErrNotStopped is wrapped by Stop's error for a worker that had not exited within its bound
// after SIGTERM, and was then killed.
var ErrNotStopped = errors.New("did not stop")

// Start runs the built binary with args. The test stops it (Stop, Kill); a test that fails to
// start it fails.
func Start(t testing.TB, o Options, args ...string) *Worker {
	t.Helper()
	if bin == "" {
		t.Fatal("workerproc: no binary built: call workerproc.Main from TestMain")
	}
	if o.Logs == nil {
		t.Fatal("workerproc.Start: Options.Logs is required")
	}
	name := o.Name
	if name == "" {
		name = "worker-*.log"
	}
	var cmd *exec.Cmd
	if o.NoFile > 0 {
		script := fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, o.NoFile)
		cmd = exec.Command("/bin/sh", append([]string{"-c", script, bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	out := o.Logs.Create(name)
	defer out.Close() // the process has its own descriptor once started
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &Worker{cmd: cmd, log: out.Name(), done: make(chan struct{})}
	go func() { // ends when the process exits, which Stop and Kill wait for
		w.err = cmd.Wait()
		close(w.done)
	}()
	return w
}

// Pid is the process's id.
func (w *Worker) Pid() int { return w.cmd.Process.Pid }

// Log is the path of the file its output goes to.
func (w *Worker) Log() string { return w.log }

// Done is closed once the process has exited.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Signal sends sig to the process; once it has exited, the error is os.ErrProcessDone.
func (w *Worker) Signal(sig os.Signal) error {
	select {
	case <-w.done:
		return os.ErrProcessDone
	default:
	}
	return w.cmd.Process.Signal(sig)
}

// Wait waits for the process to exit and returns its exit status (nil for 0).
func (w *Worker) Wait() error {
	<-w.done
	return w.err
}

// Kill sends SIGKILL and waits for the exit, whose status it returns.
func (w *Worker) Kill() error {
	_ = w.Signal(syscall.SIGKILL)
	return w.Wait()
}

// Stop is Stop of w alone.
func (w *Worker) Stop(within time.Duration) error { return Stop(within, w)[0] }

// Stop sends SIGTERM to every worker of ws at once, so that they shut down side by side, then
// waits for each and returns its exit status (nil for a clean exit), in the order of ws. With
// within above 0, a worker still running within after the signal is killed, and its error
// wraps ErrNotStopped; with 0, Stop waits as long as the workers take.
func Stop(within time.Duration, ws ...*Worker) []error {
	for _, w := range ws {
		_ = w.Signal(syscall.SIGTERM)
	}
	var deadline <-chan time.Time
	if within > 0 {
		timer := time.NewTimer(within)
		defer timer.Stop()
		deadline = timer.C
	}
	errs := make([]error, len(ws))
	expired := false
	for i, w := range ws {
		if !expired {
			select {
			case <-w.done:
				errs[i] = w.err
				continue
			case <-deadline:
				expired = true
			}
		}
		select {
		case <-w.done: // it exited by the deadline after all
			errs[i] = w.err
		default:
			errs[i] = fmt.Errorf("%w within %v of SIGTERM; killed: %v", ErrNotStopped, within, w.Kill())
		}
	}
	return errs
}

// HTTPAddr waits for the worker's "http listener" log line and returns the address it names:
// where --http 127.0.0.1:0 took its port. It fails the test after within, or as soon as the
// worker has exited without logging it.
func (w *Worker) HTTPAddr(t testing.TB, within time.Duration) string {
	t.Helper()
	end := time.Now().Add(within)
	for {
		exited := false
		select {
		case <-w.done:
			exited = true // read the log once more: the line may have come before the exit
		default:
		}
		if addr := listenerAddr(w.log); addr != "" {
			return addr
		}
		switch {
		case exited:
			t.Fatalf("worker exited (%v) without logging its listener's address; its log is %s", w.err, w.log)
		case time.Now().After(end):
			t.Fatalf("no listener address in %s after %v", w.log, within)
		}
		time.Sleep(20 * time.Millisecond) // polling a file for a state, not waiting for an event
	}
}

// listenerAddr is the addr of the first "http listener" record of the JSON log file, or "".
func listenerAddr(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	for line := range bytes.Lines(data) {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "http listener" {
			return rec.Addr
		}
	}
	return ""
}
