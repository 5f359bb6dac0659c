package stream

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// TestReshardSwitchesTheRecordedCount: a Store with ReshardFrom takes the old count as
// recorded and records its own in its place, or records its own on a new prefix; it refuses
// any third count, changing nothing. Plain Stores and producers then need the new count.
func TestReshardSwitchesTheRecordedCount(t *testing.T) {
	env := newEnv(t)
	if err := env.store(t, "w1", Options{Shards: 3}).checkShardCount(env.ctx); err != nil {
		t.Fatal(err)
	}
	grow := New(env.c, env.c, Options{Shards: 6, ReshardFrom: 3, Consumer: "w2"})
	if got := grow.Shards(); got != 6 {
		t.Errorf("Shards() = %d while growing from 3 to 6; want 6", got)
	}
	for range 2 { // once to switch, once more to find it switched
		if err := grow.checkShardCount(env.ctx); err != nil {
			t.Fatalf("CheckShards from 3 to 6 with 3 recorded: %v", err)
		}
		if got := env.c.Get(env.ctx, ShardsKey("")).Val(); got != "6" {
			t.Fatalf("recorded %q, want 6", got)
		}
	}
	if err := New(env.c, env.c, Options{Shards: 3}).checkShardCount(env.ctx); !errors.Is(err, ErrShardCount) {
		t.Errorf("a Store of the old count after the switch: %v; want ErrShardCount", err)
	}
	if _, err := NewProducer(env.c, "", 3).Enqueue(env.ctx, []byte(validJob("late"))); !errors.Is(err, ErrShardCount) {
		t.Errorf("a producer of the old count started after the switch: %v; want ErrShardCount", err)
	}
	err := New(env.c, env.c, Options{Shards: 2, ReshardFrom: 4}).checkShardCount(env.ctx)
	want := `stream: shard count mismatch: prefix "wp" is used with 6 shards (recorded in wp:shards); this process changes the count from 4 to 2, so it refuses any other`
	if !errors.Is(err, ErrShardCount) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("from 4 to 2 with 6 recorded: %v\nwant %q...", err, want)
	}
	if got := env.c.Get(env.ctx, ShardsKey("")).Val(); got != "6" {
		t.Errorf("a refused switch changed the record to %q", got)
	}
	shrink := New(env.c, env.c, Options{Shards: 2, ReshardFrom: 6})
	if err := shrink.checkShardCount(env.ctx); err != nil {
		t.Fatal(err)
	}
	if got := shrink.Shards(); got != 6 {
		t.Errorf("Shards() = %d while shrinking from 6 to 2; want 6 (the old shards are read)", got)
	}
	// Its producer writes with the new count: every job lands in shard 0 or 1.
	for i := range 20 {
		id := fmt.Sprintf("s-%d", i)
		if _, err := shrink.Producer().Enqueue(env.ctx, []byte(validJob(id))); err != nil {
			t.Fatal(err)
		}
	}
	for s := 2; s < 6; s++ {
		if n := env.c.XLen(env.ctx, KeysFor("", s).Intake).Val(); n != 0 {
			t.Errorf("shard %d got %d entries from a producer of 2 shards", s, n)
		}
	}
	if fresh := New(env.c, env.c, Options{Prefix: "new", Shards: 4, ReshardFrom: 2}); fresh.checkShardCount(env.ctx) != nil ||
		env.c.Get(env.ctx, ShardsKey("new")).Val() != "4" {
		t.Error("on a prefix with no count recorded, a resharding Store should record its own")
	}
}

// TestLeftoverShards: a worker's Setup refuses, naming the shards and what they hold, while a
// shard beyond those it reads still holds jobs; once they are drained (their keys may stay) it
// starts (and an audit reads the records of such shards: stream/inspect's
// TestAuditReadsLeftShards).
func TestLeftoverShards(t *testing.T) {
	env := newEnv(t)
	old := env.store(t, "old", Options{Shards: 2, ReshardFrom: 4}, "fcm") // reads 4, records 2
	// A job in shard 3's intake and one in shard 2's lane, as a producer of 4 shards left them.
	for _, sh := range []int{3, 2} {
		if err := env.c.XAdd(env.ctx, &redis.XAddArgs{Stream: KeysFor("", sh).Intake, Values: []any{"job", validJob(fmt.Sprintf("left-%d", sh))}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	es, _, err := old.ReadIntake(env.ctx, 2, job.ClassTransactional, 10, 0)
	if err != nil || len(es) != 1 {
		t.Fatalf("ReadIntake shard 2 = %v, %v", es, err)
	}
	if v, err := old.ToLane(env.ctx, es[0], "fcm", job.ClassTransactional, "left-2", es[0].Fields["job"], 1); err != nil || v != Moved {
		t.Fatalf("ToLane = %v, %v", v, err)
	}

	err = New(env.c, env.c, Options{Shards: 2, Consumer: "new"}).Setup(env.ctx, []string{"fcm"})
	want := `stream: shard count mismatch: prefix "wp" has jobs in shards this process does not read (it reads 0 to 1): ` +
		`shard 2 (0 intake entries, 1 lane entries, 0 retries waiting), shard 3 (1 intake entries, 0 lane entries, 0 retries waiting); ` +
		`a larger shard count left them, so run the workers with --reshard-from 4`
	if !errors.Is(err, ErrShardCount) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Setup with jobs left in shards 2 and 3:\n got %v\nwant %s...", err, want)
	}

	// The old Store finishes both; the keys stay, empty.
	es, _, err = old.ReadIntake(env.ctx, 3, job.ClassTransactional, 10, 0)
	if err != nil || len(es) != 1 {
		t.Fatalf("ReadIntake shard 3 = %v, %v", es, err)
	}
	if v, err := old.ToLane(env.ctx, es[0], "fcm", job.ClassTransactional, "left-3", es[0].Fields["job"], 1); err != nil || v != Moved {
		t.Fatalf("ToLane = %v, %v", v, err)
	}
	for _, sh := range []int{2, 3} {
		le, err := old.readLane(env.ctx, sh, "fcm", job.ClassTransactional, 10, 0)
		if err != nil || len(le) != 1 {
			t.Fatalf("ReadLane shard %d = %v, %v", sh, le, err)
		}
		id := fmt.Sprintf("left-%d", sh)
		if ok, err := old.Finish(env.ctx, le[0], Result{ID: id, Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true}); err != nil || !ok {
			t.Fatalf("Finish = %v, %v", ok, err)
		}
	}
	fresh := New(env.c, env.c, Options{Shards: 2, Consumer: "new"})
	if err := fresh.Setup(env.ctx, []string{"fcm"}); err != nil {
		t.Fatalf("Setup once shards 2 and 3 are empty: %v", err)
	}
}

// TestLeftoverCampaignRecipients: a worker that does not read a shard whose campaign lists
// still hold recipients refuses to start, naming how many wait.
func TestLeftoverCampaignRecipients(t *testing.T) {
	env := newEnv(t)
	env.store(t, "old", Options{Shards: 2, ReshardFrom: 3}, "fcm")
	k := campaignKeys("", 2, "left") // as campaign_add.lua leaves them
	if err := env.c.RPush(env.ctx, k.ListOf("fcm"), RecipientElement(1, "", testSubJSON()), RecipientElement(2, "", testSubJSON())).Err(); err != nil {
		t.Fatal(err)
	}
	if err := env.c.ZAdd(env.ctx, k.All, redis.Z{Score: 1, Member: "left"}).Err(); err != nil {
		t.Fatal(err)
	}
	err := New(env.c, env.c, Options{Shards: 2, Consumer: "new"}).Setup(env.ctx, []string{"fcm"})
	if !errors.Is(err, ErrShardCount) || !strings.Contains(err.Error(), "shard 2 (0 intake entries, 0 lane entries, 0 retries waiting, 2 campaign recipients waiting)") {
		t.Fatalf("Setup with campaign recipients left in shard 2: %v", err)
	}
}
