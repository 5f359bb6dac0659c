package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// campaignLang is one language's campaign example and consumer.
type campaignLang struct {
	name, campaign, consumer string
	interp                   func(*testing.T) string
}

var (
	pythonCampaign = campaignLang{"python", "python/campaign.py", "python/consumer.py", python}
	nodeCampaign   = campaignLang{"node", "node/campaign.js", "node/consumer.js", node}
)

func TestCampaignPython(t *testing.T) { testCampaign(t, pythonCampaign, "py-spring-sale") }

func TestCampaignNode(t *testing.T) { testCampaign(t, nodeCampaign, "node-spring-sale") }

// testCampaign creates a campaign with one language's example and adds recipients of the four
// push services to it, some with a recipient key (one not ASCII) and some without, in two runs:
// one whose WAIT is met, and one whose WAIT falls short, which must say so and write nothing
// again. Every recipient must end with exactly one ledger record, on the campaign's shard,
// naming the campaign and its key; pushsim must have each subscription once, with the
// campaign's payload; and the consumer must show campaign and recipient.
func testCampaign(t *testing.T, l campaignLang, id string) {
	interp := l.interp(t)
	home := stream.ShardOf(id, shards)
	if home == 0 {
		t.Fatalf("campaign %s is on shard 0, where entries written without hashing land too; pick an id on another shard", id)
	}
	e := newEnv(t)
	const n, firstRun = 480, 320
	subs := e.subscriptions(n)
	var lines []string
	wantKey := map[string]int{}
	bare := 0
	for i, s := range subs {
		var r any = s
		switch i % 4 {
		case 0:
			r = map[string]any{"recipient": fmt.Sprintf("zoë-%03d", i), "subscription": s}
		case 1:
			r = map[string]any{"recipient": fmt.Sprintf("user-%03d", i), "subscription": s}
		}
		if m, ok := r.(map[string]any); ok && m["recipient"] != nil {
			wantKey[m["recipient"].(string)]++
		} else {
			bare++
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	first := filepath.Join(e.dir, "recipients-1.jsonl")
	second := filepath.Join(e.dir, "recipients-2.jsonl")
	for path, ls := range map[string][]string{first: lines[:firstRun], second: lines[firstRun:]} {
		if err := os.WriteFile(path, []byte(strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	payload := "Spring sale, from " + l.name + ": 20% off"
	campFile := filepath.Join(e.dir, "campaign.json")
	writeJSON(t, campFile, map[string]any{"id": id, "payload": payload, "ttl": 600, "urgency": "low", "topic": "spring-sale"})
	common := []string{"--redis", e.master.URL(), "--shards", strconv.Itoa(shards)}

	_, stderr := e.runOK(interp, l.campaign, append([]string{"create"}, append(common, "--wait-replicas", "1", campFile)...)...)
	if want := fmt.Sprintf("wp:{%d}:in:bulk", home); !strings.Contains(stderr, want) {
		t.Errorf("create: stderr %q does not name the campaign's bulk intake %s", stderr, want)
	}
	code, _, stderr := e.run(interp, l.campaign, "create", "--redis", e.master.URL(), "--shards", "2", campFile)
	if code != 2 || !strings.Contains(stderr, "used with 3 shards") {
		t.Errorf("create --shards 2 against a prefix of 3 shards: exit %d, stderr %q; want exit 2 naming the recorded count", code, stderr)
	}
	code, _, stderr = e.run(interp, l.campaign, append([]string{"add"}, append(common, "spring sale!", first)...)...)
	if code != 2 || !strings.Contains(stderr, "nothing written") {
		t.Errorf("add to the campaign id %q: exit %d, stderr %q; want exit 2 and nothing written", "spring sale!", code, stderr)
	}

	_, stderr = e.runOK(interp, l.campaign, append([]string{"add"}, append(common, "--wait-replicas", "1", id, first)...)...)
	m := regexp.MustCompile(`added (\d+) recipients to campaign \S+ in (\d+) entries`).FindStringSubmatch(stderr)
	if m == nil || m[1] != strconv.Itoa(firstRun) {
		t.Fatalf("add: stderr %q; want %d recipients added", stderr, firstRun)
	}
	if entries, _ := strconv.Atoi(m[2]); entries < 2 {
		t.Errorf("add wrote %d recipients in %s entries; their size (over 64 KiB) needs at least 2", firstRun, m[2])
	}
	// One replica, two asked for: the recipients are written, the example says so and that
	// adding them again would send them twice, and does not write them again itself.
	code, _, stderr = e.run(interp, l.campaign, append([]string{"add"}, append(common, "--wait-replicas", "2", "--wait-timeout-ms", "100", id, second)...)...)
	if code != 1 || !strings.Contains(stderr, "of 2 replicas acknowledged") || !strings.Contains(stderr, "adding them again sends twice") {
		t.Errorf("add --wait-replicas 2 with one replica: exit %d, stderr %q; want exit 1, the replicas counted and a warning against adding again", code, stderr)
	}

	jobIDs := make([]string, n)
	for i := range jobIDs {
		jobIDs[i] = job.RecipientJobID(id, int64(i+1))
	}
	ledger := e.waitLedger(jobIDs)
	e.waitDrained()
	added, err := e.rdb.HGet(context.Background(), fmt.Sprintf("wp:{%d}:campaign:%s", home, id), "added").Result()
	if err != nil || added != strconv.Itoa(n) {
		t.Errorf("the campaign's hash counts %q recipients added (%v); want %d: a batch was written twice or lost", added, err, n)
	}
	gotKey := map[string]int{}
	gotBare, ofCampaign := 0, 0
	for _, r := range e.records("results") {
		if r.fields["campaign"] == id {
			ofCampaign++
		}
	}
	if ofCampaign != n {
		t.Errorf("the ledger holds %d records of campaign %s; want one per recipient, %d", ofCampaign, id, n)
	}
	for _, jid := range jobIDs {
		r := ledger[jid][0]
		if r.shard != home {
			t.Errorf("%s is recorded in shard %d; the campaign's shard is %d", jid, r.shard, home)
		}
		if r.fields["code"] != "ACCEPTED" || r.fields["campaign"] != id {
			t.Errorf("%s: code %v, campaign %v; want ACCEPTED and %s", jid, r.fields["code"], r.fields["campaign"], id)
		}
		if k, ok := r.fields["recipient"].(string); ok {
			gotKey[k]++
		} else {
			gotBare++
		}
	}
	if !reflect.DeepEqual(gotKey, wantKey) || gotBare != bare {
		t.Errorf("the ledger's recipient keys are %v and %d records have none; want each of %v once and %d without", gotKey, gotBare, wantKey, bare)
	}
	for _, s := range subs {
		ep := s["endpoint"].(string)
		ds := e.sim.DeliveriesFor(ep)
		if len(ds) != 1 {
			t.Errorf("pushsim got %d pushes for %s; want 1", len(ds), ep)
			continue
		}
		if ds[0].Code != "ACCEPTED" || string(ds[0].Plaintext) != payload {
			t.Errorf("the push to %s: %s with payload %q; want ACCEPTED with %q", ep, ds[0].Code, ds[0].Plaintext, payload)
		}
	}
	if dead := e.records("dead"); len(dead) != 0 {
		t.Errorf("the dead streams hold %d records (the first: %v); want none", len(dead), dead[0].fields)
	}

	storePath := filepath.Join(e.dir, "store.json")
	out, _ := e.runOK(interp, l.consumer, append(common, "--group", "campaign-upstream", "--consumer", "c-1", "--store", storePath, "--idle-exit", "1")...)
	events := map[string]event{}
	for _, ev := range parseEvents(t, l.consumer, out) {
		events[ev.ID] = ev
	}
	for _, jid := range jobIDs {
		ev, ok := events[jid]
		key, _ := ledger[jid][0].fields["recipient"].(string)
		if !ok || ev.Campaign != id || ev.Recipient != key {
			t.Errorf("%s shows %+v (found %v); want campaign %s and recipient %q", l.consumer, ev, ok, id, key)
		}
	}
}

// runOK is run, failing the test unless the example exits 0; it returns the example's
// standard output and standard error.
func (e *env) runOK(interp, script string, args ...string) (string, string) {
	e.t.Helper()
	code, stdout, stderr := e.run(interp, script, args...)
	if code != 0 {
		e.t.Fatalf("%s %s %s: exit %d\nstdout:\n%s\nstderr:\n%s", filepath.Base(interp), script, strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout, stderr
}

// TestCampaignBatches checks each language's recipient batches against the gateway's own
// decoding: at most 1,000 recipients and 64 KiB less a kilobyte each, full (the next recipient
// would not have fitted), every recipient once and in order, and a recipient too large for an
// entry or a bad campaign id refused before any batch.
func TestCampaignBatches(t *testing.T) {
	const id = "spring-sale"
	tiny := make([]any, 2500)
	for i := range tiny {
		tiny[i] = map[string]any{"endpoint": fmt.Sprintf("https://push.example.net/p/%d", i)}
	}
	large := make([]any, 300)
	for i := range large {
		large[i] = map[string]any{"recipient": fmt.Sprintf("zoë-%d", i), "subscription": map[string]any{
			"endpoint": "https://fcm.googleapis.com/fcm/send/" + strings.Repeat("x", 500+i),
			"keys":     map[string]any{"p256dh": strings.Repeat("B", 87), "auth": strings.Repeat("A", 22)},
		}}
	}
	huge := []any{map[string]any{"endpoint": "https://push.example.net/" + strings.Repeat("x", job.MaxEntryBytes)}}
	for _, l := range []campaignLang{pythonCampaign, nodeCampaign} {
		t.Run(l.name, func(t *testing.T) {
			interp := l.interp(t)
			dir := t.TempDir()
			batches := func(campaign string, rs []any) ([]batch, string) {
				t.Helper()
				path := filepath.Join(dir, "recipients.json")
				writeJSON(t, path, rs)
				return runBatches(t, l, interp, campaign, path)
			}

			got, errText := batches(id, tiny)
			var counts []int
			for _, b := range got {
				counts = append(counts, b.count)
			}
			if errText != "" || !reflect.DeepEqual(counts, []int{1000, 1000, 500}) {
				t.Errorf("2500 small recipients: batches of %v (error %q); want 1000, 1000 and 500", counts, errText)
			}
			checkBatches(t, id, tiny, got)

			got, errText = batches(id, large)
			if errText != "" || len(got) < 3 {
				t.Fatalf("300 recipients of about 700 bytes: %d batches (error %q); want at least 3", len(got), errText)
			}
			checkBatches(t, id, large, got)

			if got, errText = batches(id, huge); len(got) != 0 || !strings.Contains(errText, "recipient 0 is") {
				t.Errorf("a recipient over the entry limit: %d batches, error %q; want none and the recipient named", len(got), errText)
			}
			if got, errText = batches("spring sale!", tiny[:1]); len(got) != 0 || !strings.Contains(errText, "campaign id") {
				t.Errorf("campaign id %q: %d batches, error %q; want none and the id refused", "spring sale!", len(got), errText)
			}
		})
	}
}

// TestCampaignPipelines writes more entries than one pipeline takes with each language's
// addRecipients against a real Redis (no worker reads the prefixes used): every entry in the
// bulk intake of the campaign's shard, in order, and none in a transactional intake; and with a
// WAIT no replica can meet, the first pipeline's entries written, the error saying so, and
// nothing after it written.
func TestCampaignPipelines(t *testing.T) {
	const id = "spring-sale"
	const n = 33_500 // 34 entries: two pipelines
	rs := make([]any, n)
	for i := range rs {
		rs[i] = map[string]any{"endpoint": fmt.Sprintf("https://push.example.net/p/%d", i)}
	}
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	home := stream.ShardOf(id, shards)
	for _, l := range []campaignLang{pythonCampaign, nodeCampaign} {
		t.Run(l.name, func(t *testing.T) {
			interp := l.interp(t)
			path := filepath.Join(t.TempDir(), "recipients.json")
			writeJSON(t, path, rs)
			intake := func(prefix string) []batch {
				t.Helper()
				var out []batch
				for s := range shards {
					k := stream.KeysFor(prefix, s)
					if n, err := rdb.XLen(ctx, k.Intake).Result(); err != nil || n != 0 {
						t.Errorf("%s holds %d entries (%v); campaign entries go to the bulk intake", k.Intake, n, err)
					}
					msgs, err := rdb.XRange(ctx, k.BulkIntake, "-", "+").Result()
					if err != nil {
						t.Fatal(err)
					}
					if s != home && len(msgs) != 0 {
						t.Errorf("%s: shard %d's bulk intake holds %d entries; the campaign's shard is %d", prefix, s, len(msgs), home)
					}
					for _, m := range msgs {
						e, _ := m.Values["job"].(string)
						_, _, got, _ := job.DecodeRecipients(e)
						out = append(out, batch{entry: e, count: len(got)})
					}
				}
				return out
			}

			prefix := l.name + "-all"
			res := runAdd(t, l, interp, srv.URL(), prefix, id, path, 0)
			if res.Error != "" || res.Written != n {
				t.Errorf("add %d recipients: wrote %d, error %q; want all", n, res.Written, res.Error)
			}
			got := intake(prefix)
			if len(got) != 34 {
				t.Errorf("the bulk intake holds %d entries; want 34", len(got))
			}
			checkBatches(t, id, rs, got)

			// No replica: the first pipeline's WAIT falls short; its entries stay, the rest are
			// never sent.
			prefix = l.name + "-wait"
			res = runAdd(t, l, interp, srv.URL(), prefix, id, path, 1)
			replicated := "absent"
			if res.Replicated != nil {
				replicated = strconv.FormatBool(*res.Replicated)
			}
			if replicated != "false" || res.Written != 32*job.MaxRecipientsPerBatch || !strings.Contains(res.Error, "of 1 replicas acknowledged") {
				t.Errorf("add with a WAIT no replica meets: written %d, replicated %s, error %q; want the first pipeline's %d written, not replicated", res.Written, replicated, res.Error, 32*job.MaxRecipientsPerBatch)
			}
			if got := intake(prefix); len(got) != 32 {
				t.Errorf("after the WAIT fell short the bulk intake holds %d entries; want the first pipeline's 32", len(got))
			}
		})
	}
}

// addResult is what a language's addRecipients gave: how many it wrote, or its error.
type addResult struct {
	Written    int
	Error      string
	Replicated *bool
}

// runAdd runs the language's addRecipients on the recipients in path, to campaign id under
// prefix (of the tests' shard count) of the Redis at url, with WAIT for waitReplicas (50 ms).
func runAdd(t *testing.T, l campaignLang, interp, url, prefix, id, path string, waitReplicas int) addResult {
	t.Helper()
	args := []string{url, prefix, strconv.Itoa(shards), id, path, strconv.Itoa(waitReplicas)}
	var cmd *exec.Cmd
	switch l.name {
	case "python":
		cmd = exec.Command(interp, append([]string{"-B", "-c", `import json, sys
sys.path.insert(0, "python")
import campaign, redis
url, prefix, shards, cid, path, wait = sys.argv[1:]
r = redis.Redis.from_url(url)
try:
    out = {"written": campaign.add_recipients(r, cid, json.load(open(path)), prefix=prefix,
           shards=int(shards), wait_replicas=int(wait), wait_timeout_ms=50)}
except campaign.AddRecipientsError as e:
    out = {"written": e.written, "error": str(e), "replicated": e.replicated}
print(json.dumps(out))`}, args...)...)
	default:
		cmd = exec.Command(interp, append([]string{"-e", `const c = require('./node/campaign.js');
const Redis = require('./node/node_modules/ioredis');
const [url, prefix, shards, id, path, wait] = process.argv.slice(1);
const redis = new Redis(url, { maxRetriesPerRequest: 0 });
c.addRecipients(redis, id, JSON.parse(require('fs').readFileSync(path, 'utf8')), { prefix, shards: Number(shards), waitReplicas: Number(wait), waitTimeoutMs: 50 })
  .then((written) => ({ written }), (e) => {
    if (!(e instanceof c.AddRecipientsError)) throw e;
    return { written: e.written, error: e.message, replicated: e.replicated };
  })
  .then((out) => console.log(JSON.stringify(out)))
  .finally(() => redis.disconnect());`}, args...)...)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s's addRecipients: %v\n%s%s", l.name, err, out, stderrOf(err))
	}
	var res addResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%s's addRecipients: %v\n%s", l.name, err, out)
	}
	return res
}

// batch is one add_recipients entry an example made and the count it gave for it.
type batch struct {
	entry string
	count int
}

// runBatches runs the language's batching function on the recipients in path and returns its
// batches, or the error it threw.
func runBatches(t *testing.T, l campaignLang, interp, campaign, path string) ([]batch, string) {
	t.Helper()
	var cmd *exec.Cmd
	switch l.name {
	case "python":
		cmd = exec.Command(interp, "-B", "-c", `import json, sys
sys.path.insert(0, "python")
import campaign
try:
    out = {"batches": campaign.recipient_batches(sys.argv[1], json.load(open(sys.argv[2])))}
except ValueError as e:
    out = {"error": str(e)}
print(json.dumps(out))`, campaign, path)
	default:
		cmd = exec.Command(interp, "-e", `const c = require('./node/campaign.js');
let out;
try {
  out = { batches: c.recipientBatches(process.argv[1], JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'))) };
} catch (e) {
  out = { error: e.message };
}
console.log(JSON.stringify(out));`, campaign, path)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s's batches: %v\n%s%s", l.name, err, out, stderrOf(err))
	}
	var res struct {
		Batches [][2]json.RawMessage
		Error   string
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%s's batches: %v\n%s", l.name, err, out)
	}
	var bs []batch
	for _, b := range res.Batches {
		var x batch
		if err := json.Unmarshal(b[0], &x.entry); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b[1], &x.count); err != nil {
			t.Fatal(err)
		}
		bs = append(bs, x)
	}
	return bs, res.Error
}

// checkBatches decodes every batch as a worker does and checks it against want, the recipients
// given, and the limits.
func checkBatches(t *testing.T, id string, want []any, got []batch) {
	t.Helper()
	const limit = job.MaxEntryBytes - 1024
	var all []json.RawMessage
	var raws [][]string
	seenBatch := map[string]bool{}
	for i, b := range got {
		if job.KindOf(b.entry) != job.KindAddRecipients {
			t.Fatalf("batch %d is not an add_recipients entry: %.80s", i, b.entry)
		}
		campaign, batchID, rs, err := job.DecodeRecipients(b.entry)
		if err != nil || campaign != id {
			t.Fatalf("batch %d: campaign %q, %v; want %s decoded", i, campaign, err, id)
		}
		if batchID == "" || seenBatch[batchID] {
			t.Errorf("batch %d: batch id %q, want one of its own", i, batchID)
		}
		seenBatch[batchID] = true
		if len(rs) != b.count || b.count > job.MaxRecipientsPerBatch || len(b.entry) > limit {
			t.Errorf("batch %d: %d recipients (said %d), %d bytes; at most %d and %d", i, len(rs), b.count, len(b.entry), job.MaxRecipientsPerBatch, limit)
		}
		var rr []string
		for _, r := range rs {
			all = append(all, json.RawMessage(r.Raw))
			rr = append(rr, r.Raw)
		}
		raws = append(raws, rr)
	}
	for i := 0; i+1 < len(got); i++ {
		if next := len(raws[i+1][0]); len(raws[i]) < job.MaxRecipientsPerBatch && len(got[i].entry)+1+next <= limit {
			t.Errorf("batch %d ends at %d bytes with %d recipients; the next recipient (%d bytes) would have fitted", i, len(got[i].entry), len(raws[i]), next)
		}
	}
	if len(all) != len(want) {
		t.Fatalf("the batches hold %d recipients; %d were given", len(all), len(want))
	}
	for i, raw := range all {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		w, _ := json.Marshal(want[i])
		var wv any
		_ = json.Unmarshal(w, &wv)
		if !reflect.DeepEqual(v, wv) {
			t.Fatalf("recipient %d of the batches is %s; recipient %d given is %s", i, raw, i, w)
		}
	}
}

// stderrOf is the standard error of a command that failed with err.
func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
