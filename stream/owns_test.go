package stream

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/job"
)

func TestOwns(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{}, "fcm")
	lane := w1.Keys(0).Lane("fcm")
	cases := []struct {
		name string
		// entry returns the entry to ask about, in the state the case names.
		entry func(t *testing.T, id string) Entry
		want  bool
	}{
		{"read by this consumer", func(t *testing.T, id string) Entry {
			return env.laneEntry(t, w1, "fcm", id)
		}, true},
		{"read by another consumer", func(t *testing.T, id string) Entry {
			return env.laneEntry(t, w2, "fcm", id)
		}, false},
		{"handed back by another consumer", func(t *testing.T, id string) Entry {
			e := env.laneEntry(t, w1, "fcm", id)
			env.age(t, lane, "w1", e.ID, 10*time.Minute, 1)
			if got := env.takeOver(t, w2, lane, time.Minute, 0, "w2"); len(got) != 1 {
				t.Fatalf("w2 took over %d entries, want 1", len(got))
			}
			return e
		}, false},
		{"finished", func(t *testing.T, id string) Entry {
			e := env.laneEntry(t, w1, "fcm", id)
			if ok, err := w1.Finish(env.ctx, e, Result{ID: id, Code: "INVALID_REQUEST", At: t0}); !ok || err != nil {
				t.Fatalf("Finish = %v, %v", ok, err)
			}
			return e
		}, false},
		{"never read", func(t *testing.T, id string) Entry {
			id, err := env.c.XAdd(env.ctx, redisXAdd(lane, validJob(id))).Result()
			if err != nil {
				t.Fatal(err)
			}
			return Entry{Stream: lane, ID: id}
		}, false},
		{"no such stream", func(t *testing.T, id string) Entry {
			return Entry{Stream: w1.Keys(0).Lane("nobody"), ID: "1-1"}
		}, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := c.entry(t, "own-"+itoa(int64(i)))
			got, err := w1.Owns(env.ctx, e)
			if err != nil || got != c.want {
				t.Errorf("Owns = %v, %v; want %v, nil", got, err, c.want)
			}
		})
	}
}

func TestLanesListsLanesOutsideTheRegistry(t *testing.T) {
	env := newEnv(t)
	s := env.store(t, "w1", Options{Shards: 2}, "fcm", "apple")
	// A provider since removed from the registry left entries on shard 1 only, one of them
	// read by a consumer that is gone.
	old := s.Keys(1).Lane("retired")
	for _, id := range []string{"a", "b", "c"} {
		if err := env.c.XAdd(env.ctx, redisXAdd(old, validJob(id))).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.c.XGroupCreate(env.ctx, old, Group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	gone := New(env.c, env.c, Options{Shards: 2, Consumer: "gone"})
	if got, err := gone.readLane(env.ctx, 1, "retired", job.ClassTransactional, 1, 0); err != nil || len(got) != 1 {
		t.Fatalf("ReadLane: %d entries, %v", len(got), err)
	}

	// The orphan lane holds the entries written above, the one read pending; an empty lane
	// holds none; a provider with no lane on a shard is not listed there.
	for shard, want := range [][]LaneSize{
		{{Provider: "apple"}, {Provider: "fcm"}},
		{{Provider: "apple"}, {Provider: "fcm"}, {Provider: "retired", Length: 3, Pending: 1}},
	} {
		got, err := s.Lanes(env.ctx, shard)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("Lanes(%d) (-want +got):\n%s", shard, d)
		}
	}
	got, err := s.Lanes(env.ctx, 1, "apple", "fcm")
	if d := cmp.Diff([]LaneSize{{Provider: "retired", Length: 3, Pending: 1}}, got); err != nil || d != "" {
		t.Errorf("Lanes(1) skipping the registry's providers: %v (-want +got):\n%s", err, d)
	}
	for _, c := range []struct {
		name            string
		shard           int
		provider        string
		length, pending int64
	}{
		{"orphan lane", 1, "retired", 3, 1},
		{"empty lane", 0, "fcm", 0, 0},
		{"no lane at all", 0, "retired", 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, p, err := s.providerLaneLength(env.ctx, c.shard, c.provider)
			if err != nil || n != c.length || p != c.pending {
				t.Errorf("providerLaneLength = %d, %d, %v; want %d, %d, nil", n, p, err, c.length, c.pending)
			}
		})
	}
}
