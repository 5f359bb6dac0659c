package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	webpushgateway "github.com/webpush-gateway/webpush-gateway"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func TestKeygenJSONAndPublic(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // keygen's default --out is vapid.pem here
	// --json: the pair as web-push prints it, and no file.
	code, stdout, stderr := run(t, "keygen", "--json")
	if code != 0 {
		t.Fatalf("keygen --json: exit %d: %s", code, stderr)
	}
	var pair map[string]string
	if err := json.Unmarshal([]byte(stdout), &pair); err != nil || len(pair) != 2 {
		t.Fatalf("keygen --json printed %q (%v); want publicKey and privateKey", stdout, err)
	}
	if _, err := os.Stat("vapid.pem"); err == nil {
		t.Error("keygen --json wrote vapid.pem without --out")
	}
	key, err := vapid.ParseKey("k", []byte(pair["privateKey"]))
	if err != nil || key.PublicKey() != pair["publicKey"] || len(pair["privateKey"]) != 43 {
		t.Fatalf("privateKey %q does not load as the raw key of publicKey: %v", pair["privateKey"], err)
	}
	// The raw key in a file: --public prints its public key, as JSON too.
	rawFile := filepath.Join(dir, "raw.txt")
	if err := os.WriteFile(rawFile, []byte(pair["privateKey"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := run(t, "keygen", "--public", rawFile); code != 0 || strings.TrimSpace(stdout) != pair["publicKey"] {
		t.Errorf("keygen --public of the raw key: exit %d, %q; want %s", code, stdout, pair["publicKey"])
	}
	if code, stdout, _ := run(t, "keygen", "--public", rawFile, "--json"); code != 0 || strings.TrimSpace(stdout) != `{"publicKey":"`+pair["publicKey"]+`"}` {
		t.Errorf("keygen --public --json: exit %d, %q", code, stdout)
	}
	// --json --out: the file as well, holding the printed key.
	code, stdout, _ = run(t, "keygen", "--json", "--out", "both.pem")
	if err := json.Unmarshal([]byte(stdout), &pair); code != 0 || err != nil {
		t.Fatalf("keygen --json --out: exit %d, %q", code, stdout)
	}
	if code, stdout, _ := run(t, "keygen", "--public", "both.pem"); code != 0 || strings.TrimSpace(stdout) != pair["publicKey"] {
		t.Errorf("the --out file of keygen --json holds another key: %q, want %s", stdout, pair["publicKey"])
	}
	// --public never takes the key itself, and never repeats it.
	code, stdout, stderr = run(t, "keygen", "--public", pair["privateKey"])
	if code != 1 || !strings.Contains(stderr, "--public: not a readable key file") || strings.Contains(stdout+stderr, pair["privateKey"]) {
		t.Errorf("keygen --public KEY: exit %d, %q %q; want 1, refused, unquoted", code, stdout, stderr)
	}
}

func TestKeygenNeverReplacesWithoutForce(t *testing.T) {
	out := filepath.Join(t.TempDir(), "vapid.pem")
	code, first, _ := run(t, "keygen", "--out", out)
	if code != 0 {
		t.Fatal("keygen failed")
	}
	before, _ := os.ReadFile(out)
	code, _, stderr := run(t, "keygen", "--out", out)
	if after, _ := os.ReadFile(out); code != 1 || string(after) != string(before) ||
		!strings.Contains(stderr, "exists; subscriptions may be bound to its key, so it is not replaced (--force replaces it; --public") {
		t.Fatalf("keygen over an existing file: exit %d, %q; want 1, the file untouched, and the ways out", code, stderr)
	}
	if err := os.Chmod(out, 0o644); err != nil {
		t.Fatal(err)
	}
	code, second, stderr := run(t, "keygen", "--out", out, "--force")
	if code != 0 || second == first {
		t.Fatalf("keygen --force: exit %d, %q, public %q (was %q)", code, stderr, second, first)
	}
	if code, pub, _ := run(t, "keygen", "--public", out); code != 0 || pub != second {
		t.Errorf("after --force the file holds %q, want the new key %q", pub, second)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Errorf("a replaced key file has mode %o, want 600", st.Mode().Perm())
	}
}

// TestRegistryRuleIsTheSameEverywhere: without --registry every command uses the built-in
// table, wherever it runs; `registry` prints that table, and `check` says which file it read.
func TestRegistryRuleIsTheSameEverywhere(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	export := filepath.Join(wd, "testdata/subscriptions.txt")
	dir := t.TempDir()
	t.Chdir(dir) // no registry.yaml here
	code, stdout, stderr := run(t, "registry")
	if code != 0 || stdout != string(webpushgateway.DefaultRegistry) {
		t.Fatalf("registry: exit %d, %q; want the built-in table", code, stderr)
	}
	if code, stdout, _ := run(t, "check"); code != 0 || !strings.HasPrefix(stdout, "registry.yaml (built in): ok, 5 providers") {
		t.Errorf("check without a file: exit %d, %q", code, stdout)
	}
	if err := os.WriteFile("mine.yaml", []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "mine.yaml"}, {"check", "--registry", "mine.yaml"}, {"check", "mine.yaml", "--registry", "mine.yaml"}} {
		if code, stdout, stderr := run(t, args...); code != 0 || !strings.HasPrefix(stdout, "mine.yaml: ok, 5 providers") {
			t.Errorf("%v: exit %d, %q %q", args, code, stdout, stderr)
		}
	}
	t.Setenv("GATEWAY_REGISTRY", "mine.yaml")
	if code, stdout, _ := run(t, "check"); code != 0 || !strings.HasPrefix(stdout, "mine.yaml: ok") {
		t.Errorf("check with GATEWAY_REGISTRY: exit %d, %q", code, stdout)
	}
	t.Setenv("GATEWAY_REGISTRY", "") // empty: the built-in table
	code, stdout, stderr = run(t, "inventory", export)
	if code != 0 || !strings.Contains(stdout, "registry.yaml (built in)") {
		t.Errorf("inventory outside the repository: exit %d, %q %q", code, stdout, stderr)
	}
}

func TestAuditExitCodesAndJSON(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.jsonl")
	if err := os.WriteFile(jobs, []byte(testJob(t, "a")+"\n"+testJob(t, "b")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "enqueue", "--redis", srv.URL(), jobs); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, _ := run(t, "audit", "--redis", srv.URL(), "--ids", jobs, "--json")
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); code != 1 || err != nil {
		t.Fatalf("audit of queued jobs: exit %d, %q; want 1 and JSON", code, stdout)
	}
	for _, k := range []string{"total", "exactly_one", "none", "more_than_one", "none_where", "by_code", "missing", "duplicated"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("audit --json lacks %q: %s", k, stdout)
		}
	}
	if rep["total"] != float64(2) || rep["none"] != float64(2) {
		t.Errorf("audit --json: %s", stdout)
	}
	// Finish both by hand, as a worker would: one ACCEPTED, one dead.
	c := srv.Client(t)
	for _, m := range c.XRange(t.Context(), "wp:{0}:in", "-", "+").Val() {
		raw := m.Values["job"].(string)
		if strings.Contains(raw, `"id":"a"`) {
			c.XAdd(t.Context(), &redis.XAddArgs{Stream: "wp:{0}:results", Values: []any{"id", "a", "code", "ACCEPTED"}})
		} else {
			c.XAdd(t.Context(), &redis.XAddArgs{Stream: "wp:{0}:dead", Values: []any{"id", "b", "code", "INVALID_JOB"}})
		}
		c.XDel(t.Context(), "wp:{0}:in", m.ID)
	}
	code, stdout, _ = run(t, "audit", "--redis", srv.URL(), "--ids", jobs)
	if code != 0 || !strings.Contains(stdout, "exactly one terminal:     2") || !strings.Contains(stdout, "terminal records by code:\n  ACCEPTED                1\n  INVALID_JOB             1\n") {
		t.Errorf("audit of finished jobs: exit %d:\n%s", code, stdout)
	}
	code, _, stderr := run(t, "audit", "--redis", "redis://127.0.0.1:1/0?max_retries=-1", "--ids", jobs)
	if code != 3 || !strings.Contains(stderr, "could not read or write Redis") {
		t.Errorf("audit of an unreachable Redis: exit %d, %q; want 3", code, stderr)
	}
}
