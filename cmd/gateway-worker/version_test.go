package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/buildinfo"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/timetest"
)

func TestVersion(t *testing.T) {
	want := buildinfo.String("gateway-worker") + "\n"
	if !strings.HasPrefix(want, "gateway-worker ") || !strings.HasSuffix(want, " ("+buildinfo.GoVersion()+")\n") {
		t.Fatalf("buildinfo.String = %q, want gateway-worker VERSION (GOVERSION)", want)
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, stdout, stderr := run(t, args...)
		if code != 0 || stdout != want || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and %q", args, code, stdout, stderr, want)
		}
	}
	if code, _, stderr := run(t, "version", "extra"); code != 2 || !strings.Contains(stderr, `unexpected argument "extra"`) {
		t.Errorf("version extra: exit %d, %q; want 2 refusing the word", code, stderr)
	}
}

// TestRunLogsItsVersionFirst starts the worker against a real Redis and reads its first log
// line: "worker starting" with the build's version.
func TestRunLogsItsVersionFirst(t *testing.T) {
	srv := redistest.Start(t)
	key := filepath.Join(t.TempDir(), "vapid.pem")
	if code, _, stderr := run(t, "keygen", "--out", key); code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The worker's log is read through a pipe: its first line for the test, the rest drained.
	logR, logW := io.Pipe()
	firstLine := make(chan string, 1)
	go func() {
		br := bufio.NewReader(logR)
		line, _ := br.ReadString('\n')
		firstLine <- line
		_, _ = io.Copy(io.Discard, br)
	}()
	var stdout bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := runMain(ctx, []string{"run", "--http", "", "--redis", srv.URL(), "--vapid-key", key, "--subject", "mailto:ops@example.com",
			"--block", "50ms", "--grace", "1s"}, &stdout, logW)
		logW.Close()
		done <- code
	}()
	first := timetest.Receive(t, firstLine, 15*time.Second, "run's first log line")
	var rec map[string]any
	if err := json.Unmarshal([]byte(first), &rec); err != nil {
		t.Fatalf("first log line %q is not JSON: %v", first, err)
	}
	if rec["msg"] != "worker starting" || rec["version"] != buildinfo.Version() {
		t.Errorf("first log line %s; want msg \"worker starting\" and version %q", first, buildinfo.Version())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("run exit %d after its context ended", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop within 15 s of its context ending")
	}
}
