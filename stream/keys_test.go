package stream

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKeysLayout(t *testing.T) {
	k := KeysFor("", 3)
	want := Keys{
		Base: "wp:{3}:", Shard: 3, Intake: "wp:{3}:in", BulkIntake: "wp:{3}:in:bulk", Delayed: "wp:{3}:delayed",
		DelayedData: "wp:{3}:delayed:data", DelayedCount: "wp:{3}:delayed:count", Scheduled: "wp:{3}:delayed:scheduled", Results: "wp:{3}:results", Gone: "wp:{3}:gone",
		Dead: "wp:{3}:dead", Rcpt: "wp:{3}:rcpt", Jobs: "wp:{3}:jobs", Probe: "wp:{3}:probe", Window: "wp:{3}:window",
		LanePrefix: "wp:{3}:lane:",
	}
	if d := cmp.Diff(want, k); d != "" {
		t.Errorf("KeysFor (-want +got):\n%s", d)
	}
	if got := k.Lane("fcm"); got != "wp:{3}:lane:fcm" {
		t.Errorf("Lane = %q", got)
	}
	gm := k.GoneMark(testEndpoint)
	if len(gm) != len("wp:{3}:gonemark:")+32 || gm[:16] != "wp:{3}:gonemark:" {
		t.Errorf("GoneMark = %q, want prefix and 32 hex digits", gm)
	}
	if gm != k.GoneMark(testEndpoint) || gm == k.GoneMark(testEndpoint+"x") {
		t.Error("GoneMark must be a function of the endpoint")
	}
}

// TestShardOfStable pins ShardOf: producers in other languages implement the same CRC-32
// (IEEE) modulo, and a change here would send jobs to shards no worker reads the same way.
func TestShardOfStable(t *testing.T) {
	for _, c := range []struct {
		id     string
		shards int
		want   int
	}{
		{"job-1", 1, 0},
		{"job-1", 0, 0},
		{"job-1", 16, 0x4c423a3f % 16},        // crc32("job-1") = 0x4c423a3f (python3 zlib.crc32 agrees)
		{"123456789", 7, int(0xCBF43926 % 7)}, // the CRC-32 check value
		{"", 4, 0},
	} {
		if got := ShardOf(c.id, c.shards); got != c.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", c.id, c.shards, got, c.want)
		}
	}
}
