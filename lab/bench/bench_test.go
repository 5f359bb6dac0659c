package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/workerproc"
)

// TestBenchShort is the bench's short mode, run by make test so that it cannot rot: every
// contender delivers every message through the real processes (the gateway-worker and
// gateway-lab binaries, built here), the gateway unthrottled, paced at the shipped registry's
// rates, and paced with neither linger, the report has a row for each (Node's skipped only with a reason), and each
// gateway run stays within one VAPID signature per audience with a ledger record per job and
// its Redis figures measured.
func TestBenchShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs three contenders")
	}
	dir := t.TempDir()
	// The worker is built in the product's module, the lab in its own.
	if err := workerproc.Build(filepath.Join(dir, "gateway-worker")); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "../cmd/gateway-lab")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/gateway-lab: %v\n%s", err, out)
	}
	r := redistest.Start(t)
	o := Options{RedisURL: r.URL(), WorkerBinary: filepath.Join(dir, "gateway-worker"), LabBinary: filepath.Join(dir, "gateway-lab"),
		Out: dir, NodeDir: os.Getenv("GATEWAY_BENCH_NODE_DIR"),
		Args: []string{"--short"}, Mix: "fcm=72,autopush=19,apple=6,wns=3,unknown=1",
		Messages: 400, LatencyMessages: 50, LatencyRate: 500, PayloadSize: 128, Concurrency: 32, Sample: 10, Depths: []int{100, 3000}}
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Run(context.Background(), o, &out); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	var rep Report
	b, err := os.ReadFile(filepath.Join(dir, "bench-report.json"))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]Row{}
	for _, row := range rep.Rows {
		rows[row.Name] = row
	}
	for _, name := range []string{contenderFloor, contenderSendFloor, contenderGateway, contenderCampaign, contenderPaced, contenderNoLinger, contenderWebpushGo, contenderNode} {
		row, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("no %s row", name)
		case row.Skipped != "":
			if name != contenderNode {
				t.Errorf("%s skipped: %s", name, row.Skipped)
			}
			t.Logf("%s skipped: %s", name, row.Skipped)
		case row.Delivered != row.Messages || row.Messages == 0:
			t.Errorf("%s delivered %d of %d: %v", name, row.Delivered, row.Messages, row.Failures)
		case row.CPUPerMsg <= 0 || row.MsgsPerSec <= 0:
			t.Errorf("%s: %.1f µs/msg, %.0f msgs/s", name, row.CPUPerMsg, row.MsgsPerSec)
		}
	}
	for _, name := range []string{contenderGateway, contenderCampaign, contenderPaced, contenderNoLinger} {
		gw := rows[name]
		if gw.Signatures == 0 || gw.Signatures > int64(rep.Audiences) || gw.SignaturesSelf != gw.Signatures {
			t.Errorf("%s signed %d JWTs (pushsim saw %d) for %d audiences", name, gw.SignaturesSelf, gw.Signatures, rep.Audiences)
		}
		if gw.Ledger == 0 || gw.RedisRoundTripsPerJob <= 0 || gw.RedisCommandsPerJob <= 0 || gw.RedisCPUPerMsg <= 0 ||
			gw.RedisBytesKeptPerJob == 0 || gw.LatencyP99 <= 0 || gw.BytesPerMsg <= 0 {
			t.Errorf("%s row incomplete: %+v", name, gw)
		}
	}
	if wg := rows[contenderWebpushGo]; wg.Signatures < int64(wg.Messages) {
		t.Errorf("webpush-go: pushsim saw %d JWTs for %d messages; it signs one a message", wg.Signatures, wg.Messages)
	}
	for _, d := range []int{100, 3000} {
		row, ok := rows[fmt.Sprintf("%s, %d queued", contenderPaced, d)]
		if !ok || row.Depth != d || row.Delivered != row.Messages || row.CPUPerMsg <= 0 || row.RedisCommandsPerJob <= 0 || row.PeakRSS <= 0 {
			t.Errorf("no complete row for %d queued: %+v", d, row)
		}
	}
	// Four cost ratios (the campaign's against a job each among them), commands and Redis CPU
	// per job for each gateway run, each run's signatures, and four ratios of the deep backlog
	// to the shallow one; every one measured.
	if len(rep.Targets) != 14 {
		t.Errorf("%d targets, want 14", len(rep.Targets))
	}
	for _, tg := range rep.Targets {
		if tg.Missing != "" || tg.Measured <= 0 {
			t.Errorf("target %q not measured: %q", tg.What, tg.Missing)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "bench-report.md"))
	if err != nil || !strings.Contains(string(md), "| contender | msgs/s |") || !strings.Contains(string(md), "| target |") ||
		!strings.Contains(string(md), "| gateway run | CPU µs/msg | Redis commands/job |") {
		t.Errorf("bench-report.md lacks the tables (%v):\n%s", err, md)
	}
	for _, want := range []string{"vs gateway", "decrypts the body of 1 push in 10", "targets:", "gateway-paced", "gateway-paced-no-linger"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBinariesFindTheWorker checks where the bench looks for gateway-worker when it is not
// given: beside the lab's executable (bin/ after make build), else on PATH, else a refusal
// that says what to do.
func TestBinariesFindTheWorker(t *testing.T) {
	bin, onPath := t.TempDir(), t.TempDir()
	self := filepath.Join(bin, "gateway-lab")
	t.Setenv("PATH", onPath)
	if w, l, err := binaries(Options{WorkerBinary: "/opt/gw", LabBinary: "/opt/lab"}, self); err != nil || w != "/opt/gw" || l != "/opt/lab" {
		t.Errorf("given binaries: %q, %q, %v", w, l, err)
	}
	if _, _, err := binaries(Options{}, self); err == nil || !strings.Contains(err.Error(), "--worker-binary") {
		t.Errorf("no gateway-worker anywhere: %v, want a refusal naming --worker-binary", err)
	}
	for _, dir := range []string{onPath, bin} {
		worker := filepath.Join(dir, "gateway-worker")
		if err := os.WriteFile(worker, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		// With one on PATH and then one beside the lab as well, the one beside it wins.
		if w, l, err := binaries(Options{}, self); err != nil || w != worker || l != self {
			t.Errorf("gateway-worker in %s: %q, %q, %v; want %q and %q", dir, w, l, err, worker, self)
		}
	}
}
