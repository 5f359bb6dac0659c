package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that passes everything to the test, except that inside
// expectFatal a Fatal or Fatalf is recorded and ends the goroutine, so a test can check what a
// helper says when it fails.
type recorder struct {
	testing.TB
	mu        sync.Mutex
	expecting bool   // guarded by mu
	msg       string // guarded by mu
}

func newRecorder(t testing.TB) *recorder { return &recorder{TB: t} }

func (r *recorder) Fatalf(format string, args ...any) { r.fatal(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any)                 { r.fatal(fmt.Sprint(args...)) }

func (r *recorder) fatal(msg string) {
	r.mu.Lock()
	expecting := r.expecting
	r.msg = msg
	r.mu.Unlock()
	if !expecting {
		r.TB.Fatal(msg)
	}
	runtime.Goexit()
}

// expectFatal runs fn in its own goroutine and returns what it failed the test with; the test
// fails if fn returns without failing.
func (r *recorder) expectFatal(fn func()) string {
	r.TB.Helper()
	r.mu.Lock()
	r.expecting, r.msg = true, ""
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expecting = false
	if r.msg == "" {
		r.TB.Fatal("the helper returned without failing the test")
	}
	return r.msg
}

func TestMissingBinaries(t *testing.T) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("this test needs redis-server on PATH: %v", err)
	}
	rec := newRecorder(t)
	t.Setenv("PATH", t.TempDir())
	for name, start := range map[string]func(){
		"Start":         func() { Start(rec) },
		"StartCluster":  func() { StartCluster(rec) },
		"StartSentinel": func() { StartSentinel(rec) },
	} {
		msg := rec.expectFatal(start)
		if !strings.Contains(msg, "redis-server is not on PATH") || !strings.Contains(msg, "apt-get install redis-server") {
			t.Errorf("%s without redis-server: %s", name, msg)
		}
	}

	only := t.TempDir()
	if err := os.Symlink(server, filepath.Join(only, "redis-server")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", only)
	msg := rec.expectFatal(func() { StartCluster(rec) })
	if !strings.Contains(msg, "redis-cli is not on PATH") || !strings.Contains(msg, "apt-get install redis-tools") {
		t.Errorf("StartCluster without redis-cli: %s", msg)
	}
}

func TestTopologyOptionErrors(t *testing.T) {
	rec := newRecorder(t)
	for _, tc := range []struct {
		name  string
		start func()
		want  string
	}{
		{"two masters", func() { StartCluster(rec, ClusterMasters(2)) }, "2 masters; a cluster needs at least 3"},
		{"negative replicas", func() { StartCluster(rec, ClusterReplicas(-1)) }, "-1 replicas per master"},
		{"master name with a space", func() { StartSentinel(rec, SentinelMasterName("a b")) }, `master name "a b"`},
		{"empty master name", func() { StartSentinel(rec, SentinelMasterName("")) }, `master name ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := rec.expectFatal(tc.start); !strings.Contains(msg, tc.want) {
				t.Errorf("failure %q does not say %q", msg, tc.want)
			}
		})
	}
}
