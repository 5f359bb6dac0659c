package stream

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
)

// TestTrimRecords: the record streams are kept near their bounds; one that an upstream reads
// with a consumer group loses only entries every group has read and acknowledged, however far
// over its bound it is; 0 keeps everything.
func TestTrimRecords(t *testing.T) {
	// Small stream nodes, so that an approximate trim (whole nodes only) is close to exact.
	srv := redistest.Start(t, redistest.WithConfig("stream-node-max-entries", "5"))
	e := &env{srv: srv, c: srv.Client(t), ctx: t.Context()}
	s := e.store(t, "w1", Options{ResultsMaxLen: 10, GoneMaxLen: 10, DeadMaxLen: 0}, "fcm")
	k := s.Keys(0)
	fill := func(key string, n int) []string {
		var ids []string
		for i := range n {
			id, err := e.c.XAdd(e.ctx, &redis.XAddArgs{Stream: key, Values: []any{"id", fmt.Sprint(i)}}).Result()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	fill(k.Results, 50)
	gone := fill(k.Gone, 50)
	fill(k.Dead, 50)
	// An upstream reads the gone stream with a group: 20 entries delivered, the first 10
	// acknowledged.
	e.upstreamReads(t, k.Gone, 20, gone[:10])
	over, err := s.TrimRecords(e.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]int64{"results": 40, "gone": 40, "dead": 0}, over); d != "" {
		t.Errorf("over the bound (-want +got):\n%s", d)
	}
	if n := e.xlen(t, k.Results); n < 10 || n > 15 {
		t.Errorf("results holds %d entries, want about 10", n)
	}
	if n := e.xlen(t, k.Dead); n != 50 {
		t.Errorf("dead (no bound) holds %d entries, want 50", n)
	}
	// Only the 10 acknowledged entries could go; the pending and the unread ones stay.
	left := e.entries(t, k.Gone)
	if len(left) != 40 || left[0].ID != gone[10] {
		t.Errorf("gone holds %d entries from %s, want 40 from %s (the first pending one)", len(left), left[0].ID, gone[10])
	}
	// Once the group has read and acknowledged everything, the bound applies.
	if err := e.c.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: "upstream", Consumer: "u1", Streams: []string{k.Gone, ">"}, Count: 100}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.XAck(e.ctx, k.Gone, "upstream", gone[10:]...).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrimRecords(e.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n := e.xlen(t, k.Gone); n < 10 || n > 15 {
		t.Errorf("gone holds %d entries once all were read, want about 10", n)
	}
	// Zero is no bound, and a negative bound is taken as zero.
	d := e.store(t, "w2", Options{Prefix: "other", GoneMaxLen: -1}, "fcm")
	if got := d.bounds; got != (recordBounds{}) {
		t.Errorf("bounds %+v, want none", got)
	}
}

// TestTrimRecordsSparesWhatARewoundGroupWillRead: a group set back to read again (XGROUP
// SETID below its oldest pending entry) keeps every entry after the id it was set to.
func TestTrimRecordsSparesWhatARewoundGroupWillRead(t *testing.T) {
	srv := redistest.Start(t, redistest.WithConfig("stream-node-max-entries", "5"))
	e := &env{srv: srv, c: srv.Client(t), ctx: t.Context()}
	s := e.store(t, "w1", Options{GoneMaxLen: 10}, "fcm")
	k := s.Keys(0)
	var gone []string
	for i := range 50 {
		id, err := e.c.XAdd(e.ctx, &redis.XAddArgs{Stream: k.Gone, Values: []any{"id", fmt.Sprint(i)}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		gone = append(gone, id)
	}
	e.upstreamReads(t, k.Gone, 20, gone[:10])
	// Read again from the sixth entry: it and those after it are the group's to read.
	if err := e.c.XGroupSetID(e.ctx, k.Gone, "upstream", gone[4]).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrimRecords(e.ctx, 0); err != nil {
		t.Fatal(err)
	}
	left := e.entries(t, k.Gone)
	if len(left) < 45 || compareIDs(left[0].ID, gone[5]) > 0 {
		t.Errorf("gone holds %d entries from %s; want every one from %s, which the group will read again", len(left), left[0].ID, gone[5])
	}
}

// upstreamReads has an upstream's group "upstream" read the first n entries of stream and
// acknowledge those of acked.
func (e *env) upstreamReads(t *testing.T, stream string, n int64, acked []string) {
	t.Helper()
	if err := e.c.XGroupCreate(e.ctx, stream, "upstream", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: "upstream", Consumer: "u1", Streams: []string{stream, ">"}, Count: n}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.XAck(e.ctx, stream, "upstream", acked...).Err(); err != nil {
		t.Fatal(err)
	}
}
