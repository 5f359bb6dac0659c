package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// campaignRig is a real Redis, pushsim, a VAPID key the simulator's subscriptions are made
// for, and the worker, started when the test asks for it.
type campaignRig struct {
	t    *testing.T
	url  string
	srv  *redistest.Server
	sim  *pushsim.Server
	key  string
	pub  string
	dir  string
	stop func()
}

func newCampaignRig(t *testing.T) *campaignRig {
	r := &campaignRig{t: t, srv: redistest.Start(t), sim: simtest.Start(t, pushsim.Config{}), dir: t.TempDir()}
	r.url = r.srv.URL()
	r.key = filepath.Join(r.dir, "vapid.pem")
	code, pub, stderr := run(t, "keygen", "--out", r.key)
	if code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	r.pub = strings.TrimSpace(pub)
	return r
}

// file writes a file of the rig's directory and returns its path.
func (r *campaignRig) file(name, text string) string {
	path := filepath.Join(r.dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return path
}

// subscribers makes n subscriptions of provider at pushsim and a recipients file of them, one
// a line; every second one is wrapped with a recipient key.
func (r *campaignRig) subscribers(name, provider string, n int) ([]job.Subscription, string) {
	r.t.Helper()
	var subs []job.Subscription
	var lines []string
	for i := range n {
		sub, err := r.sim.Subscribe(provider, "", r.pub)
		if err != nil {
			r.t.Fatal(err)
		}
		subs = append(subs, sub)
		var b []byte
		if i%2 == 1 {
			b, _ = json.Marshal(map[string]any{"recipient": fmt.Sprintf("user-%d", i), "subscription": sub})
		} else {
			b, _ = json.Marshal(sub)
		}
		lines = append(lines, string(b))
	}
	return subs, r.file(name, strings.Join(lines, "\n")+"\n")
}

// worker starts `gateway-worker run` in-process against pushsim; it runs until the test ends.
func (r *campaignRig) worker() {
	t := r.t
	t.Setenv("GATEWAY_CA_FILE", r.sim.CAFile())
	t.Setenv("GATEWAY_CONNECT_TO", strings.Join(r.sim.ConnectTo(), ","))
	ctx, stop := context.WithCancel(context.Background())
	var wout, werr proctest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, []string{"run", "--http", "", "--redis", r.url, "--vapid-key", r.key,
			"--subject", "mailto:ops@example.com", "--block", "100ms", "--grace", "1s"}, &wout, &werr)
	}()
	r.stop = func() {
		stop()
		if code := <-done; code != 0 {
			t.Errorf("run exited %d:\n%s", code, werr.String())
		}
	}
	t.Cleanup(func() {
		if r.stop != nil {
			r.stop()
		}
	})
}

// status is campaign id's status as `campaign status --json` prints it; no State when the
// campaign does not exist (yet).
func (r *campaignRig) status(id string) inspect.CampaignStatus {
	r.t.Helper()
	code, stdout, stderr := run(r.t, "campaign", "status", "--redis", r.url, "--json", id)
	var st inspect.CampaignStatus
	if code == 1 && strings.HasPrefix(stdout, "no campaign "+id+" ") {
		return st
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &st) != nil {
		r.t.Fatalf("campaign status %s: exit %d\n%s%s", id, code, stdout, stderr)
	}
	return st
}

// await polls campaign id's status until ok says it is as wanted, for at most 30 s.
func (r *campaignRig) await(id, what string, ok func(inspect.CampaignStatus) bool) inspect.CampaignStatus {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := r.status(id)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("campaign %s: not %s after 30 s: %+v", id, what, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ledger counts the ledger records of campaign id by code, and says whether every one carries
// the campaign and, for the wrapped recipients, the recipient key.
func (r *campaignRig) ledger(id string) map[string]int {
	r.t.Helper()
	by := map[string]int{}
	c := r.srv.Client(r.t)
	for _, m := range c.XRange(context.Background(), stream.KeysFor("wp", 0).Results, "-", "+").Val() {
		if m.Values["campaign"] != id {
			continue
		}
		jobID, _ := m.Values["id"].(string)
		code, _ := m.Values["code"].(string)
		by[code]++
		if !strings.HasPrefix(jobID, id+"/") {
			r.t.Errorf("ledger record %v of campaign %s: its job id is not <campaign>/<n>", m.Values, id)
		}
	}
	return by
}

// TestCampaignCreateAndSend: with no worker, create writes the campaign and says no worker has
// taken it, and add refuses a file with a line that is not JSON, naming the line, writing
// nothing. With a worker: create waits for it and says the campaign is created, refuses a
// second create of the id, and prints the reason a worker refused one with a key it lacks;
// add's recipients (bare and wrapped subscriptions, and one with an http endpoint) are each
// sent once with the campaign's message and options, or dead-lettered; status and ls count
// them.
func TestCampaignCreateAndSend(t *testing.T) {
	r := newCampaignRig(t)
	message := r.file("message.txt", "spring sale: everything must go")

	code, stdout, stderr := run(t, "campaign", "create", "--redis", r.url, "--id", "early", "--payload-file", message, "--wait", "300ms")
	if code != 0 || !strings.Contains(stdout, "campaign early: written; no worker has taken it yet (shard 0 under prefix wp)") {
		t.Errorf("create without a worker: exit %d\n%s%s", code, stdout, stderr)
	}
	c := r.srv.Client(t)
	intake := stream.KeysFor("wp", 0).Intake
	before := c.XLen(context.Background(), intake).Val()
	_, good := r.subscribers("one.jsonl", "apple", 1)
	goodLine, _ := os.ReadFile(good)
	bad := r.file("bad.jsonl", string(goodLine)+"\n{\"endpoint\": \n")
	if code, _, stderr := run(t, "campaign", "add", "--redis", r.url, "early", bad); code != 2 || !strings.Contains(stderr, bad+":3: not JSON; nothing written") {
		t.Errorf("add of a file with a bad line: exit %d, %q; want 2 naming line 3", code, stderr)
	}
	if n := c.XLen(context.Background(), intake).Val(); n != before {
		t.Errorf("the intake holds %d entries after the refused add; want %d (nothing written)", n, before)
	}
	if code, stdout, _ := run(t, "campaign", "status", "--redis", r.url, "early"); code != 1 || !strings.Contains(stdout, "no campaign early under prefix wp") {
		t.Errorf("status before a worker created it: exit %d, %q; want 1", code, stdout)
	}

	r.worker()
	r.await("early", "created", func(st inspect.CampaignStatus) bool { return st.State == stream.CampaignRunning })
	code, stdout, stderr = run(t, "campaign", "create", "--redis", r.url, "--id", "spring", "--payload-file", message,
		"--urgency", "high", "--ttl", "600", "--topic", "spring")
	if code != 0 || !strings.Contains(stdout, "campaign spring created (running, bulk)") {
		t.Fatalf("create: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := run(t, "campaign", "create", "--redis", r.url, "--id", "spring", "--payload-file", message); code != 1 || !strings.Contains(stdout, "campaign spring exists already (running, 0 recipients added): nothing written") {
		t.Errorf("second create: exit %d, %q; want 1", code, stdout)
	}
	code, stdout, _ = run(t, "campaign", "create", "--redis", r.url, "--id", "nokey", "--payload-file", message, "--vapid-key", "other")
	if code != 1 || !strings.Contains(stdout, `campaign nokey not created: a worker dead-lettered its create entry: create_campaign.vapid_key: no key named "other" is configured`) {
		t.Errorf("create with a key no worker has: exit %d, %q; want 1 and the dead record's reason", code, stdout)
	}

	apple, appleFile := r.subscribers("apple.jsonl", "apple", 3)
	fcm, fcmFile := r.subscribers("fcm.jsonl", "fcm", 3)
	a, _ := os.ReadFile(appleFile)
	f, _ := os.ReadFile(fcmFile)
	all := r.file("all.jsonl", string(a)+"\n   \n"+string(f)+`{"endpoint":"http://push.example.net/x","keys":{"p256dh":"BGsX0fLhLEJH-Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`+"\n")
	code, stdout, stderr = run(t, "campaign", "add", "--redis", r.url, "spring", all)
	if code != 0 || !strings.Contains(stdout, "added 7 recipients to campaign spring from "+all) {
		t.Fatalf("add: exit %d\n%s%s", code, stdout, stderr)
	}
	st := r.await("spring", "done", func(st inspect.CampaignStatus) bool { return st.Done == 7 })
	if st.Added != 7 || st.Queued != 0 || st.InLanes != 0 || st.Finished["ACCEPTED"] != 6 || st.Finished["INVALID_JOB"] != 1 || st.Class != "bulk" {
		t.Errorf("status once done: %+v; want 7 added, 6 ACCEPTED and 1 INVALID_JOB, bulk", st)
	}
	for _, sub := range append(apple, fcm...) {
		ds := r.sim.DeliveriesFor(sub.Endpoint)
		if len(ds) != 1 || string(ds[0].Plaintext) != "spring sale: everything must go" || ds[0].Urgency != "high" || ds[0].Topic != "spring" || ds[0].TTL > 600 {
			t.Errorf("deliveries to a recipient: %+v; want one, with the campaign's message, urgency, topic and ttl", ds)
		}
	}
	if by := r.ledger("spring"); by["ACCEPTED"] != 6 || len(by) != 1 {
		t.Errorf("ledger of spring: %v; want 6 ACCEPTED records, each with the campaign", by)
	}
	dead := c.XRange(context.Background(), stream.KeysFor("wp", 0).Dead, "-", "+").Val()
	found := false
	for _, m := range dead {
		found = found || (m.Values["campaign"] == "spring" && m.Values["reason"] == "subscription.endpoint: not https")
	}
	if !found {
		t.Errorf("no dead record of spring's http recipient in %v", dead)
	}
	code, stdout, _ = run(t, "campaign", "status", "--redis", r.url, "spring")
	for _, want := range []string{"campaign spring: running, bulk, no pace\n", "with their terminal record: ACCEPTED 6, INVALID_JOB 1\n", "left: nothing"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("status: exit %d, lacks %q:\n%s", code, want, stdout)
		}
	}
	code, stdout, _ = run(t, "campaign", "ls", "--redis", r.url)
	if code != 0 || !regexpMatch(`(?m)^early\s+running\s+bulk\s+0\s+0\s+0\s+0$`, stdout) || !regexpMatch(`(?m)^spring\s+running\s+bulk\s+7\s+0\s+0\s+7$`, stdout) || strings.Contains(stdout, "nokey") {
		t.Errorf("ls: exit %d:\n%s", code, stdout)
	}
	var list []inspect.CampaignStatus
	if code, stdout, _ := run(t, "campaign", "ls", "--redis", r.url, "--json"); code != 0 || json.Unmarshal([]byte(stdout), &list) != nil || len(list) != 2 || list[1].ID != "spring" || list[1].Done != 7 {
		t.Errorf("ls --json: exit %d, %v:\n%s", code, list, stdout)
	}
}

// TestCampaignPauseResumeCancel: a paused campaign's recipients wait queued and unsent until
// resume, and then are each sent once (a binary payload, carried base64-encoded, arrives byte
// for byte); cancel gives each queued recipient one CANCELED record and none is sent, and a
// canceled campaign cannot be resumed; the commands name a campaign that does not exist.
func TestCampaignPauseResumeCancel(t *testing.T) {
	r := newCampaignRig(t)
	r.worker()
	binary := []byte{0xff, 0x00, 0xfe, 'h', 'i'}
	message := r.file("message.bin", string(binary))
	if code, stderr := runCode(t, "campaign", "create", "--redis", r.url, "--id", "later", "--payload-file", message); code != 2 || !strings.Contains(stderr, "is not UTF-8 text; give --payload-encoding base64") {
		t.Errorf("create with a binary text payload: exit %d, %q; want 2", code, stderr)
	}
	for _, id := range []string{"later", "stopme"} {
		if code, stdout, stderr := run(t, "campaign", "create", "--redis", r.url, "--id", id, "--payload-file", message, "--payload-encoding", "base64"); code != 0 {
			t.Fatalf("create %s: exit %d\n%s%s", id, code, stdout, stderr)
		}
		if code, stdout, _ := run(t, "campaign", "pause", "--redis", r.url, id); code != 0 || !strings.Contains(stdout, "paused campaign "+id) {
			t.Fatalf("pause %s: exit %d, %q", id, code, stdout)
		}
	}
	later, laterFile := r.subscribers("later.jsonl", "wns", 2)
	stop, stopFile := r.subscribers("stop.jsonl", "autopush", 3)
	for id, file := range map[string]string{"later": laterFile, "stopme": stopFile} {
		if code, stdout, stderr := run(t, "campaign", "add", "--redis", r.url, id, file); code != 0 {
			t.Fatalf("add %s: exit %d\n%s%s", id, code, stdout, stderr)
		}
	}
	r.await("later", "queued", func(st inspect.CampaignStatus) bool { return st.Queued == 2 && st.QueuedBy["wns"] == 2 })
	r.await("stopme", "queued", func(st inspect.CampaignStatus) bool { return st.Queued == 3 })
	time.Sleep(500 * time.Millisecond) // rounds enough for a paused campaign's expansion to be seen not to happen
	if n := r.sim.Stats().Requests; n != 0 {
		t.Fatalf("pushsim served %d requests while both campaigns were paused; want none", n)
	}
	code, stdout, _ := run(t, "campaign", "status", "--redis", r.url, "later")
	if code != 0 || !strings.Contains(stdout, "campaign later: paused, bulk") || !strings.Contains(stdout, "waiting for their provider's lane: wns 2\n") || !strings.Contains(stdout, "no estimate (not running)") {
		t.Errorf("status of the paused campaign: exit %d:\n%s", code, stdout)
	}

	code, stdout, _ = run(t, "campaign", "cancel", "--redis", r.url, "stopme")
	if code != 0 || !strings.Contains(stdout, "canceled campaign stopme: 3 queued recipients got their CANCELED records") {
		t.Errorf("cancel: exit %d, %q", code, stdout)
	}
	if code, stdout, _ := run(t, "campaign", "resume", "--redis", r.url, "stopme"); code != 1 || !strings.Contains(stdout, "campaign stopme is canceled: a canceled campaign cannot resume") {
		t.Errorf("resume of a canceled campaign: exit %d, %q; want 1", code, stdout)
	}
	if code, stdout, _ := run(t, "campaign", "resume", "--redis", r.url, "later"); code != 0 || !strings.Contains(stdout, "resumed campaign later") {
		t.Errorf("resume: exit %d, %q", code, stdout)
	}
	r.await("later", "done", func(st inspect.CampaignStatus) bool { return st.Done == 2 && st.Finished["ACCEPTED"] == 2 })
	for _, sub := range later {
		if ds := r.sim.DeliveriesFor(sub.Endpoint); len(ds) != 1 || !bytes.Equal(ds[0].Plaintext, binary) {
			t.Errorf("deliveries to a resumed campaign's recipient: %+v; want one, the binary payload", ds)
		}
	}
	st := r.status("stopme")
	if st.State != stream.CampaignCanceled || st.Done != 3 || st.Finished["CANCELED"] != 3 || st.Queued != 0 {
		t.Errorf("status of the canceled campaign: %+v", st)
	}
	if by := r.ledger("stopme"); by["CANCELED"] != 3 || len(by) != 1 {
		t.Errorf("ledger of stopme: %v; want 3 CANCELED records", by)
	}
	for _, sub := range stop {
		if ds := r.sim.DeliveriesFor(sub.Endpoint); len(ds) != 0 {
			t.Errorf("a canceled campaign's recipient got %d deliveries; want none", len(ds))
		}
	}
	for _, cmd := range []string{"status", "pause", "resume", "cancel"} {
		if code, stdout, _ := run(t, "campaign", cmd, "--redis", r.url, "nobody"); code != 1 || !strings.Contains(stdout, "no campaign nobody under prefix wp") {
			t.Errorf("%s of an unknown campaign: exit %d, %q; want 1", cmd, code, stdout)
		}
	}
}

func runCode(t *testing.T, args ...string) (int, string) {
	code, _, stderr := run(t, args...)
	return code, stderr
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// TestCampaignPace: a campaign with --rate 2 sends its recipients no faster than that (burst
// of a second's worth, then one every half second), and its status gives the pace and an
// estimate of the time left while recipients wait.
func TestCampaignPace(t *testing.T) {
	r := newCampaignRig(t)
	r.worker()
	message := r.file("message.txt", "slowly")
	if code, stdout, stderr := run(t, "campaign", "create", "--redis", r.url, "--id", "paced", "--payload-file", message, "--rate", "2"); code != 0 {
		t.Fatalf("create: exit %d\n%s%s", code, stdout, stderr)
	}
	subs, file := r.subscribers("paced.jsonl", "wns", 4)
	if code, stdout, stderr := run(t, "campaign", "add", "--redis", r.url, "paced", file); code != 0 {
		t.Fatalf("add: exit %d\n%s%s", code, stdout, stderr)
	}
	// The estimate is there while recipients wait: look at the status until they are all done.
	estimate, text := false, ""
	for deadline := time.Now().Add(30 * time.Second); !estimate && time.Now().Before(deadline) && r.status("paced").Done < 4; {
		code, stdout, _ := run(t, "campaign", "status", "--redis", r.url, "paced")
		if code != 0 || !strings.Contains(stdout, "campaign paced: running, bulk, paced at 2/s\n") {
			t.Fatalf("status of a paced campaign: exit %d:\n%s", code, stdout)
		}
		estimate, text = regexpMatch(`(?m)^left: about \S+ for [1-4] recipients$`, stdout), stdout
		time.Sleep(20 * time.Millisecond)
	}
	if !estimate {
		t.Errorf("status never gave an estimate of the time left while recipients waited; last:\n%s", text)
	}
	r.await("paced", "done", func(st inspect.CampaignStatus) bool { return st.Done == 4 })
	var first, last time.Time
	for _, sub := range subs {
		ds := r.sim.DeliveriesFor(sub.Endpoint)
		if len(ds) != 1 {
			t.Fatalf("deliveries to a paced recipient: %d; want 1", len(ds))
		}
		if first.IsZero() || ds[0].At.Before(first) {
			first = ds[0].At
		}
		if ds[0].At.After(last) {
			last = ds[0].At
		}
	}
	// Two at once, then one every half second: the fourth a second after the first two.
	if span := last.Sub(first); span < 700*time.Millisecond {
		t.Errorf("4 recipients at 2 a second were sent within %v; want at least about 1s", span)
	}
}

// TestAuditCampaign: audit --campaign checks every recipient a worker numbered, by its job id:
// while the campaign is paused the valid ones wait in its list (none yet, where "campaign")
// and the invalid one has its dead record; once resumed and sent, each has exactly one record
// (exit 0), counted by code. A campaign nothing was written under is named, exit 1.
func TestAuditCampaign(t *testing.T) {
	r := newCampaignRig(t)
	r.worker()
	if code, stdout, _ := run(t, "audit", "--redis", r.url, "--campaign", "nobody"); code != 1 || stdout != "no campaign nobody under prefix wp\n" {
		t.Errorf("audit of an unknown campaign: exit %d, %q; want 1 naming it", code, stdout)
	}
	message := r.file("message.txt", "held back")
	if code, stdout, stderr := run(t, "campaign", "create", "--redis", r.url, "--id", "held", "--payload-file", message); code != 0 {
		t.Fatalf("create: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := run(t, "campaign", "pause", "--redis", r.url, "held"); code != 0 {
		t.Fatalf("pause: exit %d, %q", code, stdout)
	}
	subs, file := r.subscribers("held.jsonl", "apple", 2)
	good, _ := os.ReadFile(file)
	all := r.file("all.jsonl", string(good)+`{"endpoint":"http://push.example.net/x","keys":{"p256dh":"BGsX0fLhLEJH-Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`+"\n")
	if code, stdout, stderr := run(t, "campaign", "add", "--redis", r.url, "held", all); code != 0 {
		t.Fatalf("add: exit %d\n%s%s", code, stdout, stderr)
	}
	r.await("held", "queued", func(st inspect.CampaignStatus) bool { return st.Added == 3 && st.Queued == 2 && st.Done == 1 })

	code, stdout, _ := run(t, "audit", "--redis", r.url, "--campaign", "held")
	for _, want := range []string{"jobs:                     3\n", "exactly one terminal:     1\n", "none yet:                 2\n  campaign                2\n",
		"terminal records by code:\n  INVALID_JOB             1\n"} {
		if code != 1 || !strings.Contains(stdout, want) {
			t.Errorf("audit of the paused campaign: exit %d, lacks %q; want 1:\n%s", code, want, stdout)
		}
	}
	var rep struct {
		Total     int            `json:"total"`
		NoneWhere map[string]int `json:"none_where"`
		Missing   []string       `json:"missing"`
	}
	code, stdout, _ = run(t, "audit", "--redis", r.url, "--campaign", "held", "--json")
	if err := json.Unmarshal([]byte(stdout), &rep); code != 1 || err != nil || rep.Total != 3 || rep.NoneWhere["campaign"] != 2 || len(rep.Missing) != 2 || !strings.HasPrefix(rep.Missing[0], "held/") {
		t.Errorf("audit --json of the paused campaign: exit %d, %+v:\n%s", code, rep, stdout)
	}

	if code, stdout, _ := run(t, "campaign", "resume", "--redis", r.url, "held"); code != 0 {
		t.Fatalf("resume: exit %d, %q", code, stdout)
	}
	r.await("held", "done", func(st inspect.CampaignStatus) bool { return st.Done == 3 })
	code, stdout, stderr := run(t, "audit", "--redis", r.url, "--campaign", "held")
	if code != 0 || !strings.Contains(stdout, "exactly one terminal:     3\n") || !strings.Contains(stdout, "terminal records by code:\n  ACCEPTED                2\n  INVALID_JOB             1\n") {
		t.Errorf("audit of the sent campaign: exit %d; want 0, 2 ACCEPTED and 1 INVALID_JOB:\n%s%s", code, stdout, stderr)
	}
	for _, sub := range subs {
		if ds := r.sim.DeliveriesFor(sub.Endpoint); len(ds) != 1 {
			t.Errorf("deliveries to a recipient: %d; want 1", len(ds))
		}
	}
}
