package cluster_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
)

// Where the shards of a prefix land on a Redis Cluster whose slots redis-cli split evenly: the
// table of docs/scaling.md, computed here and checked against real Redis in
// checkDefaultSplit.

// slotOf is the Redis Cluster hash slot of shard's keys: CRC16 (XMODEM) of the shard number,
// the text of the keys' hash tag, modulo 16384.
func slotOf(shard int) int {
	var crc uint16
	for _, b := range []byte(strconv.Itoa(shard)) {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// defaultSplit is the first slot of each of masters, in order, as `redis-cli --cluster create`
// assigns them: equal ranges, each ending at round(cursor + 16384/masters - 1).
func defaultSplit(masters int) []int {
	per := 16384 / float64(masters)
	firsts := make([]int, masters)
	first, cursor := 0, 0.0
	for i := range masters {
		firsts[i] = first
		last := int(math.Round(cursor + per - 1))
		if i == masters-1 {
			last = 16383
		}
		first, cursor = max(last+1, first+1), cursor+per
	}
	return firsts
}

// shardsPerMaster counts the shards 0 to shards-1 on each master of the default split.
func shardsPerMaster(masters, shards int) []int {
	firsts := defaultSplit(masters)
	out := make([]int, masters)
	for s := range shards {
		slot := slotOf(s)
		i := masters - 1
		for i > 0 && slot < firsts[i] {
			i--
		}
		out[i]++
	}
	return out
}

// spreadRow is one line of the docs table: masters, shards, the most and fewest shards on one
// master, and the share of the masters' capacity the busiest one leaves usable.
func spreadRow(masters, shards int) string {
	n := shardsPerMaster(masters, shards)
	hi, lo := n[0], n[0]
	for _, x := range n {
		hi, lo = max(hi, x), min(lo, x)
	}
	return fmt.Sprintf("| %d | %d | %d | %d | %.0f %% |", masters, shards, hi, lo, 100*float64(shards)/float64(masters)/float64(hi))
}

// TestShardSpreadTable: docs/scaling.md's table of shards per master holds what this file
// computes.
func TestShardSpreadTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/scaling.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []int{3, 6, 12} {
		for _, k := range []int{1, 2, 4, 8, 16} {
			if row := spreadRow(m, m*k); !strings.Contains(string(doc), row+"\n") {
				t.Errorf("docs/scaling.md lacks the row %q", row)
			}
		}
	}
}

// checkDefaultSplit fails unless the cluster (freshly made by redis-cli) has its slots where
// defaultSplit says and the shards' keys in the slots slotOf computes.
func checkDefaultSplit(t *testing.T, c *redistest.Cluster) {
	t.Helper()
	ctx := context.Background()
	cc := c.Client(t)
	for s := range 100 {
		got, err := cc.ClusterKeySlot(ctx, fmt.Sprintf("wp:{%d}:in", s)).Result()
		if err != nil || int(got) != slotOf(s) {
			t.Fatalf("CLUSTER KEYSLOT of shard %d = %d, %v; slotOf says %d", s, got, err, slotOf(s))
		}
	}
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var starts []int
	for _, sh := range shards {
		for _, r := range sh.Slots {
			starts = append(starts, int(r.Start))
		}
	}
	slices.Sort(starts)
	if want := defaultSplit(len(c.Masters())); !slices.Equal(starts, want) {
		t.Fatalf("the masters' slot ranges start at %v; defaultSplit(%d) says %v", starts, len(c.Masters()), want)
	}
}
