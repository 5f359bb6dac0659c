package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestEnqueueLineOverTheLimit: a line over the read limit is refused with its line number and
// its size against the limit, the lines after it are enqueued, the exit is the input-error
// class, and no resume hint sends the next run back to that line.
func TestEnqueueLineOverTheLimit(t *testing.T) {
	const maxLine = 16 << 20 // the help names it
	srv := redistest.Start(t)
	jobs := filepath.Join(t.TempDir(), "jobs.jsonl")
	big := `{"id":"big","payload":"` + strings.Repeat("p", maxLine) + `"}`
	lines := []string{`{"id":"a"}`, big, `{"id":"b"}`, `{"id":"c"}`}
	if err := os.WriteFile(jobs, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "enqueue", "--redis", srv.URL(), jobs)
	want := fmt.Sprintf("%s:2: not enqueued: the line is %d bytes, over the %d-byte limit of a line", jobs, len(big), maxLine)
	if code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stdout, "enqueued 3 jobs from "+jobs+"; 1 lines refused") {
		t.Fatalf("enqueue: exit %d\nstdout %q\nstderr %.300q\nwant exit 2, 3 jobs, and %q", code, stdout, stderr, want)
	}
	if strings.Contains(stderr, "run again from") {
		t.Errorf("enqueue printed a resume hint though every other line was enqueued: %.300q", stderr)
	}
	n, err := srv.Client(t).XLen(context.Background(), stream.KeysFor(stream.DefaultPrefix, 0).Intake).Result()
	if err != nil || n != 3 {
		t.Errorf("intake holds %d entries (%v); want the 3 lines around the long one", n, err)
	}
}
