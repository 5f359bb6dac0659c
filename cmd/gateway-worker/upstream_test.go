package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestStatusShowsUpstreamGroups: status lists every consumer group an upstream reads the
// record streams with, with its lag and pending count, also when Redis cannot count the lag
// (an entry deleted past the group: XINFO GROUPS' lag is nil), where it says the lag is an
// estimate; and a group behind a trim has the stream's length as its lag, exactly.
func TestStatusShowsUpstreamGroups(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	c := srv.Client(t)
	st := stream.New(c, nil, stream.Options{Consumer: "worker-a"})
	if err := st.Setup(ctx, []string{"fcm"}); err != nil {
		t.Fatal(err)
	}
	k := st.Keys(0)
	var ids []string
	for range 10 {
		id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: k.Results, Values: []any{"id", "x"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// "pruner" read 2 and acknowledged 1; then an entry past it was deleted: Redis gives no lag.
	if err := c.XGroupCreate(ctx, k.Results, "pruner", "0").Err(); err != nil {
		t.Fatal(err)
	}
	read, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "pruner", Consumer: "p1", Streams: []string{k.Results, ">"}, Count: 2}).Result()
	if err != nil || len(read[0].Messages) != 2 {
		t.Fatalf("read: %v %v", read, err)
	}
	c.XAck(ctx, k.Results, "pruner", ids[0])
	c.XDel(ctx, k.Results, ids[5])
	// "archiver" never read; the gone stream was trimmed past it.
	for range 6 {
		c.XAdd(ctx, &redis.XAddArgs{Stream: k.Gone, Values: []any{"endpoint", "x"}})
	}
	if err := c.XGroupCreate(ctx, k.Gone, "archiver", "0").Err(); err != nil {
		t.Fatal(err)
	}
	c.XTrimMaxLen(ctx, k.Gone, 4)

	code, stdout, stderr := run(t, "status", "--redis", srv.URL(), "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, stderr)
	}
	var rep struct {
		Groups []stream.UpstreamGroup `json:"upstream_groups"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	want := []stream.UpstreamGroup{
		{Shard: 0, Stream: "results", Key: k.Results, Group: "pruner", Lag: 8, Estimated: true, Pending: 1},
		{Shard: 0, Stream: "gone", Key: k.Gone, Group: "archiver", Lag: 4, Pending: 0},
	}
	if len(rep.Groups) != len(want) {
		t.Fatalf("status --json upstream groups %+v; want %+v", rep.Groups, want)
	}
	for i := range want {
		if rep.Groups[i] != want[i] {
			t.Errorf("upstream group %d: %+v; want %+v", i, rep.Groups[i], want[i])
		}
	}
	code, stdout, stderr = run(t, "status", "--redis", srv.URL())
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	for _, re := range []string{`(?m)^0\s+results\s+pruner\s+~8\s+1\s*$`, `(?m)^0\s+gone\s+archiver\s+4\s+0\s*$`, `~: estimated`} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("status output lacks %s:\n%s", re, stdout)
		}
	}
	if strings.Contains(stdout, "AOF is off") {
		t.Errorf("status warns of AOF on a Redis with AOF on:\n%s", stdout)
	}
}

// TestStatusWarnsOfRedisSettings: status says when Redis has AOF off or no maxmemory.
func TestStatusWarnsOfRedisSettings(t *testing.T) {
	srv := redistest.Start(t, redistest.WithConfig("appendonly", "no"), redistest.WithConfig("maxmemory", "0"))
	code, stdout, stderr := run(t, "status", "--redis", srv.URL())
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"AOF is off", "no maxmemory"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status with appendonly no and maxmemory 0 lacks %q:\n%s", want, stdout)
		}
	}
}
