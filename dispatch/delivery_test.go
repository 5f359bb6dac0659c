package dispatch

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// registryID is the registry entry each pushsim personality's default host routes to.
var registryID = map[string]string{
	pushsim.FCM: "fcm", pushsim.Autopush: "autopush", pushsim.Apple: "apple", pushsim.WNS: "wns",
	pushsim.Generic: "fallback",
}

func TestBurstAcrossProvidersIsAcceptedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{shards: 2})
	type want struct {
		provider, text string
		ttl            int // TTL pushsim must see; -1: not checked
	}
	wants := map[string]want{}
	var jobs [][]byte
	// Enqueued 100 s ago with a TTL of an hour: every send must carry the 3500 s that remain.
	enqueued := e.clock.Now().Add(-100 * time.Second).UnixMilli()
	for _, p := range pushsim.Providers() {
		sub := e.subscribe(p, e.key)
		for i := range 8 {
			id := fmt.Sprintf("%s-%d", p, i)
			text := fmt.Sprintf("hello %s #%d ✓", p, i)
			jobs = append(jobs, job(id, sub, text, "ttl", 3600, "enqueued_at", enqueued, "urgency", "high"))
			wants[id] = want{registryID[p], text, 3500}
		}
		id := p + "-sealed"
		jobs = append(jobs, ciphertextJob(t, id, sub, "sealed for "+p))
		wants[id] = want{registryID[p], "sealed for " + p, -1}
		id = p + "-b64"
		jobs = append(jobs, job(id, sub, base64.StdEncoding.EncodeToString([]byte("bytes for "+p)), "payload_encoding", "base64"))
		wants[id] = want{registryID[p], "bytes for " + p, -1}
	}
	// The fallback lane's host is proven first, by one job of its own, as a self-hosted service
	// is after its first answer: the burst then tests the deliveries, not the unproven hosts'
	// turns, which the stepped clock would hold back.
	generic := e.subscribe(pushsim.Generic, e.key)
	wants["generic-first"] = want{registryID[pushsim.Generic], "first", 3500}
	e.enqueue(job("generic-first", generic, "first", "ttl", 3600, "enqueued_at", enqueued))
	e.start(e.config(e.store))
	waitFor(t, "the fallback host's first job", func() bool { return len(e.all("results")) == 1 })
	e.enqueue(jobs...)

	waitFor(t, "a ledger record for every job", func() bool { return len(e.all("results")) >= len(wants) })
	ledger := e.byID("results")
	if len(ledger) != len(wants) {
		t.Errorf("ledger has %d ids, want %d", len(ledger), len(wants))
	}
	for id, w := range wants {
		rs := ledger[id]
		if len(rs) != 1 {
			t.Errorf("%s: %d ledger records, want 1", id, len(rs))
			continue
		}
		r := rs[0]
		if r["code"] != "ACCEPTED" || r["provider"] != w.provider || r["attempt"] != "0" || !strings.HasPrefix(r["status"], "20") {
			t.Errorf("%s: ledger record %v, want ACCEPTED by %s at attempt 0 with a 2xx", id, r, w.provider)
		}
		ds := e.deliveriesOf(id)
		if len(ds) != 1 {
			t.Errorf("%s: pushsim saw %d requests, want 1", id, len(ds))
			continue
		}
		if got := string(ds[0].Plaintext); got != w.text {
			t.Errorf("%s: pushsim decrypted %q, want %q", id, got, w.text)
		}
		if w.ttl >= 0 && ds[0].TTL != w.ttl {
			t.Errorf("%s: TTL sent %d, want the remaining %d", id, ds[0].TTL, w.ttl)
		}
	}
	waitFor(t, "intake and lanes drained", e.queuesEmpty)
	if dead := e.all("dead"); len(dead) != 0 {
		t.Errorf("dead records: %v", dead)
	}
}

func TestGoneAndKeyMismatchReachLedgerAndGoneStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	other, err := vapid.GenerateKey("other")
	if err != nil {
		t.Fatal(err)
	}
	expired := e.subscribe(pushsim.Autopush, e.key)
	e.sim.Expire(expired.Endpoint)
	mismatched := e.subscribe(pushsim.FCM, other) // made with another application server key
	e.enqueue(job("gone-1", expired, "x"), job("mismatch-1", mismatched, "x"))
	e.start(e.config(e.store))

	for _, tc := range []struct{ id, code, provider, endpoint string }{
		{"gone-1", "GONE", "autopush", expired.Endpoint},
		{"mismatch-1", "KEY_MISMATCH", "fcm", mismatched.Endpoint},
	} {
		r := e.waitRecord("results", tc.id)
		if r["code"] != tc.code || r["provider"] != tc.provider {
			t.Errorf("%s: ledger %v, want %s by %s", tc.id, r, tc.code, tc.provider)
		}
		g := e.waitRecord("gone", tc.id)
		if g["code"] != tc.code || g["endpoint"] != tc.endpoint {
			t.Errorf("%s: gone record code %q, endpoint matches %v; want %s and the subscription's endpoint",
				tc.id, g["code"], g["endpoint"] == tc.endpoint, tc.code)
		}
	}
}

func TestPoisonJobsAreDeadLetteredAmongGoodOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	httpSub := sub
	httpSub.Endpoint = "http://" + strings.TrimPrefix(sub.Endpoint, "https://")
	in := e.store.Keys(0).Intake
	huge := `{"id":"huge","payload":"` + strings.Repeat("A", 10<<20-26) + `"}`
	if len(huge) != 10485760 {
		t.Fatalf("huge entry is %d bytes", len(huge))
	}
	good := func(i int) { e.enqueue(job("good-"+strconv.Itoa(i), sub, "fine "+strconv.Itoa(i))) }

	good(0)
	e.xadd(in, "job", `{"id":"bad-json","subscription":`)
	good(1)
	e.xadd(in, "job", `{"id":"no-sub"}`)
	good(2)
	// A valid job larger than an invalid one's cut: its record keeps it whole, for replay.
	unknownKey := job("unknown-key", sub, strings.Repeat("k", 3900), "vapid_key", "marketing")
	if len(unknownKey) <= stream.MaxInvalidJobBytes {
		t.Fatalf("the unknown-key job is %d bytes, want more than %d", len(unknownKey), stream.MaxInvalidJobBytes)
	}
	e.enqueue(unknownKey)
	good(3)
	e.enqueue(job("plain-http", httpSub, "x"))
	good(4)
	e.xadd(in, "job", huge)
	good(5)
	e.xadd(in, "data", "upstream used the wrong field name")
	good(6)
	// An invalid job of 64 KiB: its record keeps its first bytes only.
	colourful := job("colourful", sub, "x", "colour", strings.Repeat("r", 60000))
	e.enqueue(colourful)
	good(7)
	e.xadd(in, "job", `[1,2]`)
	good(8)
	e.start(e.config(e.store))

	wantDead := []struct{ id, reason string }{
		{"bad-json", "job: not valid JSON: unexpected end of input"},
		{"no-sub", "subscription: required"},
		{"unknown-key", `vapid_key: no key named "marketing" is configured`},
		{"plain-http", "subscription.endpoint: not https"},
		{"huge", "entry is 10485760 bytes; at most 65536"},
		{"", `entry has no "job" field`},
		{"colourful", `unknown field "colour"`},
		{"", "job: must be a JSON object, got an array"},
	}
	waitFor(t, "every poison job dead-lettered", func() bool { return len(e.all("dead")) >= len(wantDead) })
	for i := range 9 {
		id := "good-" + strconv.Itoa(i)
		if r := e.waitRecord("results", id); r["code"] != "ACCEPTED" {
			t.Errorf("%s: %v, want ACCEPTED", id, r)
		}
	}
	dead := e.all("dead")
	if len(dead) != len(wantDead) {
		t.Fatalf("%d dead records, want %d", len(dead), len(wantDead))
	}
	// The entries of one intake batch are moved at once, so dead records need not keep the
	// intake order: each is found by its reason, which is different for every poison job.
	byReason := map[string]map[string]string{}
	for _, d := range dead {
		byReason[d["reason"]] = d
	}
	for i, w := range wantDead {
		d, ok := byReason[w.reason]
		if !ok {
			t.Errorf("no dead record with reason %q", w.reason)
			continue
		}
		if d["id"] != w.id || d["code"] != "INVALID_JOB" || d["from"] != in || d["attempt"] != "0" {
			t.Errorf("dead record %d: id %q code %q reason %q from %q attempt %q; want id %q INVALID_JOB %q from %s attempt 0",
				i, d["id"], d["code"], d["reason"], d["from"], d["attempt"], w.id, w.reason, in)
		}
		cut := map[string]string{"huge": huge, "colourful": string(colourful)}
		if raw, ok := cut[w.id]; ok && (d["job"] != raw[:stream.MaxInvalidJobBytes] || d["note"] == "" || d["job_bytes"] != strconv.Itoa(len(raw))) {
			t.Errorf("the dead record of %s (%d bytes) keeps %d bytes with note %q and job_bytes %q; want the first %d, a note and its size",
				w.id, len(raw), len(d["job"]), d["note"], d["job_bytes"], stream.MaxInvalidJobBytes)
		}
		if w.id == "unknown-key" && (d["job"] != string(unknownKey) || d["note"] != "" || d["job_bytes"] != "") {
			t.Errorf("the dead record of a valid job of %d bytes keeps %d bytes with note %q; want it whole", len(unknownKey), len(d["job"]), d["note"])
		}
	}
	if d := byReason[wantDead[0].reason]; d["job"] != `{"id":"bad-json","subscription":` {
		t.Errorf("dead record keeps job %q, want the original entry", d["job"])
	}
	for _, d := range e.sim.Deliveries() {
		if !strings.HasPrefix(d.JobID, "good-") {
			t.Errorf("pushsim saw job %q, which is poison", d.JobID)
		}
	}
	waitFor(t, "intake and lanes drained", e.queuesEmpty)
}

func TestRedeliveredJobWithSentMarkIsNotSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	j := job("once", sub, "only once")
	e.enqueue(j)
	w1 := e.start(e.config(e.store))
	e.waitRecord("results", "once")
	if err := w1.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	// A copy of the job reaches the lane past the intake's check (an attempt that was
	// reclaimed while it was being recorded leaves one), and a consumer that then dies
	// ("ghost") reads it: it is pending, idle, and must be reclaimed by the next worker, which
	// must see the sent mark rather than send it again.
	ghost := e.newStore("ghost")
	ctx := context.Background()
	lane := e.store.Keys(0).Lane("fcm")
	e.xadd(lane, "job", string(j), "provider", "fcm", "attempt", "0", "enqueued_at", strconv.FormatInt(e.clock.Now().UnixMilli(), 10))
	if got, _, err := ghost.ReadLanes(ctx, 0, "fcm", stream.LaneRead{Total: 10}); err != nil || len(got) != 1 {
		t.Fatalf("ghost ReadLane: %d entries, %v", len(got), err)
	}

	cfg := e.config(e.newStore("w2"))
	cfg.VisibilityTimeout = 50 * time.Millisecond
	e.passReclaimGrace(e.start(cfg))
	waitFor(t, "the reclaimed copy acknowledged", func() bool { return e.pending(lane) == 0 && e.queuesEmpty() })

	// A copy arriving while the worker runs goes the same way, through intake.
	e.enqueue(j)
	waitFor(t, "the second copy acknowledged", func() bool { return e.queuesEmpty() && e.pending(lane) == 0 })

	if n := len(e.deliveriesOf("once")); n != 1 {
		t.Errorf("pushsim saw %d requests for the job, want 1", n)
	}
	if n := len(e.byID("results")["once"]); n != 1 {
		t.Errorf("%d ledger records, want 1", n)
	}
}

func TestRedisOutageIsRetriedWithoutSpinning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.Apple, e.key)
	e.enqueue(job("before", sub, "before the outage"))
	e.start(e.config(e.store))
	e.waitRecord("results", "before")

	e.redis.Kill()
	failures := func() int { return strings.Count(e.logs.String(), "retrying") }
	waitFor(t, "the loops to notice the outage", func() bool { return failures() >= 10 })
	// Ten loops here (intake, five lanes, promoter, reclaimer, janitor, heartbeat) backing off
	// from 100 ms doubling make a handful of lines each in a second; a spinning loop makes
	// thousands.
	outage := time.Now()
	waitFor(t, "a second of outage", func() bool { return time.Since(outage) > time.Second })
	n := failures()
	t.Logf("%d failure lines in %v of outage", n, time.Since(outage))
	if n > 150 {
		t.Errorf("%d failure lines in about a second of outage: a loop is spinning", n)
	}
	e.redis.Restart()
	e.enqueue(job("after", sub, "after the outage"))
	if r := e.waitRecord("results", "after"); r["code"] != "ACCEPTED" {
		t.Errorf("after the outage: %v", r)
	}
}

// TestInvalidIDIsKeptInTheDeadRecord: a job whose id is itself what is invalid is
// dead-lettered under the id the upstream gave, so audit finds its one terminal record instead
// of reporting it lost.
func TestInvalidIDIsKeptInTheDeadRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	cases := []struct{ name, id, reason string }{
		{"200 characters", strings.Repeat("x", 200), "id: must be 1 to 128 characters, got 200"},
		{"not ASCII", "café-1", "id: byte 3 is not printable ASCII"},
		{"control character", "line\nbreak", "id: byte 4 is not printable ASCII"},
	}
	var ids []string
	for _, c := range cases {
		e.xadd(e.store.Keys(0).Intake, "job", string(job(c.id, sub, "x")))
		ids = append(ids, c.id)
	}
	e.start(e.config(e.store))
	waitFor(t, "every job dead-lettered", func() bool { return len(e.all("dead")) == len(cases) })
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := e.one("dead", c.id)
			if d["code"] != "INVALID_JOB" || d["reason"] != c.reason {
				t.Errorf("dead record code %q reason %q; want INVALID_JOB %q", d["code"], d["reason"], c.reason)
			}
		})
	}
	rep, _, err := e.inspector().Audit(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExactlyOne != len(ids) || len(rep.NoneWhere) != 0 {
		t.Errorf("audit: %d of %d ids with exactly one terminal record, the others %v", rep.ExactlyOne, len(ids), rep.NoneWhere)
	}
}

func TestBestEffortID(t *testing.T) {
	long := strings.Repeat("y", 200)
	cases := []struct{ name, raw, want string }{
		{"valid", `{"id":"j1","payload":"x"}`, "j1"},
		{"id after other members", `{"payload":"x","ttl":[1,{"id":"inner"}],"id":"j2"}`, "j2"},
		{"JSON broken after the id", `{"id":"j3","subscription":`, "j3"},
		{"too long", `{"id":"` + long + `"}`, long},
		{"not ASCII", `{"id":"caf\u00e9"}`, "café"},
		{"empty", `{"id":""}`, ""},
		{"longer than an entry", `{"id":"` + strings.Repeat("z", jobfmt.MaxEntryBytes+1) + `"}`, ""},
		{"not a string", `{"id":42}`, ""},
		{"no id", `{"payload":"x"}`, ""},
		{"not an object", `["id","j4"]`, ""},
		{"not JSON", `id=j5`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := bestEffortID(c.raw); got != c.want {
				t.Errorf("bestEffortID = %.40q, want %.40q", got, c.want)
			}
		})
	}
}

// TestOnAttemptTellsEverySend: the hook hears each attempt with its provider, code, status and
// times (enqueue and answer), which is what the demo and metrics are built on.
func TestOnAttemptTellsEverySend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var (
		mu       sync.Mutex
		attempts []Attempt
	)
	cfg := e.config(e.store)
	cfg.OnAttempt = func(a Attempt) {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, a)
	}
	fcm, apple := e.subscribe(pushsim.FCM, e.key), e.subscribe(pushsim.Apple, e.key)
	enqueued := e.clock.Now().Add(-time.Second)
	e.enqueue(job("to-fcm", fcm, "a", "enqueued_at", enqueued.UnixMilli()), job("to-apple", apple, "b", "enqueued_at", enqueued.UnixMilli()))
	e.start(cfg)
	waitFor(t, "both jobs in the ledger", func() bool { return len(e.all("results")) >= 2 })
	mu.Lock()
	defer mu.Unlock()
	got := map[string]Attempt{}
	for _, a := range attempts {
		got[a.JobID] = a
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempts told, want 2: %+v", len(attempts), attempts)
	}
	for id, provider := range map[string]string{"to-fcm": "fcm", "to-apple": "apple"} {
		a := got[id]
		if a.Provider != provider || a.Code != taxonomy.Accepted || a.Status != 201 || a.Attempt != 0 {
			t.Errorf("%s: %+v, want provider %s ACCEPTED 201 attempt 0", id, a, provider)
		}
		if !a.Enqueued.Equal(time.UnixMilli(enqueued.UnixMilli())) || a.At.Before(a.Enqueued) {
			t.Errorf("%s: enqueued %v at %v, want enqueued %v and an answer after it", id, a.Enqueued, a.At, enqueued)
		}
	}
}
