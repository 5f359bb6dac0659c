package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/workerproc"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// feeder is a producer that enqueues jobs of its own ids at a steady pace until stopped. A
// batch that fails is sent again from its first job not written, as an upstream would.
type feeder struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	ids  []string // guarded by mu: every id Enqueue reported written
	errs int      // guarded by mu: failed Enqueue calls
	last error    // guarded by mu: the last of them
}

// feed starts a feeder writing through p, ids "<name>-NNNNN", 10 jobs every 50 ms.
func feed(t testing.TB, p *stream.Producer, name string, subs []job.Subscription) *feeder {
	fd := &feeder{stop: make(chan struct{}), done: make(chan struct{})}
	go func() { // owned by the feeder: Stop waits for it
		defer close(fd.done)
		for i := 0; ; {
			batch := make([][]byte, 10)
			ids := make([]string, len(batch))
			for k := range batch {
				ids[k] = fmt.Sprintf("%s-%05d", name, i+k)
				batch[k] = jobLine(t, ids[k], subs[(i+k)%len(subs)], nil)
			}
			n, err := p.Enqueue(context.Background(), batch...)
			fd.mu.Lock()
			fd.ids = append(fd.ids, ids[:n]...)
			if err != nil {
				fd.errs++
				fd.last = err
			}
			fd.mu.Unlock()
			i += n
			select {
			case <-fd.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return fd
}

// Stop stops the feeder and returns the ids it enqueued; unless tolerate, a failed Enqueue
// fails the test.
func (fd *feeder) Stop(t testing.TB, tolerate bool) []string {
	t.Helper()
	close(fd.stop)
	<-fd.done
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if fd.errs > 0 && !tolerate {
		t.Fatalf("feeder: %d failed batches, the last: %v", fd.errs, fd.last)
	}
	if len(fd.ids) == 0 {
		t.Fatal("a feeder enqueued nothing")
	}
	return fd.ids
}

// testReshard changes the shard count of a live system twice, from 3 to 6 and from 6 to 4,
// with producers writing all along, as docs/operations.md says: workers of the new count with
// --reshard-from the old one roll in (the first records the new count), producers of the new
// count replace those of the old one, the old workers stop; for the shrink, the flag is
// dropped once the shards beyond the new count are empty, and a worker without it refuses to
// start before then. Every job is delivered exactly once with exactly one terminal record,
// those finished in the shards the shrink left behind included.
func testReshard(t *testing.T, url string) {
	const prefix = "re"
	f := newFleet(t, fleetOptions{url: url, prefix: prefix, shards: 3, registry: failoverRegistry})
	ctx := context.Background()
	subs := f.subscriptions(pushsim.FCM, 50)
	producer := func(shards int) *stream.Producer { return stream.NewProducer(f.rdb, prefix, shards) }
	roll := func(old []*worker, args ...string) []*worker {
		t.Helper()
		running := f.countLog(`"msg":"dispatch: running"`)
		ws := []*worker{f.startWorker(args...), f.startWorker(args...)}
		f.waitLog(`"msg":"dispatch: running"`, running+2, 30*time.Second)
		for _, w := range old {
			f.stop(w)
		}
		return ws
	}
	var ids []string

	ws := roll(nil)
	p3 := feed(t, producer(3), "three", subs)
	f.waitDelivered(20)

	// 3 -> 6: growing needs no drain (the old shards are among the new), only the switch.
	ws = roll(ws, "--shards", "6", "--reshard-from", "3")
	f.requireShards(6)
	p6 := feed(t, producer(6), "six", subs)
	if _, err := producer(3).Enqueue(ctx, jobLine(t, "three-late", subs[0], nil)); err == nil || !strings.Contains(err.Error(), "is used with 6 shards") {
		t.Errorf("a producer of 3 shards started after the switch: %v; want a refusal", err)
	}
	ids = append(ids, p3.Stop(t, false)...)
	f.waitDelivered(len(ids))

	// 6 -> 4: the workers read all 6 shards while producers of 6 may still write.
	ws = roll(ws, "--shards", "4", "--reshard-from", "6")
	f.requireShards(4)
	p4 := feed(t, producer(4), "four", subs)
	if code, out := f.run("run", append(append([]string{"--shards", "6"}, f.runArgs...), "--startup-timeout", "5s")...); code != 1 ||
		!strings.Contains(out, "is used with 4 shards") {
		t.Errorf("a worker of the old count started after the switch: exit %d\n%s\nwant exit 1 and a refusal", code, out)
	}
	// Work stays in shards 4 and 5 while FCM is paused: a worker that reads only 4 shards must
	// refuse to start, naming them.
	paused := f.countLog("provider paused by an operator")
	if err := f.insp.PauseProvider(ctx, inspect.Pause{Provider: "fcm", Reason: "reshard test", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	f.waitLog("provider paused by an operator", paused+len(ws), 10*time.Second)
	f.waitLeftLanes(prefix, []int{4, 5})
	ids = append(ids, p6.Stop(t, false)...)
	code, out := f.run("run", append(append([]string{"--shards", "4"}, f.runArgs...), "--startup-timeout", "5s")...)
	if code != 1 || !strings.Contains(out, "has jobs in shards this process does not read (it reads 0 to 3): shard 4 (") ||
		!strings.Contains(out, "run the workers with --reshard-from 6") {
		t.Errorf("a worker without --reshard-from while shards 4 and 5 hold jobs: exit %d\n%s\nwant exit 1 and a refusal naming shard 4", code, out)
	}
	if _, err := f.insp.ResumeProvider(ctx, "fcm"); err != nil {
		t.Fatal(err)
	}
	f.waitDrained(prefix, 4, 6)
	roll(ws, "--shards", "4")
	ids = append(ids, p4.Stop(t, false)...)

	st4, err := inspect.Open(url, stream.OpenOptions{Options: stream.Options{Prefix: prefix, Shards: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer st4.Close()
	rep := f.waitSettledOn(st4, ids, time.Minute)
	if rep.ExactlyOne != len(ids) {
		t.Fatalf("audit: %d of %d with exactly one terminal record; more than one: %v", rep.ExactlyOne, len(ids), rep.Duplicated)
	}
	f.auditCLI(ids, "--shards", "4")
	acc := accepted(f.requests())
	var wrong []string
	for _, id := range ids {
		if acc[id] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s: %d", id, acc[id]))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("jobs not accepted exactly once: %s", strings.Join(wrong, ", "))
	}
	inOld := 0
	for _, id := range ids {
		if strings.HasPrefix(id, "six-") && stream.ShardOf(id, 6) >= 4 {
			inOld++
		}
	}
	t.Logf("%d jobs over 3 -> 6 -> 4 shards, %d of them in shards 4 and 5 of the 6", len(ids), inOld)
	if inOld == 0 {
		t.Error("no job went to the shards the shrink left; the test proves nothing about them")
	}
	f.checkLogs()
}

// stop sends SIGTERM to w and requires a clean exit.
func (f *fleet) stop(w *worker) {
	f.t.Helper()
	err := w.Stop(30 * time.Second)
	f.mu.Lock()
	f.workers = slices.DeleteFunc(f.workers, func(x *worker) bool { return x == w })
	f.mu.Unlock()
	if errors.Is(err, workerproc.ErrNotStopped) {
		f.t.Fatalf("worker %s did not stop within 30s of SIGTERM", w.Log())
	}
	if err != nil {
		f.t.Errorf("worker exit after SIGTERM: %v (log %s)", err, w.Log())
	}
}

// requireShards fails unless the prefix's recorded shard count is n.
func (f *fleet) requireShards(n int) {
	f.t.Helper()
	if got := f.rdb.Get(context.Background(), stream.ShardsKey(f.o.prefix)).Val(); got != fmt.Sprint(n) {
		f.t.Fatalf("recorded shard count %q, want %d", got, n)
	}
}

// waitDelivered waits until pushsim has accepted at least n pushes.
func (f *fleet) waitDelivered(n int) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for f.sim.Stats().Codes[pushsim.FCM]["ACCEPTED"] < uint64(n) {
		if time.Now().After(deadline) {
			f.t.Fatalf("pushsim accepted %d pushes in 30s, want %d", f.sim.Stats().Codes[pushsim.FCM]["ACCEPTED"], n)
		}
		time.Sleep(20 * time.Millisecond) // polling pushsim for a state
	}
}

// waitLeftLanes waits until the FCM lane of each of shards holds an entry no consumer has read.
func (f *fleet) waitLeftLanes(prefix string, shards []int) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	unread := func(s int) int64 {
		stats, err := f.store.QueueStats(context.Background(), s, []string{"fcm"}, time.Now())
		if err != nil {
			f.t.Fatal(err)
		}
		for _, q := range stats {
			if q.Stream == "lane:fcm" {
				return q.Entries - q.Pending
			}
		}
		return 0
	}
	for _, s := range shards {
		for unread(s) == 0 {
			if time.Now().After(deadline) {
				f.t.Fatalf("the FCM lane of shard %d is still empty after 30s", s)
			}
			time.Sleep(20 * time.Millisecond) // polling Redis for a state
		}
	}
}

// waitDrained waits until shards from to to-1 hold nothing: intake, lanes and delayed empty.
func (f *fleet) waitDrained(prefix string, from, to int) {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for s := from; s < to; s++ {
		k := stream.KeysFor(prefix, s)
		for {
			c := f.rdb
			n := c.XLen(context.Background(), k.Intake).Val() + c.XLen(context.Background(), k.Lane("fcm")).Val() +
				c.ZCard(context.Background(), k.Delayed).Val()
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				f.t.Fatalf("shard %d still holds %d entries after a minute", s, n)
			}
			time.Sleep(50 * time.Millisecond) // polling Redis for a state
		}
	}
}
