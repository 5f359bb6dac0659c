package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// run calls the command line in-process and returns its exit code and outputs.
func run(t *testing.T, args ...string) (int, string, string) {
	return proctest.Run(t, runMain, args...)
}

func TestKeygen(t *testing.T) {
	out := filepath.Join(t.TempDir(), "vapid.pem")
	code, stdout, stderr := run(t, "keygen", "--out", out)
	if code != 0 {
		t.Fatalf("keygen exit %d: %s", code, stderr)
	}
	pub := strings.TrimSpace(stdout)
	if len(pub) != 87 {
		t.Fatalf("public key %q is %d characters, want 87 (65 bytes, base64url)", pub, len(pub))
	}
	info, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Fatalf("key file mode %o, want 600", mode)
	}
	pem, _ := os.ReadFile(out)
	if !strings.Contains(string(pem), "PRIVATE KEY") || strings.Contains(stdout+stderr, "PRIVATE KEY") {
		t.Fatalf("the private key must go to the file only")
	}
	if code, _, stderr := run(t, "keygen", "--out", out); code == 0 || !strings.Contains(stderr, "exists") {
		t.Fatalf("a second keygen to the same file: exit %d, %q; want a refusal", code, stderr)
	}
}

func TestCheck(t *testing.T) {
	code, stdout, stderr := run(t, "check", "../../registry.yaml")
	if code != 0 || !strings.Contains(stdout, "ok, 5 providers") {
		t.Fatalf("check of the shipped registry: exit %d, %q %q", code, stdout, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	data := "version: 1\nproviders:\n  - id: fallback\n    kind: generic\n    rate: fast\n"
	if err := os.WriteFile(bad, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, "check", bad)
	if code != 1 || !strings.Contains(stderr, bad+":5:") || !strings.Contains(stderr, "rate") {
		t.Fatalf("check of a bad file: exit %d, stderr %q; want exit 1 and %s:5: ... rate ...", code, stderr, bad)
	}
}

// sendTarget starts pushsim, subscribes to provider for the application server key pub and
// writes the subscription to a file for --subscription. The transport flags point at the
// simulator through the environment, as a container would give them.
func sendTarget(t *testing.T, provider, pub string) (sim *pushsim.Server, sub job.Subscription, file string) {
	t.Helper()
	sim = simtest.Start(t, pushsim.Config{})
	sub, err := sim.Subscribe(provider, "", pub)
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(t.TempDir(), "sub.json")
	data, _ := json.Marshal(sub)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GATEWAY_CA_FILE", sim.CAFile())
	t.Setenv("GATEWAY_CONNECT_TO", strings.Join(sim.ConnectTo(), ","))
	return sim, sub, file
}

func TestSendThroughPushsim(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "vapid.pem")
	code, pub, stderr := run(t, "keygen", "--out", keyFile)
	if code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	sim, sub, subFile := sendTarget(t, "apple", strings.TrimSpace(pub))
	code, stdout, stderr := run(t, "send", "--subscription", subFile, "--payload", "from the CLI",
		"--vapid-key", keyFile, "--subject", "mailto:ops@example.com", "--urgency", "low")
	if code != 0 {
		t.Fatalf("send exit %d: stdout %q stderr %q", code, stdout, stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("send printed %q, not one JSON object: %v", stdout, err)
	}
	for k, v := range map[string]any{"code": "ACCEPTED", "status": float64(201), "provider": "apple", "retryable": false} {
		if out[k] != v {
			t.Errorf("%s = %v, want %v", k, out[k], v)
		}
	}
	for _, k := range []string{"retry_after", "detail"} {
		if _, ok := out[k]; !ok {
			t.Errorf("output has no %q field: %s", k, stdout)
		}
	}
	if ds := sim.DeliveriesFor(sub.Endpoint); len(ds) != 1 || string(ds[0].Plaintext) != "from the CLI" {
		t.Fatalf("pushsim deliveries = %+v, want one carrying the payload", ds)
	}

	// Expired: exit 1 and a GONE object.
	sim.Expire(sub.Endpoint)
	code, stdout, _ = run(t, "send", "--subscription", subFile, "--payload", "again",
		"--vapid-key", keyFile, "--subject", "mailto:ops@example.com")
	if code != 1 || !strings.Contains(stdout, `"code":"GONE"`) {
		t.Fatalf("send to an expired subscription: exit %d, %q; want 1 and GONE", code, stdout)
	}
}

func TestSendRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subscription", []string{"send", "--vapid-key", "k", "--subject", "mailto:a@example.com"}, "required"},
		{"bad subject", []string{"send", "--subscription", "testdata/sub.json", "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:me@localhost"}, "localhost"},
		{"missing key file", []string{"send", "--subscription", "testdata/sub.json", "--vapid-key", "testdata/none.pem", "--subject", "mailto:a@example.com"}, `"default": not a readable file (no such file or directory) nor a valid raw key`},
		{"bad connect-to", []string{"send", "--subscription", "testdata/sub.json", "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--connect-to", "nonsense"}, "connect-to"},
		{"stray word hides later flags", []string{"send", "--subscription", "testdata/sub.json", "stray", "--vapid-key", "testdata/vapid.pem"}, `unexpected argument "stray"`},
		{"run with a stray word", []string{"run", "--redis", "redis://127.0.0.1:1/0", "stray", "--grace", "1s"}, `unexpected argument "stray"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 mentioning %q", code, stderr, tc.want)
			}
		})
	}
}

func TestUnknownCommand(t *testing.T) {
	if code, _, stderr := run(t, "nope"); code != 2 || !strings.Contains(stderr, "unknown command") {
		t.Fatalf("exit %d, %q", code, stderr)
	}
}

// TestMistypedCommandGetsDidYouMean: a command or subcommand 2 edits or fewer from one names it;
// a word far from every command names none.
func TestMistypedCommandGetsDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, `unknown command "stauts"; did you mean "status"?`},
		{[]string{"paus", "fcm"}, `unknown command "paus"; did you mean "pause"?`},
		{[]string{"dead", "rplay"}, `unknown command "rplay"; did you mean "replay"?`},
		{[]string{"dead", "rpelya"}, `unknown command "rpelya"; did you mean "replay"?`}, // two swaps, two edits
	} {
		if code, _, stderr := run(t, c.args...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if code, _, stderr := run(t, "frobnicate"); code != 2 || strings.Contains(stderr, "did you mean") {
		t.Errorf("frobnicate: exit %d, %q; want 2 and no suggestion", code, stderr)
	}
}

func TestEnqueueAndAudit(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.jsonl")
	lines := []string{
		`{"id":"a","subscription":{"endpoint":"https://fcm.googleapis.com/fcm/send/x","keys":{"p256dh":"k","auth":"a"}}}`,
		``,
		`{"id":"b"}`,
		`no id here`,
		`{"id":"c","payload":"whatever the worker makes of it"}`,
	}
	if err := os.WriteFile(jobs, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "enqueue", "--redis", srv.URL(), "--shards", "2", jobs)
	if code != 1 || !strings.Contains(stdout, "enqueued 3 jobs") || !strings.Contains(stderr, jobs+":4: not enqueued") {
		t.Fatalf("enqueue: exit %d\nstdout %q\nstderr %q\nwant exit 1, 3 jobs, and line 4 refused", code, stdout, stderr)
	}
	c := srv.Client(t)
	var total int64
	for shard := range 2 {
		n, err := c.XLen(context.Background(), stream.KeysFor(stream.DefaultPrefix, shard).Intake).Result()
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != 3 {
		t.Fatalf("intake streams hold %d entries, want 3", total)
	}
	// No worker ran: audit finds every job still in the intake and says so, exit 1.
	code, stdout, _ = run(t, "audit", "--redis", srv.URL(), "--shards", "2", "--ids", jobs)
	if code != 1 || !strings.Contains(stdout, "none yet:                 3") || !strings.Contains(stdout, "intake") {
		t.Fatalf("audit: exit %d\n%s\nwant exit 1 with 3 jobs still in the intake", code, stdout)
	}
}

func TestBadEnvironmentValueIsReported(t *testing.T) {
	t.Setenv("GATEWAY_SHARDS", "abc")
	code, _, stderr := run(t, "audit", "--redis", "redis://127.0.0.1:1/0", "--ids", "x")
	if code != 2 || !strings.Contains(stderr, "GATEWAY_SHARDS") {
		t.Fatalf("exit %d, stderr %q; want 2 naming GATEWAY_SHARDS", code, stderr)
	}
}

// TestSendAndRunJudgeSubscriptionsAlike: a subscription that `run` dead-letters (as the
// subscription of a job) is one `send` refuses, with the same code and the same reason, and
// without sending it.
func TestSendAndRunJudgeSubscriptionsAlike(t *testing.T) {
	valid, err := os.ReadFile("testdata/sub.json")
	if err != nil {
		t.Fatal(err)
	}
	var sub map[string]any
	if err := json.Unmarshal(valid, &sub); err != nil {
		t.Fatal(err)
	}
	with := func(k string, v any) string {
		m := map[string]any{}
		for k, v := range sub {
			m[k] = v
		}
		m[k] = v
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cases := []struct{ name, sub, reason string }{
		{"http endpoint", with("endpoint", "http://fcm.googleapis.com/fcm/send/SECRET"), "subscription.endpoint: not https"},
		{"extra field", with("contentEncoding", []string{"aes128gcm"}), `subscription: unknown field "contentEncoding"`},
	}
	type verdict struct{ Code, Reason string }

	dir := t.TempDir()
	sendSaid := map[string]verdict{}
	var jobs []string
	for i, c := range cases {
		file := filepath.Join(dir, fmt.Sprintf("sub-%d.json", i))
		if err := os.WriteFile(file, []byte(c.sub), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := run(t, "send", "--subscription", file, "--payload", "x",
			"--vapid-key", "testdata/vapid.pem", "--subject", "mailto:ops@example.com")
		var out struct{ Code, Detail string }
		if err := json.Unmarshal([]byte(stdout), &out); code != 1 || err != nil {
			t.Fatalf("send, %s: exit %d, stdout %q, stderr %q; want exit 1 and one JSON object", c.name, code, stdout, stderr)
		}
		sendSaid[c.name] = verdict{out.Code, out.Detail}
		jobs = append(jobs, fmt.Sprintf(`{"id":%q,"subscription":%s,"payload":"x"}`, c.name, c.sub))
	}

	srv := redistest.Start(t)
	jobsFile := filepath.Join(dir, "jobs.jsonl")
	if err := os.WriteFile(jobsFile, []byte(strings.Join(jobs, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := run(t, "enqueue", "--redis", srv.URL(), jobsFile); code != 0 {
		t.Fatalf("enqueue: exit %d, %q %q", code, stdout, stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr proctest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, []string{"run", "--http", "", "--redis", srv.URL(), "--vapid-key", "testdata/vapid.pem",
			"--subject", "mailto:ops@example.com", "--block", "100ms", "--grace", "1s"}, &stdout, &stderr)
	}()
	c := srv.Client(t)
	dead := stream.KeysFor(stream.DefaultPrefix, 0).Dead
	deadline := time.Now().Add(30 * time.Second)
	for c.XLen(ctx, dead).Val() < int64(len(cases)) {
		select {
		case code := <-done:
			t.Fatalf("run exited %d:\n%s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead records after 30s, want %d:\n%s", c.XLen(ctx, dead).Val(), len(cases), stderr.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d:\n%s", code, stderr.String())
	}
	runSaid := map[string]verdict{}
	for _, m := range c.XRange(context.Background(), dead, "-", "+").Val() {
		id, _ := m.Values["id"].(string)
		code, _ := m.Values["code"].(string)
		reason, _ := m.Values["reason"].(string)
		runSaid[id] = verdict{code, reason}
	}
	want := map[string]verdict{}
	for _, c := range cases {
		want[c.name] = verdict{"INVALID_JOB", c.reason}
	}
	if d := cmp.Diff(want, runSaid); d != "" {
		t.Errorf("run's dead records (-want +got):\n%s", d)
	}
	if d := cmp.Diff(runSaid, sendSaid); d != "" {
		t.Errorf("send's verdicts differ from run's (-run +send):\n%s", d)
	}
}
