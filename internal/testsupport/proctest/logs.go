package proctest

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Logs are the output files of the processes a test starts, one file a process: the test
// counts and waits for lines over all of them, and when it has failed their tails are printed
// at its cleanup. Its methods are safe for concurrent use.
type Logs struct {
	t     testing.TB
	dir   string
	tail  int
	mu    sync.Mutex
	files []string // guarded by mu: every file Create made, in order
}

// NewLogs returns a set with no file yet, whose files go to a temporary directory of t's own.
// When t has failed, its cleanup prints the last tail bytes of every file.
func NewLogs(t testing.TB, tail int) *Logs {
	t.Helper()
	l := &Logs{t: t, dir: t.TempDir(), tail: tail}
	t.Cleanup(l.dump)
	return l
}

// Create makes a new file for a process's output, named by pattern as os.CreateTemp names
// files ("worker-*.log"), and adds it to the set. The caller closes it.
func (l *Logs) Create(pattern string) *os.File {
	l.t.Helper()
	f, err := os.CreateTemp(l.dir, pattern)
	if err != nil {
		l.t.Fatal(err)
	}
	l.mu.Lock()
	l.files = append(l.files, f.Name())
	l.mu.Unlock()
	return f
}

// Files are the paths of the files, in the order Create made them.
func (l *Logs) Files() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.files...)
}

// Count is how many times s occurs over every file.
func (l *Logs) Count(s string) int {
	n := 0
	for _, f := range l.Files() {
		data, _ := os.ReadFile(f)
		n += strings.Count(string(data), s)
	}
	return n
}

// Wait waits until s occurs at least n times over every file, failing the test after within.
func (l *Logs) Wait(s string, n int, within time.Duration) {
	l.t.Helper()
	deadline := time.Now().Add(within)
	for l.Count(s) < n {
		if time.Now().After(deadline) {
			l.t.Fatalf("fewer than %d output lines with %q after %v", n, s, within)
		}
		time.Sleep(20 * time.Millisecond) // polling files for a state, not waiting for an event
	}
}

func (l *Logs) dump() {
	if !l.t.Failed() {
		return
	}
	for _, f := range l.Files() {
		data, _ := os.ReadFile(f)
		if len(data) > l.tail {
			data = data[len(data)-l.tail:]
		}
		l.t.Logf("--- %s\n%s", f, data)
	}
}
