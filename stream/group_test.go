package stream

import "testing"

// TestGroupForReadsTheShardTag: each shard's commands share their own pipeline, whatever the
// rest of the key holds.
func TestGroupForReadsTheShardTag(t *testing.T) {
	s := New(nil, nil, Options{Prefix: "wp", Shards: 3})
	for key, want := range map[string]int{
		KeysFor("wp", 2).Intake:          2,
		KeysFor("wp", 1).Base + "a:{0}b": 1, // a job id in the key may hold braces
		KeysFor("wp", 0).Lane("fcm"):     0,
		"unrelated":                      0,
		"wp:{7}:in":                      0, // no such shard
	} {
		if got := s.groupFor(key); got != s.groups[want] {
			t.Errorf("groupFor(%q) is not shard %d's", key, want)
		}
	}
}
