package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// TestStatusAndInspectShowScheduledJobs: status counts a shard's scheduled jobs and gives the
// next send_at on the delayed set's row, in text and JSON; inspect says a job is scheduled.
func TestStatusAndInspectShowScheduledJobs(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	st := stream.New(srv.Client(t), nil, stream.Options{Consumer: "worker-a"})
	if err := st.Setup(ctx, []string{"fcm"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Producer().Enqueue(ctx, []byte(testJob(t, "later")), []byte(testJob(t, "latest"))); err != nil {
		t.Fatal(err)
	}
	es, _, err := st.ReadIntake(ctx, 0, job.ClassTransactional, 2, 0)
	if err != nil || len(es) != 2 {
		t.Fatalf("ReadIntake: %v, %v", es, err)
	}
	next := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	for i, id := range []string{"later", "latest"} {
		if v, err := st.ToScheduled(ctx, es[i], stream.ScheduledRecord{ID: id, Provider: "fcm", Job: es[i].Fields["job"],
			EnqueuedAtMs: time.Now().UnixMilli(), SendAt: next.Add(time.Duration(i) * time.Hour)}); err != nil || v != stream.Moved {
			t.Fatalf("ToScheduled %s: %v, %v", id, v, err)
		}
	}

	code, stdout, stderr := run(t, "status", "--redis", srv.URL())
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	if re := `(?m)^0 +delayed +2 +- +- +- +0 due now, next in (1h59m|2h0m)[0-9.]*s?; 2 scheduled, next send_at in (1h59m|2h0m)[0-9.]*s?$`; !regexp.MustCompile(re).MatchString(stdout) {
		t.Errorf("status output lacks %s:\n%s", re, stdout)
	}
	code, stdout, stderr = run(t, "status", "--redis", srv.URL(), "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, stderr)
	}
	var rep inspect.StatusReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	for _, q := range rep.Queues {
		if q.Stream == "delayed" && (q.Scheduled == nil || *q.Scheduled != 2 || q.NextSendAt == nil || !q.NextSendAt.Equal(next)) {
			t.Errorf("delayed row %+v, want 2 scheduled and the next send_at %v", q, next)
		}
	}
	code, stdout, stderr = run(t, "inspect", "--redis", srv.URL(), "later")
	if want := "scheduled: waiting for its send_at " + next.UTC().Format(time.RFC3339); code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("inspect later: exit %d, %s%s; want %q", code, stdout, stderr, want)
	}
}
