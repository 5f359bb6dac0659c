package workerproc_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/workerproc"
)

const version = "v0.0.0-workerproctest"

func TestMain(m *testing.M) { os.Exit(workerproc.Main(m, workerproc.Version(version))) }

// runArgs are the flags of a worker on a Redis of its own, its listener on a free port.
func runArgs(t *testing.T) []string {
	t.Helper()
	r := redistest.Start(t)
	pem, _ := simtest.VAPIDKey(t).MarshalPEM()
	keyFile := filepath.Join(t.TempDir(), "vapid.pem")
	if err := os.WriteFile(keyFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"run", "--redis", r.URL(), "--vapid-key", keyFile, "--subject", "mailto:ops@webpush-gateway.example.com",
		"--grace", "2s", "--block", "200ms", "--log-level", "info", "--http", "127.0.0.1:0"}
}

// The binary Main built is the worker, stamped with the version it was given.
func TestMainBuildsTheStampedWorker(t *testing.T) {
	out, err := workerproc.Command("version").CombinedOutput()
	if want := "gateway-worker " + version + " (" + runtime.Version() + ")\n"; err != nil || string(out) != want {
		t.Fatalf("gateway-worker version: %v, %q; want %q", err, out, want)
	}
}

// A worker started runs until stopped: its listener answers, its output is in its log, and
// SIGTERM ends it with exit 0.
func TestStartAndStop(t *testing.T) {
	t.Parallel()
	logs := proctest.NewLogs(t, 2000)
	w := workerproc.Start(t, workerproc.Options{Logs: logs, Name: "run-*.log"}, runArgs(t)...)
	addr := w.HTTPAddr(t, 30*time.Second)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `webpush_build_info{goversion="`+runtime.Version()+`",version="`+version+`"} 1`) {
		t.Errorf("the worker at %s serves no webpush_build_info of %s:\n%.2000s", addr, version, body)
	}
	if files := logs.Files(); len(files) != 1 || files[0] != w.Log() || !strings.HasPrefix(filepath.Base(w.Log()), "run-") {
		t.Errorf("logs %v, want just the worker's %s, named run-*", files, w.Log())
	}
	if err := w.Stop(30 * time.Second); err != nil {
		t.Fatalf("Stop: %v; want a clean exit", err)
	}
	select {
	case <-w.Done():
	default:
		t.Fatal("Done is open after Stop returned")
	}
	if err := w.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after the exit: %v, want os.ErrProcessDone", err)
	}
	if n := logs.Count(`"msg":"worker stopped"`); n != 1 {
		t.Errorf("%d \"worker stopped\" lines in the log, want 1: the worker shut down on SIGTERM", n)
	}
}

// Kill ends a worker with SIGKILL; Stop kills a worker that does not stop within its bound and
// says so, and waits for every worker it was given.
func TestKillAndStopsBound(t *testing.T) {
	t.Parallel()
	args := runArgs(t)
	logs := proctest.NewLogs(t, 2000)
	killed, stuck, clean := workerproc.Start(t, workerproc.Options{Logs: logs}, args...),
		workerproc.Start(t, workerproc.Options{Logs: logs}, args...), workerproc.Start(t, workerproc.Options{Logs: logs}, args...)
	for _, w := range []*workerproc.Worker{killed, stuck, clean} {
		w.HTTPAddr(t, 30*time.Second)
	}
	if err := killed.Kill(); !signaled(err, syscall.SIGKILL) {
		t.Errorf("Kill: %v, want the exit of a SIGKILL", err)
	}
	// A stopped process holds SIGTERM until it is continued, which nothing does.
	if err := stuck.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var errs []error
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		errs = workerproc.Stop(time.Second, stuck, clean)
	}()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		_ = stuck.Kill()
		<-stopped
		t.Fatal("Stop still waiting a minute after its bound of 1s")
	}
	if !errors.Is(errs[0], workerproc.ErrNotStopped) || !strings.Contains(errs[0].Error(), "did not stop within 1s of SIGTERM; killed: signal: killed") {
		t.Errorf("Stop of a stopped process: %v, want ErrNotStopped and the kill", errs[0])
	}
	if errs[1] != nil {
		t.Errorf("Stop of a running worker beside it: %v, want a clean exit", errs[1])
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("Stop killed after %v, before its bound of 1s", took)
	}
}

// With NoFile, the worker itself (the shell's exec, same pid) runs under that limit.
func TestNoFile(t *testing.T) {
	t.Parallel()
	w := workerproc.Start(t, workerproc.Options{Logs: proctest.NewLogs(t, 2000), NoFile: 200}, runArgs(t)...)
	w.HTTPAddr(t, 30*time.Second) // past the exec, the worker's own
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", w.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^Max open files\s+200\s+200\s`).Match(limits) {
		t.Errorf("limits of %d:\n%s\nwant open files 200 200", w.Pid(), limits)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", w.Pid()))
	if err != nil || filepath.Base(exe) != "gateway-worker" {
		t.Errorf("process %d runs %q (%v), want the worker", w.Pid(), exe, err)
	}
	if err := w.Stop(30 * time.Second); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// fatalTB is the test's TB, except that Fatalf records its message and ends the goroutine it
// runs in.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// HTTPAddr fails at once, without waiting out its bound, for a worker that exited without a
// listener, and after its bound for one that has none yet.
func TestHTTPAddrFails(t *testing.T) {
	t.Parallel()
	logs := proctest.NewLogs(t, 2000)
	exited := workerproc.Start(t, workerproc.Options{Logs: logs}, "version")
	silent := workerproc.Start(t, workerproc.Options{Logs: logs}, append(runArgs(t), "--http", "")...) // runs with no listener
	for _, tc := range []struct {
		w      *workerproc.Worker
		within time.Duration
		want   string
	}{
		{exited, time.Minute, "worker exited (<nil>) without logging its listener's address"},
		{silent, 200 * time.Millisecond, "no listener address in " + silent.Log() + " after 200ms"},
	} {
		ft := &fatalTB{TB: t}
		done := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(done)
			addr := tc.w.HTTPAddr(ft, tc.within)
			ft.msg = "returned " + addr
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("HTTPAddr still waiting after 30s, its bound %v", tc.within)
		}
		if !strings.Contains(ft.msg, tc.want) {
			t.Errorf("HTTPAddr: %q, want %q", ft.msg, tc.want)
		}
		if took := time.Since(start); tc.within == time.Minute && took > 30*time.Second {
			t.Errorf("HTTPAddr took %v for a worker that had exited", took)
		}
	}
	if err := silent.Stop(30 * time.Second); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// signaled says whether err is the exit of a process ended by sig.
func signaled(err error, sig syscall.Signal) bool {
	var ee interface{ Sys() any }
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
