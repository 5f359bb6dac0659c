package examples_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestProducersPickTheIntakeOfTheClass: each producer writes a job whose top-level "class" is
// "bulk" to its shard's bulk intake and every other job to the transactional one, as
// stream.Producer does (job.PeekIntake), with one WAIT after a batch that writes to both. The
// entries are read back from the replica: the WAIT the producer met covers both intakes. No
// worker reads the prefixes used.
func TestProducersPickTheIntakeOfTheClass(t *testing.T) {
	py, nd := python(t), node(t)
	master, replica := startReplicated(t)
	rdb := replica.Client(t)
	ctx := context.Background()
	// The forms of "class" a producer meets: none, each class, null, one the workers refuse
	// (it is no bulk job), and a class before the id.
	classes := []any{nil, "bulk", "transactional", "null", "Bulk", "bulk-first"}
	var lines []string
	for i := range 36 {
		id := fmt.Sprintf("place-%02d", i)
		var line string
		switch c := classes[i%len(classes)]; c {
		case nil:
			line = fmt.Sprintf(`{"id":%q,"payload":"hi"}`, id)
		case "null":
			line = fmt.Sprintf(`{"id":%q,"class":null}`, id)
		case "bulk-first":
			line = fmt.Sprintf(`{"class":"bulk","id":%q}`, id)
		default:
			line = fmt.Sprintf(`{"id":%q,"class":%q}`, id, c)
		}
		lines = append(lines, line)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "jobs.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ name, interp, script string }{{"python", py, "python/producer.py"}, {"node", nd, "node/producer.js"}} {
		t.Run(p.name, func(t *testing.T) {
			prefix := "place-" + p.name
			e := &env{t: t, dir: dir}
			e.mustRun(p.interp, p.script, "--redis", master.URL(), "--prefix", prefix, "--shards", strconv.Itoa(shards),
				"--wait-replicas", "1", file)
			got := map[string][]string{} // job id -> the keys holding it
			for s := range shards {
				for _, key := range stream.KeysFor(prefix, s).Intakes() {
					msgs, err := rdb.XRange(ctx, key, "-", "+").Result()
					if err != nil {
						t.Fatalf("XRANGE %s on the replica: %v", key, err)
					}
					for _, m := range msgs {
						id, _ := job.PeekID([]byte(fmt.Sprint(m.Values["job"])))
						got[id] = append(got[id], key)
					}
				}
			}
			bulk, inBulk := 0, 0
			for _, line := range lines {
				id, class, err := job.PeekIntake([]byte(line))
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				want := stream.KeysFor(prefix, stream.ShardOf(id, shards)).IntakeOf(class)
				if len(got[id]) != 1 || got[id][0] != want {
					t.Errorf("%s is in %v on the replica; want it once, in %s", line, got[id], want)
				}
				if class.IsBulk() {
					bulk++
					if len(got[id]) == 1 && strings.HasSuffix(got[id][0], ":in:bulk") {
						inBulk++
					}
				}
			}
			if bulk != 12 || inBulk != bulk {
				t.Errorf("%d of the %d bulk jobs are in a bulk intake; want the 12 the file has", inBulk, bulk)
			}
		})
	}
}

// TestTransactionalNotBehindBulk: bulk jobs each producer writes ahead of a transactional one
// do not hold it up. Both producers leave a backlog of bulk jobs in one shard, then a
// transactional job each; the worker starts only then, so the backlog is really there. Every
// job is delivered, and each transactional job is sent before all but a few of the bulk jobs:
// it is read from an intake of its own and from its lane first. Had a producer written its bulk
// jobs to the transactional intake, the transactional job after them would be read only once
// the worker had moved those thousands on, and the sends of the bulk jobs moved first would
// come before it.
func TestTransactionalNotBehindBulk(t *testing.T) {
	py, nd := python(t), node(t)
	e := newEnvWithoutWorker(t)
	e.python, e.node = py, nd
	const home = 1
	const perLang = 3000
	// idsOn are n ids with prefix that shard 'home' holds: every job is in one shard, so one
	// ledger stream orders them all.
	idsOn := func(prefix string, n int) []string {
		var out []string
		for i := 0; len(out) < n; i++ {
			if id := fmt.Sprintf("%s-%05d", prefix, i); stream.ShardOf(id, shards) == home {
				out = append(out, id)
			}
		}
		return out
	}
	subs := e.subscriptions(8)
	everyJob := func(string) bool { return true }
	common := []string{"--redis", e.master.URL(), "--shards", strconv.Itoa(shards), "--batch", "1000"}
	var bulkIDs, txIDs []string
	for _, p := range []struct{ name, interp, script string }{{"py", e.python, "python/producer.py"}, {"node", e.node, "node/producer.js"}} {
		ids := idsOn(p.name+"-bulk", perLang)
		bulkIDs = append(bulkIDs, ids...)
		e.mustRun(p.interp, p.script, append(common, e.jobsFile(p.name+"-bulk.jsonl", ids, subs, everyJob))...)
	}
	for _, p := range []struct{ name, interp, script string }{{"py", e.python, "python/producer.py"}, {"node", e.node, "node/producer.js"}} {
		ids := idsOn(p.name+"-tx", 1)
		txIDs = append(txIDs, ids...)
		e.mustRun(p.interp, p.script, append(common, e.jobsFile(p.name+"-tx.jsonl", ids, subs, nil))...)
	}
	k := stream.KeysFor("", home)
	for key, want := range map[string]int64{k.BulkIntake: 2 * perLang, k.Intake: 2} {
		if n, err := e.rdb.XLen(context.Background(), key).Result(); err != nil || n != want {
			t.Fatalf("%s holds %d entries (%v) before the worker starts; want %d", key, n, err, want)
		}
	}

	e.startWorker()
	ledger := e.waitLedger(append(append([]string{}, bulkIDs...), txIDs...))
	for _, id := range bulkIDs {
		if r := ledger[id][0]; r.fields["code"] != "ACCEPTED" {
			t.Fatalf("bulk job %s: code %v, want ACCEPTED", id, r.fields["code"])
		}
	}
	// From an intake of its own, only the sends under way when the worker read it come before
	// a transactional job: tens at most, on a loaded machine too. Behind the backlog in one
	// intake, every send made while the worker moved the backlog on would: a sixth of the
	// backlog or more, since the worker moves entries on only a few times faster than it sends
	// them. The bound lies between, some way from each.
	const bound = 2 * perLang / 16
	for _, id := range txIDs {
		tx := ledger[id][0]
		before := 0
		for _, b := range bulkIDs {
			if entryBefore(ledger[b][0].entry, tx.entry) {
				before++
			}
		}
		if before >= bound {
			t.Errorf("transactional job %s was recorded after %d of the %d bulk jobs enqueued before it; want fewer than %d", id, before, len(bulkIDs), bound)
		}
	}
}

// entryBefore says whether stream entry id a comes before b in their stream.
func entryBefore(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	ams, _ := strconv.ParseUint(am, 10, 64)
	bms, _ := strconv.ParseUint(bm, 10, 64)
	if ams != bms {
		return ams < bms
	}
	aseq, _ := strconv.ParseUint(as, 10, 64)
	bseq, _ := strconv.ParseUint(bs, 10, 64)
	return aseq < bseq
}
