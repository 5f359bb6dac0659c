package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/workerproc"
)

// TestPriorityShort is `gateway-lab priority --short`, run by make test so that it cannot rot:
// the three scenarios against the real gateway-worker binary (built here), Redis and pushsim.
// Every transactional job measured has its ledger record, the campaign sent and its slow log
// was read and the settings put back, and the stopped worker left nothing pending while every
// job of the backlog was recorded once.
func TestPriorityShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the worker and runs three scenarios")
	}
	dir := t.TempDir()
	if err := workerproc.Build(filepath.Join(dir, "gateway-worker")); err != nil {
		t.Fatal(err)
	}
	r := redistest.Start(t)
	rdb := r.Client(t)
	ctx := context.Background()
	slowlogBefore, err := rdb.ConfigGet(ctx, "slowlog-*").Result()
	if err != nil {
		t.Fatal(err)
	}
	o := PriorityOptions{RedisURL: r.URL(), WorkerBinary: filepath.Join(dir, "gateway-worker"), Out: dir, Short: true,
		Args: []string{"--short"}, Mix: "fcm=72,autopush=19,apple=6,wns=3,unknown=1", Concurrency: 32, Sample: 10,
		Rate: 20, JobPayloadSize: 128, PayloadSize: 1024, BulkProducers: 4}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := RunPriority(ctx, o, &out); err != nil {
		t.Fatalf("priority: %v\n%s", err, out.String())
	}
	var rep PriorityReport
	b, err := os.ReadFile(filepath.Join(dir, "priority-report.json"))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Backlog == nil || rep.Campaign == nil || rep.Stop == nil {
		t.Fatalf("a scenario is missing: %s", b)
	}
	// Every transactional job written has its ledger record, and its wait is measured.
	measured := func(what string, l Latency, some bool) {
		t.Helper()
		if l.Recorded != l.Jobs || l.Dead != 0 || (some && l.Jobs == 0) {
			t.Errorf("%s: %d jobs, %d recorded, %d dead", what, l.Jobs, l.Recorded, l.Dead)
		}
		if l.Jobs > 0 && (l.Max <= 0 || l.P50 > l.P99 || l.P99 > l.Max) {
			t.Errorf("%s: p50 %.0f, p99 %.0f, max %.0f ms", what, l.P50, l.P99, l.Max)
		}
	}
	bl := rep.Backlog
	measured("bulk-backlog alone", bl.Alone, true)
	measured("bulk-backlog behind", bl.Behind, true)
	if bl.Enqueuing.Jobs+bl.Enqueued.Jobs != bl.Behind.Jobs {
		t.Errorf("bulk-backlog: %d jobs behind, %d while enqueued and %d after", bl.Behind.Jobs, bl.Enqueuing.Jobs, bl.Enqueued.Jobs)
	}
	if bl.Bulk != ShortBulk || bl.BulkRecorded <= 0 || bl.BulkPerSec <= 0 || bl.EnqueueSecs <= 0 || bl.RunSecs <= 0 || bl.Ended == "" ||
		bl.CPU.Worker <= 0 || bl.CPU.Redis <= 0 || bl.CPU.Lab <= 0 {
		t.Errorf("bulk-backlog incomplete: %+v", bl)
	}
	cp := rep.Campaign
	measured("campaign alone", cp.Alone, true)
	measured("campaign adding", cp.Adding, false)
	measured("campaign sending", cp.Sending, true)
	if cp.Recipients != ShortRecipients || cp.Sent <= 0 || cp.Codes["ACCEPTED"] != cp.Sent || cp.SendPerSec <= 0 ||
		cp.MemAfter <= cp.MemBefore || cp.BytesPerRecipient <= 0 || cp.RoutedSecs < cp.AddSecs || cp.SendCPU.Worker <= 0 || cp.AddCPU.Redis <= 0 {
		t.Errorf("campaign incomplete: %+v", cp)
	}
	sl := cp.Slowlog
	for i, c := range sl.Slowest {
		if c.Micros < 1000 || c.Command == "" || (i > 0 && c.Micros > sl.Slowest[i-1].Micros) {
			t.Errorf("slow log: call %d is %+v", i, c)
		}
	}
	if sl.Over2ms > sl.Logged || len(sl.Slowest) > min(5, sl.Logged) {
		t.Errorf("slow log: %+v", sl)
	}
	after, err := rdb.ConfigGet(ctx, "slowlog-*").Result()
	if err != nil || after["slowlog-log-slower-than"] != slowlogBefore["slowlog-log-slower-than"] || after["slowlog-max-len"] != slowlogBefore["slowlog-max-len"] {
		t.Errorf("slow log settings %v after the run, %v before (%v)", after, slowlogBefore, err)
	}
	st := rep.Stop
	if st.JobsAtSignal == 0 || st.PendingAtSignal < st.JobsAtSignal || st.ExitSecs <= 0 || st.SettledSecs <= 0 {
		t.Errorf("stop: %+v", st)
	}
	if sum(st.PendingAfterExit) != 0 {
		t.Errorf("stop: the stopped worker left %v pending", st.PendingAfterExit)
	}
	if st.Recorded != ShortStopMessages || st.Duplicates != 0 || st.SignalAt <= 0 || st.SignalAt >= ShortStopMessages {
		t.Errorf("stop: %d of %d jobs recorded, %d twice, signal at %d", st.Recorded, ShortStopMessages, st.Duplicates, st.SignalAt)
	}
	// Nothing of the scenarios is left in Redis.
	if keys, err := rdb.Keys(ctx, "prio*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys left: %v (%v)", keys, err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "priority-report.md"))
	for _, want := range []string{"| transactional jobs | jobs | p50 | p99 | max |", "| behind the bulk backlog |", "| while the campaign sent |",
		"| slowest Redis calls |", "| pending under A at SIGTERM |"} {
		if err != nil || !strings.Contains(string(md), want) {
			t.Errorf("priority-report.md lacks %q (%v):\n%s", want, err, md)
		}
	}
}
