package inspect

import (
	"fmt"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// deadRecordBound is what one dead record of an invalid job may cost the dead stream at most:
// the first MaxInvalidJobBytes of the job and the record's other fields, with room for the
// stream's own overhead (a record that large fills a listpack node of its own, which the
// allocator rounds up to its next size class).
const deadRecordBound = stream.MaxInvalidJobBytes + 2<<10

// TestDeadStreamOfInvalidJobsIsBoundedInBytes: 1,000 invalid jobs of 64 KiB each, those the
// worker's validation refuses (ToDead) and those the read refuses in Redis (over the entry
// limit), leave a dead stream whose memory (MEMORY USAGE, every node counted) is that of their
// first bytes, not of the jobs; each record keeps the job's size, says it was cut, and cannot
// be replayed.
func TestDeadStreamOfInvalidJobsIsBoundedInBytes(t *testing.T) {
	const jobs = 1000
	for _, c := range []struct {
		name string
		size int
		dead func(t *testing.T, env *env, s *stream.Store, n int)
	}{
		{"refused by the worker", job.MaxEntryBytes, func(t *testing.T, env *env, s *stream.Store, n int) {
			for _, e := range env.readIntake(t, s, n) {
				d := stream.DeadRecord{ID: jobID(e.Fields["job"]), Code: "INVALID_JOB", Reason: `unknown field "colour"`, Job: e.Fields["job"], JobInvalid: true, At: t0}
				if ok, err := s.ToDead(env.ctx, e, d); err != nil || !ok {
					t.Fatalf("ToDead = %v, %v", ok, err)
				}
			}
		}},
		{"refused by the read", job.MaxEntryBytes + 1, func(t *testing.T, env *env, s *stream.Store, n int) {
			got, refused, err := s.ReadIntake(env.ctx, 0, job.ClassTransactional, n, 0)
			if err != nil || len(got) != 0 || len(refused) != n {
				t.Fatalf("ReadIntake = %d entries, %d refused, %v; want %d refused", len(got), len(refused), err, n)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, s := newStore(t, "fcm")
			const batch = 100
			for b := range jobs / batch {
				pipe := env.c.Pipeline()
				for i := range batch {
					id := fmt.Sprintf("bad-%d", b*batch+i)
					head := `{"id":"` + id + `","colour":"`
					pipe.XAdd(env.ctx, redisXAdd(s.Keys(0).Intake, head+strings.Repeat("r", c.size-len(head)-2)+`"}`))
				}
				if _, err := pipe.Exec(env.ctx); err != nil {
					t.Fatal(err)
				}
				c.dead(t, env, s, batch)
			}
			dead := s.Keys(0).Dead
			if n := env.xlen(t, dead); n != jobs {
				t.Fatalf("the dead stream holds %d records, want %d", n, jobs)
			}
			used, err := env.c.MemoryUsage(env.ctx, dead, 0).Result()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d invalid jobs of %d bytes: the dead stream uses %d bytes, %d a record", jobs, c.size, used, used/jobs)
			if limit := int64(jobs * deadRecordBound); used > limit {
				t.Errorf("the dead stream of %d invalid jobs of %d bytes uses %d bytes, want at most %d", jobs, c.size, used, limit)
			}
			recs, err := inspectorOf(s).DeadList(env.ctx, DeadFilter{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if len(r.Job) != stream.MaxInvalidJobBytes || r.JobBytes != c.size || r.Note != fmt.Sprintf("job cut to its first %d of %d bytes", stream.MaxInvalidJobBytes, c.size) ||
					!strings.HasPrefix(r.ID, "bad-") {
					t.Fatalf("dead record %s: id %q, job of %d bytes, job_bytes %d, note %q; want its id, the first %d bytes, %d and a note",
						r.EntryID, r.ID, len(r.Job), r.JobBytes, r.Note, stream.MaxInvalidJobBytes, c.size)
				}
			}
			if v, _, err := inspectorOf(s).ReplayDead(env.ctx, 0, recs[0].EntryID); err != nil || v != ReplayCut {
				t.Errorf("ReplayDead of a cut record = %v, %v; want %v", v, err, ReplayCut)
			}
		})
	}
}

// TestDeadRecordOfAValidJobReplays: a valid job larger than an invalid one's cut, refused for
// the gateway's configuration, is kept whole and replays byte for byte.
func TestDeadRecordOfAValidJobReplays(t *testing.T) {
	env, s := newStore(t, "fcm")
	raw := `{"id":"key-1","subscription":{"endpoint":"` + testEndpoint + `"},"payload":"` + strings.Repeat("p", 3900) + `","recipient":"` + strings.Repeat("r", 256) + `"}`
	if len(raw) <= stream.MaxInvalidJobBytes {
		t.Fatalf("the job is %d bytes, want more than %d", len(raw), stream.MaxInvalidJobBytes)
	}
	env.enqueue(t, s, raw)
	e := env.readIntake(t, s, 1)[0]
	d := stream.DeadRecord{ID: "key-1", Code: "INVALID_JOB", Reason: `vapid_key: no key named "x" is configured`, Job: raw, At: t0}
	if ok, err := s.ToDead(env.ctx, e, d); err != nil || !ok {
		t.Fatalf("ToDead = %v, %v", ok, err)
	}
	recs, err := inspectorOf(s).DeadList(env.ctx, DeadFilter{}, 0)
	if err != nil || len(recs) != 1 || recs[0].Job != raw || recs[0].Note != "" || recs[0].JobBytes != 0 {
		t.Fatalf("dead records %+v, %v; want one with the whole job", recs, err)
	}
	v, intakeID, err := inspectorOf(s).ReplayDead(env.ctx, 0, recs[0].EntryID)
	if err != nil || v != Replayed {
		t.Fatalf("ReplayDead = %v, %v; want %v", v, err, Replayed)
	}
	back, err := env.c.XRange(env.ctx, s.Keys(0).Intake, intakeID, intakeID).Result()
	if err != nil || len(back) != 1 || back[0].Values["job"] != raw {
		t.Errorf("the replayed intake entry is %v, %v; want the job byte for byte", back, err)
	}
}
