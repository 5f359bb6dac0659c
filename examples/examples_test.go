package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/workerproc"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// ids are n job ids with a prefix of the language that enqueues them.
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// TestProducersAndConsumers enqueues jobs with both producers, waits for the worker to record
// every outcome, and reads them back with both consumers, one restart (after a crash between
// reading and acknowledging) each.
func TestProducersAndConsumers(t *testing.T) {
	py, nd := python(t), node(t)
	e := newEnv(t)
	e.python, e.node = py, nd
	subs := e.subscriptions(12)
	// Two subscriptions the user dropped: their jobs end GONE, in the ledger and the gone stream.
	var goneEndpoints []string
	for _, s := range subs[:2] {
		ep := s["endpoint"].(string)
		if !e.sim.Expire(ep) {
			t.Fatalf("pushsim does not know %s", ep)
		}
		goneEndpoints = append(goneEndpoints, ep)
	}

	pyIDs, nodeIDs := ids("py", 30), ids("node", 30)
	// Every third job is bulk: a batch writes to both intakes of a shard before its one WAIT.
	bulkIDs := map[string]bool{}
	for _, list := range [][]string{pyIDs, nodeIDs} {
		for i, id := range list {
			if i%3 == 2 {
				bulkIDs[id] = true
			}
		}
	}
	isBulk := func(id string) bool { return bulkIDs[id] }
	pyJobs := e.jobsFile("py.jsonl", pyIDs, subs, isBulk)
	nodeJobs := e.jobsFile("node.jsonl", nodeIDs, subs, isBulk)
	common := []string{"--redis", e.master.URL(), "--shards", strconv.Itoa(shards)}
	e.mustRun(e.python, "python/producer.py", append(common, "--wait-replicas", "1", pyJobs)...)
	e.mustRun(e.node, "node/producer.js", append(common, "--wait-replicas", "1", nodeJobs)...)

	// A shard count other than the recorded one is refused before anything is written.
	for _, p := range []struct{ interp, script, id string }{{e.python, "python/producer.py", "py-wrong-shards"}, {e.node, "node/producer.js", "node-wrong-shards"}} {
		f := e.jobsFile(p.id+".jsonl", []string{p.id}, subs[2:], nil)
		code, _, stderr := e.run(p.interp, p.script, "--redis", e.master.URL(), "--shards", "2", f)
		if code != 2 || !strings.Contains(stderr, "used with 3 shards") {
			t.Errorf("%s --shards 2 against a prefix of 3 shards: exit %d, stderr %q; want exit 2 naming the recorded count", p.script, code, stderr)
		}
	}

	// More replicas than there are: WAIT falls short, the producer says so and fails; the jobs
	// are written all the same, and sending them again (same ids) is safe.
	var waitIDs []string
	for _, p := range []struct{ interp, script, id string }{{e.python, "python/producer.py", "py-wait"}, {e.node, "node/producer.js", "node-wait"}} {
		f := e.jobsFile(p.id+".jsonl", []string{p.id}, subs[2:], nil)
		code, _, stderr := e.run(p.interp, p.script, append(common, "--wait-replicas", "2", "--wait-timeout-ms", "100", "--attempts", "2", f)...)
		if code != 1 || !strings.Contains(stderr, "of 2 replicas acknowledged") || !strings.Contains(stderr, "send again from line 1") {
			t.Errorf("%s --wait-replicas 2 with one replica: exit %d, stderr %q; want exit 1, the replicas counted and the line to send again from", p.script, code, stderr)
		}
		e.mustRun(p.interp, p.script, append(common, "--wait-replicas", "1", f)...)
		waitIDs = append(waitIDs, p.id)
	}

	all := slices.Concat(pyIDs, nodeIDs, waitIDs)
	isGone := map[string]bool{}
	for _, list := range [][]string{pyIDs, nodeIDs} {
		for i, id := range list {
			if i%len(subs) < len(goneEndpoints) {
				isGone[id] = true
			}
		}
	}
	ledger := e.waitLedger(all)
	for _, id := range all {
		r := ledger[id][0]
		if want := stream.ShardOf(id, shards); r.shard != want {
			t.Errorf("job %s is recorded in shard %d; CRC-32 of its id says %d: the producer hashed it elsewhere", id, r.shard, want)
		}
		want := "ACCEPTED"
		if isGone[id] {
			want = "GONE"
		}
		if r.fields["code"] != want {
			t.Errorf("job %s: code %v, want %s", id, r.fields["code"], want)
		}
	}
	if sh := shardsUsed(ledger); len(sh) != shards {
		t.Errorf("the jobs landed in shards %v; want all %d used", sh, shards)
	}
	for _, id := range []string{"py-wrong-shards", "node-wrong-shards"} {
		if n := len(ledger[id]); n != 0 {
			t.Errorf("job %s, refused by its producer, has %d ledger records", id, n)
		}
	}

	// Every accepted job sent again by the other language's producer: copies, acknowledged
	// without a send or a record.
	var accepted []string
	for _, id := range pyIDs {
		if !isGone[id] {
			accepted = append(accepted, id)
		}
	}
	again := e.jobsFile("again.jsonl", accepted, subs[len(goneEndpoints):], isBulk)
	sentBefore := len(e.sim.Deliveries())
	e.mustRun(e.node, "node/producer.js", append(common, again)...)
	e.waitDrained()
	if n := len(e.sim.Deliveries()) - sentBefore; n != 0 {
		t.Errorf("the copies of %d accepted jobs made %d more sends; want none", len(accepted), n)
	}
	e.waitLedger(all)

	results, gone := e.records("results"), e.records("gone")
	var goneSeen []string
	for _, r := range gone {
		if ep, _ := r.fields["endpoint"].(string); !slices.Contains(goneSeen, ep) {
			goneSeen = append(goneSeen, ep)
		}
	}
	slices.Sort(goneSeen)
	if want := slices.Sorted(slices.Values(goneEndpoints)); !slices.Equal(goneSeen, want) {
		t.Fatalf("the gone records name the endpoints %v; want the two expired ones %v", goneSeen, want)
	}
	for _, c := range []struct {
		name, interp, script string
	}{{"python", e.python, "python/consumer.py"}, {"node", e.node, "node/consumer.js"}} {
		t.Run(c.name+" consumer", func(t *testing.T) {
			e.checkConsumer(t, c.interp, c.script, c.name, subs, goneEndpoints, results, gone)
		})
	}
}

// TestStampedVersionShows: the version a build is stamped with is what the worker's build-info
// metric and the replicas table of `status` show.
func TestStampedVersionShows(t *testing.T) {
	e := newEnv(t)
	resp, err := http.Get("http://" + e.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var info string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "webpush_build_info{") {
			info = line
		}
	}
	if !strings.Contains(info, `version="`+workerVersion+`"`) || !strings.HasSuffix(info, " 1") {
		t.Errorf("webpush_build_info is %q; want version=%q and the value 1", info, workerVersion)
	}
	waitFor(t, 20*time.Second, "status to list the worker with its version", func() string {
		out, err := workerproc.Command("status", "--redis", e.master.URL()).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("gateway-worker status: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), workerVersion) {
			return fmt.Sprintf("its output does not name %s:\n%s", workerVersion, out)
		}
		return ""
	})
}

// waitLedger waits until every id has a ledger record and returns each id's records.
func (e *env) waitLedger(ids []string) map[string][]record {
	e.t.Helper()
	var byID map[string][]record
	waitFor(e.t, 60*time.Second, "a ledger record of every job", func() string {
		byID = map[string][]record{}
		for _, r := range e.records("results") {
			id, _ := r.fields["id"].(string)
			byID[id] = append(byID[id], r)
		}
		var missing []string
		for _, id := range ids {
			if len(byID[id]) == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("%d of %d without a record: %v", len(missing), len(ids), missing)
		}
		return ""
	})
	for _, id := range ids {
		if n := len(byID[id]); n != 1 {
			e.t.Errorf("job %s has %d ledger records, want 1", id, n)
		}
	}
	return byID
}

// waitDrained waits until the worker has moved on every entry of the intakes and the lanes: an
// entry leaves a lane in the script that records its outcome, so every job enqueued so far
// has its record (or is waiting in the delayed set).
func (e *env) waitDrained() {
	e.t.Helper()
	ctx := context.Background()
	waitFor(e.t, 30*time.Second, "the intakes and the lanes to drain", func() string {
		for s := range shards {
			lanes, err := e.rdb.Keys(ctx, fmt.Sprintf("wp:{%d}:lane:*", s)).Result()
			if err != nil {
				return err.Error()
			}
			for _, key := range append(lanes, stream.KeysFor("", s).Intakes()...) {
				n, err := e.rdb.XLen(ctx, key).Result()
				if err != nil {
					return err.Error()
				}
				if n != 0 {
					return fmt.Sprintf("%s holds %d entries", key, n)
				}
			}
		}
		return ""
	})
}

func shardsUsed(ledger map[string][]record) []int {
	var out []int
	for _, rs := range ledger {
		for _, r := range rs {
			if !slices.Contains(out, r.shard) {
				out = append(out, r.shard)
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkConsumer runs one language's consumer twice under one consumer name: the first run
// handles some records and stops; then entries are read under its name and never acknowledged,
// as by a run that crashed; the second run must handle those first and then the rest. Together
// they must handle every ledger and gone record exactly once, prune the gone subscriptions
// from the store, and leave nothing pending.
func (e *env) checkConsumer(t *testing.T, interp, script, name string, subs []map[string]any, goneEndpoints []string, results, gone []record) {
	ctx := context.Background()
	storePath := filepath.Join(e.dir, name+"-store.json")
	initial := map[string]any{}
	for _, s := range subs {
		initial[s["endpoint"].(string)] = map[string]any{"user": "someone"}
	}
	writeJSON(t, storePath, map[string]any{"subscriptions": initial})
	group, consumer := name+"-upstream", name+"-1"
	args := []string{"--redis", e.master.URL(), "--shards", strconv.Itoa(shards), "--group", group, "--consumer", consumer, "--store", storePath, "--idle-exit", "1"}

	first := parseEvents(t, script, e.mustRun(interp, script, append(args, "--max", "10")...))
	if len(first) != 10 {
		t.Fatalf("the first run handled %d records, want --max 10", len(first))
	}

	// A crash after reading, before acknowledging: three ledger entries and one gone entry
	// become this consumer's pending entries.
	var crashed []string
	for _, key := range []string{results[len(results)-1].stream, gone[len(gone)-1].stream} {
		count := int64(3)
		if strings.HasSuffix(key, ":gone") {
			count = 1
		}
		streams, err := e.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: consumer, Streams: []string{key, ">"}, Count: count}).Result()
		if err != nil {
			t.Fatalf("XREADGROUP %s: %v", key, err)
		}
		for _, m := range streams[0].Messages {
			crashed = append(crashed, key+" "+m.ID)
		}
	}
	if len(crashed) != 4 {
		t.Fatalf("the crash read %d entries (%v), want 4: the first run left too few unread", len(crashed), crashed)
	}

	second := parseEvents(t, script, e.mustRun(interp, script, args...))
	var resumed []string
	for _, ev := range second[:min(len(crashed), len(second))] {
		resumed = append(resumed, ev.Stream+" "+ev.Entry)
	}
	slices.Sort(crashed)
	slices.Sort(resumed)
	if !slices.Equal(resumed, crashed) {
		t.Errorf("the restarted consumer first handled %v; want its pending entries %v", resumed, crashed)
	}

	handled := map[string]int{}
	for _, ev := range slices.Concat(first, second) {
		handled[ev.Stream+" "+ev.Entry]++
	}
	for _, r := range slices.Concat(results, gone) {
		if n := handled[r.stream+" "+r.entry]; n != 1 {
			t.Errorf("record %s %s (job %v) handled %d times, want once", r.stream, r.entry, r.fields["id"], n)
		}
	}
	if n, want := len(first)+len(second), len(results)+len(gone); n != want {
		t.Errorf("the two runs handled %d records; the streams hold %d", n, want)
	}

	st := readStore(t, storePath)
	for _, r := range results {
		id := r.fields["id"].(string)
		if st.Outcomes[id] != r.fields["code"] {
			t.Errorf("store: job %s has outcome %q, the ledger says %v", id, st.Outcomes[id], r.fields["code"])
		}
	}
	for _, ep := range goneEndpoints {
		if _, ok := st.Subscriptions[ep]; ok {
			t.Errorf("store: the gone subscription %s was not pruned", ep)
		}
	}
	if got, want := len(st.Subscriptions), len(subs)-len(goneEndpoints); got != want {
		t.Errorf("store: %d subscriptions left, want %d", got, want)
	}
	pruned := 0
	for _, ev := range slices.Concat(first, second) {
		if ev.Kind == "pruned" && ev.Had {
			pruned++
		}
	}
	if pruned != len(goneEndpoints) {
		t.Errorf("%d gone records deleted a subscription, want %d (one per endpoint; the second record of each finds it gone)", pruned, len(goneEndpoints))
	}

	for s := range shards {
		for _, kind := range []string{"results", "gone"} {
			key := fmt.Sprintf("wp:{%d}:%s", s, kind)
			p, err := e.rdb.XPending(ctx, key, group).Result()
			if err != nil {
				t.Fatalf("XPENDING %s %s: %v", key, group, err)
			}
			if p.Count != 0 {
				t.Errorf("%s: %d entries still pending for %s", key, p.Count, group)
			}
		}
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNodeCRC32Fallback checks the Node producer's table CRC-32, what it uses where
// zlib.crc32 is missing (before Node 20.15 and 22.2), and the CRC-32 it uses here, against Go's
// hash/crc32 (the worker's).
func TestNodeCRC32Fallback(t *testing.T) {
	nodeBin := node(t)
	inputs := []string{"", "a", "job-00001", "order-1234-shipped", "py-017", strings.Repeat("x", 128), "~!@#$%^&*()_+ {}|"}
	script := `const p = require('./node/producer.js');
const ids = JSON.parse(process.argv[1]);
for (const id of ids) console.log(p.crc32Table(Buffer.from(id)), p.crc32(Buffer.from(id)), p.shardOf(id, 7));`
	b, _ := json.Marshal(inputs)
	out, err := exec.Command(nodeBin, "-e", script, string(b)).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("node printed %d lines for %d ids:\n%s", len(lines), len(inputs), out)
	}
	for i, id := range inputs {
		sum := crc32.ChecksumIEEE([]byte(id))
		want := fmt.Sprintf("%d %d %d", sum, sum, stream.ShardOf(id, 7))
		if lines[i] != want {
			t.Errorf("id %q: node says %q, Go says %q (table, crc32, shard of 7)", id, lines[i], want)
		}
	}
}
