package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestCancelCommand: jobs waiting in the intake, the transactional lane, the bulk lane and the
// delayed set (due now) are cancelled by the built binary's `cancel`; an unknown id is named
// and makes the exit 1; a real worker then delivers the jobs nobody cancelled and none of the
// others (pushsim counts no request for them); a job the worker holds in flight is named so,
// exit 1, and ends with its own record; each cancelled job has one CANCELED record, a second cancel names them
// unknown and writes nothing, and `audit` finds one terminal record for every job.
func TestCancelCommand(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	c := srv.Client(t)
	sim := simtest.Start(t, pushsim.Config{})
	key := filepath.Join(t.TempDir(), "vapid.pem")
	code, pub, stderr := run(t, "keygen", "--out", key)
	if code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	st := stream.New(c, nil, stream.Options{Consumer: "router-a"})
	if err := st.Setup(ctx, []string{"apple"}); err != nil {
		t.Fatal(err)
	}
	subs := map[string]job.Subscription{}
	enqueue := func(id, class string) {
		t.Helper()
		sub, err := sim.Subscribe("apple", "", strings.TrimSpace(pub))
		if err != nil {
			t.Fatal(err)
		}
		subs[id] = sub
		j := map[string]any{"id": id, "subscription": sub, "payload": "hello " + id}
		if class != "" {
			j["class"] = class
		}
		b, _ := json.Marshal(j)
		if _, err := st.Producer().Enqueue(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	route := func(id string, class job.Class) stream.Entry {
		t.Helper()
		in, _, err := st.ReadIntake(ctx, 0, class, 1, 0)
		if err != nil || len(in) != 1 {
			t.Fatalf("ReadIntake: %v, %v", in, err)
		}
		if v, err := st.ToLane(ctx, in[0], "apple", class, id, in[0].Fields["job"], time.Now().UnixMilli()); err != nil || v != stream.Moved {
			t.Fatalf("ToLane %s: %v, %v", id, v, err)
		}
		return in[0]
	}
	// A retry due now: a worker would promote and send it at once.
	enqueue("c-delayed", "")
	route("c-delayed", job.ClassTransactional)
	lane, _, err := st.ReadLanes(ctx, 0, "apple", stream.LaneRead{Total: 1})
	if err != nil || len(lane) != 1 {
		t.Fatalf("ReadLane: %v, %v", lane, err)
	}
	if v, err := st.ToDelayed(ctx, lane[0], stream.RetryRecord{ID: "c-delayed", Provider: "apple", Due: time.Now(), Attempt: 1,
		Job: lane[0].Fields["job"], EnqueuedAtMs: time.Now().UnixMilli(), Code: "PROVIDER_DOWN"}); err != nil || v != stream.Queued {
		t.Fatalf("ToDelayed: %v, %v", v, err)
	}
	enqueue("c-lane", "")
	route("c-lane", job.ClassTransactional)
	enqueue("c-bulk", "bulk")
	route("c-bulk", job.ClassBulk)
	enqueue("c-intake", "")
	enqueue("keep", "")
	enqueue("flying", "")
	// Every answer takes a while, so that keep and flying are in flight when they are cancelled.
	if err := sim.SetFault("apple", pushsim.Fault{Kind: pushsim.Slow, Delay: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	cancelled := []string{"c-intake", "c-lane", "c-bulk", "c-delayed"}

	bin := builtBinary(t)
	code, stdout, stderr := runBinary(t, bin, append([]string{"cancel", "--redis", srv.URL()}, append(cancelled, "nobody")...)...)
	if code != 1 {
		t.Errorf("cancel with an unknown id: exit %d; want 1\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"c-intake: cancelled (it waited in intake)", "c-lane: cancelled (it waited in lane:apple)",
		"c-bulk: cancelled (it waited in lane:apple:bulk)", "c-delayed: cancelled (it waited in delayed)",
		"nobody: not cancelled: unknown",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("cancel output lacks %q:\n%s", want, stdout)
		}
	}

	// A real worker: it delivers keep, and nothing else is left to deliver.
	t.Setenv("GATEWAY_CA_FILE", sim.CAFile())
	t.Setenv("GATEWAY_CONNECT_TO", strings.Join(sim.ConnectTo(), ","))
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wout, werr proctest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(wctx, []string{"run", "--http", "", "--redis", srv.URL(), "--vapid-key", key,
			"--subject", "mailto:ops@example.com", "--block", "100ms", "--grace", "1s"}, &wout, &werr)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for sim.Stats().InFlight < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("keep and flying not in flight after 30 s:\n%s", werr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, stdout, stderr = runBinary(t, bin, "cancel", "--redis", srv.URL(), "flying")
	if code != 1 || !strings.Contains(stdout, "flying: not cancelled: in flight (a worker has read it from lane:apple); it ends with its own record") {
		t.Errorf("cancel of a job in flight: exit %d:\n%s%s\nwant 1 and the job named in flight", code, stdout, stderr)
	}
	results := stream.KeysFor("wp", 0).Results
	for c.XLen(ctx, results).Val() < int64(len(cancelled))+2 {
		if time.Now().After(deadline) {
			t.Fatalf("no record of keep after 30 s:\n%s", werr.String())
		}
		select {
		case code := <-done:
			t.Fatalf("run exited %d:\n%s", code, werr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Long enough for the promoter and every lane to have had their turn at what was cancelled.
	time.Sleep(time.Second)
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d:\n%s", code, werr.String())
	}
	for _, id := range []string{"keep", "flying"} {
		if ds := sim.DeliveriesFor(subs[id].Endpoint); len(ds) != 1 {
			t.Errorf("pushsim deliveries of %s: %d; want 1", id, len(ds))
		}
	}
	for _, id := range cancelled {
		if ds := sim.DeliveriesFor(subs[id].Endpoint); len(ds) != 0 {
			t.Errorf("pushsim deliveries of the cancelled %s: %d; want none", id, len(ds))
		}
	}
	if n := sim.Stats().Requests; n != 2 {
		t.Errorf("pushsim served %d requests; want 2 (keep's and flying's)", n)
	}

	// Twice: every id is unknown now, and nothing more is written.
	code, stdout, _ = runBinary(t, bin, append([]string{"cancel", "--redis", srv.URL()}, cancelled...)...)
	if code != 1 || strings.Count(stdout, "not cancelled: unknown") != len(cancelled) {
		t.Errorf("second cancel: exit %d:\n%s\nwant 1 and every id unknown", code, stdout)
	}
	byCode := map[string]int{}
	for _, m := range c.XRange(ctx, results, "-", "+").Val() {
		id, _ := m.Values["id"].(string)
		code, _ := m.Values["code"].(string)
		byCode[id+" "+code]++
	}
	for _, id := range cancelled {
		if byCode[id+" CANCELED"] != 1 {
			t.Errorf("ledger of %s: %v; want one CANCELED record", id, byCode)
		}
	}
	if byCode["flying ACCEPTED"] != 1 || byCode["flying CANCELED"] != 0 {
		t.Errorf("ledger of flying: %v; want its one ACCEPTED record", byCode)
	}
	ids := filepath.Join(t.TempDir(), "ids.txt")
	if err := os.WriteFile(ids, []byte(strings.Join(append(cancelled, "keep", "flying"), "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := run(t, "audit", "--redis", srv.URL(), "--ids", ids); code != 0 {
		t.Errorf("audit: exit %d:\n%s%s", code, stdout, stderr)
	}
}

// builtBinary builds gateway-worker as `make build` does and returns its path.
func builtBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway-worker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runBinary runs the built binary with args, with no GATEWAY_ variable of the test's
// environment, and returns its exit code and outputs.
func runBinary(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GATEWAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", bin, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestCancelRefusesBadIDs: an empty or overlong id is refused, naming it, before Redis is
// asked anything.
func TestCancelRefusesBadIDs(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"", "JOB_ID 1 is empty"},
		{strings.Repeat("x", job.MaxIDLen+1), "a job id is at most"},
	} {
		code, _, stderr := run(t, "cancel", "--redis", "redis://127.0.0.1:1/0", tc.id)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("cancel %q: exit %d, %q; want 2 and %q", tc.id[:min(len(tc.id), 8)], code, stderr, tc.want)
		}
	}
}
