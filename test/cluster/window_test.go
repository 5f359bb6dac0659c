package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// testWindowOnCluster: the duplicate-suppression window reads Redis's clock (TIME) inside its
// scripts on every master of a cluster. On each shard a job accepted by a replica whose clock
// runs 70 minutes behind is found by another replica's WasSent, and a copy of it enqueued again
// is acknowledged unsent: by the slow replica's clock the acceptance was over an hour ago.
func testWindowOnCluster(t *testing.T, url string) {
	ctx := context.Background()
	open := func(consumer string, skew time.Duration) *stream.Store {
		t.Helper()
		st, err := stream.Open(url, stream.OpenOptions{Options: stream.Options{Prefix: "win", Shards: clusterShards, Consumer: consumer,
			Now: func() time.Time { return time.Now().Add(skew) }}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if err := st.Setup(ctx, []string{"fcm"}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	late, right := open("late", -70*time.Minute), open("right", 0)
	p := right.Producer()
	sub := job.Subscription{Endpoint: "https://fcm.googleapis.com/fcm/send/window", Keys: job.Keys{P256dh: "p", Auth: "a"}}
	route := func(st *stream.Store, shard int, raw []byte, id string) stream.LaneVerdict {
		t.Helper()
		if _, err := p.Enqueue(ctx, raw); err != nil {
			t.Fatal(err)
		}
		in, _, err := st.ReadIntake(ctx, shard, job.ClassTransactional, 1, time.Second)
		if err != nil || len(in) != 1 {
			t.Fatalf("shard %d: ReadIntake = %d entries, %v; want 1", shard, len(in), err)
		}
		v, err := st.ToLane(ctx, in[0], "fcm", job.ClassTransactional, id, in[0].Fields["job"], time.Now().UnixMilli())
		if err != nil {
			t.Fatalf("shard %d: ToLane: %v", shard, err)
		}
		return v
	}
	for shard := range clusterShards {
		id := ""
		for i := 0; id == ""; i++ {
			if c := fmt.Sprintf("win-%d", i); stream.ShardOf(c, clusterShards) == shard {
				id = c
			}
		}
		raw := jobLine(t, id, sub, nil)
		if v := route(late, shard, raw, id); v != stream.Moved {
			t.Fatalf("shard %d: the first copy: ToLane = %v, want Moved", shard, v)
		}
		lane, _, err := late.ReadLanes(ctx, shard, "fcm", stream.LaneRead{Total: 1})
		if err != nil || len(lane) != 1 {
			t.Fatalf("shard %d: ReadLane = %d entries, %v; want 1", shard, len(lane), err)
		}
		r := stream.Result{ID: id, Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: time.Now()}
		if ok, err := late.Finish(ctx, lane[0], r); err != nil || !ok {
			t.Fatalf("shard %d: Finish = %v, %v", shard, ok, err)
		}
		if sent, err := right.WasSent(ctx, shard, id); err != nil || !sent {
			t.Errorf("shard %d: WasSent of the job the slow replica just accepted = %v, %v; want true", shard, sent, err)
		}
		if v := route(right, shard, raw, id); v != stream.Copy {
			t.Errorf("shard %d: a copy enqueued after the acceptance: ToLane = %v, want Copy", shard, v)
		}
	}
}
