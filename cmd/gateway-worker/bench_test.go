package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/internal/redistest"
)

// TestBenchShort is the bench's short mode, run by make test so that it cannot rot: every
// contender delivers every message through the real processes, the report has a row for each
// (Node's skipped only with a reason), and the gateway stays within one VAPID signature per
// audience with a ledger record per job.
func TestBenchShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three contenders")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gateway-worker")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := redistest.Start(t)
	o := benchOptions{redisURL: r.URL(), workerBinary: bin, out: dir, nodeDir: os.Getenv("GATEWAY_BENCH_NODE_DIR"),
		args: []string{"--short"}, mix: "fcm=72,autopush=19,apple=6,wns=3,unknown=1",
		messages: 400, latencyN: 50, latencyRate: 500, payloadSize: 128, concurrency: 32, sample: 10}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runBench(context.Background(), o, &out); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	var rep benchReport
	b, err := os.ReadFile(filepath.Join(dir, "bench-report.json"))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]benchRow{}
	for _, row := range rep.Rows {
		rows[row.Name] = row
	}
	for _, name := range []string{benchFloor, benchGateway, benchWebpushGo, benchNode} {
		row, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("no %s row", name)
		case row.Skipped != "":
			if name != benchNode {
				t.Errorf("%s skipped: %s", name, row.Skipped)
			}
			t.Logf("%s skipped: %s", name, row.Skipped)
		case row.Delivered != row.Messages || row.Messages == 0:
			t.Errorf("%s delivered %d of %d: %v", name, row.Delivered, row.Messages, row.Failures)
		case row.CPUPerMsg <= 0 || row.MsgsPerSec <= 0:
			t.Errorf("%s: %.1f µs/msg, %.0f msgs/s", name, row.CPUPerMsg, row.MsgsPerSec)
		}
	}
	gw := rows[benchGateway]
	if gw.Signatures == 0 || gw.Signatures > int64(rep.Audiences) || gw.SignaturesSelf != gw.Signatures {
		t.Errorf("gateway signed %d JWTs (pushsim saw %d) for %d audiences", gw.SignaturesSelf, gw.Signatures, rep.Audiences)
	}
	if wg := rows[benchWebpushGo]; wg.Signatures < int64(wg.Messages) {
		t.Errorf("webpush-go: pushsim saw %d JWTs for %d messages; it signs one a message", wg.Signatures, wg.Messages)
	}
	if gw.Ledger == 0 || gw.RedisRoundTripsPerJob <= 0 || gw.RedisCommandsPerJob <= 0 || gw.LatencyP99 <= 0 || gw.BytesPerMsg <= 0 {
		t.Errorf("gateway row incomplete: %+v", gw)
	}
	if len(rep.Targets) != 5 {
		t.Errorf("%d targets, want 5", len(rep.Targets))
	}
	md, err := os.ReadFile(filepath.Join(dir, "bench-report.md"))
	if err != nil || !strings.Contains(string(md), "| contender | msgs/s |") || !strings.Contains(string(md), "| target |") {
		t.Errorf("bench-report.md lacks the tables (%v):\n%s", err, md)
	}
	for _, want := range []string{"vs gateway", "decrypts the body of 1 push in 10", "targets:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
