package redistest

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestSentinel(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	s := StartSentinel(rec, SentinelMasterName("orders"), SentinelNodeConfig("maxmemory", "64mb"), SentinelMonitorConfig("parallel-syncs", "2"))
	ctx := context.Background()

	if want := "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/orders"; s.URL() != want || len(s.SentinelAddrs()) != 3 {
		t.Errorf("URL = %q, want %q with 3 Sentinels", s.URL(), want)
	}
	if s.MasterName() != "orders" {
		t.Errorf("MasterName = %q", s.MasterName())
	}
	master, replica := s.Master(), s.Replica()
	if master == replica || replica == "" {
		t.Fatalf("Master = %q, Replica = %q", master, replica)
	}
	for addr, want := range map[string]role{master: {name: "master"}, replica: {name: "slave", master: master, linkUp: true}} {
		if r, err := queryRole(ctx, s.admin[addr]); err != nil || r != want {
			t.Errorf("%s is %v (%v), want %v", addr, r, err, want)
		}
		cfg := s.Node(addr).Client(t).ConfigGet(ctx, "*").Val()
		for k, want := range map[string]string{"appendonly": "yes", "appendfsync": "always", "maxmemory": "67108864"} {
			if cfg[k] != want {
				t.Errorf("%s: config %s = %q, want %q", addr, k, cfg[k], want)
			}
		}
	}
	for _, a := range s.SentinelAddrs() {
		m := s.watch[a].Master(ctx, "orders").Val()
		for k, want := range map[string]string{"quorum": "2", "down-after-milliseconds": "1000", "failover-timeout": "5000", "parallel-syncs": "2"} {
			if m[k] != want {
				t.Errorf("Sentinel %s: %s = %q, want %q", a, k, m[k], want)
			}
		}
	}

	if msg := rec.expectFatal(func() { s.Node("127.0.0.1:1") }); !strings.Contains(msg, "no data node at 127.0.0.1:1") {
		t.Errorf("Node of an unknown address: %s", msg)
	}
	if d := s.describe(); !strings.Contains(d, "replica "+replica+" flags=slave master-link-status=ok") || !strings.Contains(d, "redis.log") {
		t.Errorf("describe lacks the replica or the logs:\n%s", d)
	}

	// A write the replica acknowledged survives SIGKILL of the master.
	c := s.Client(t)
	pipe := c.Pipeline()
	pipe.Set(ctx, "k", "v1", 0)
	acked := pipe.Do(ctx, "WAIT", 1, 5000)
	if _, err := pipe.Exec(ctx); err != nil || acked.Val() != int64(1) {
		t.Fatalf("SET + WAIT 1 through the FailoverClient: %v replicas, %v", acked.Val(), err)
	}
	old := s.KillMaster()
	if old != master {
		t.Errorf("KillMaster = %s, want %s", old, master)
	}
	start := time.Now()
	promoted := s.WaitFailover(old)
	t.Logf("%s took over from %s in %v", promoted, old, time.Since(start).Round(time.Millisecond))
	if promoted != replica || s.Master() != promoted || s.Replica() != old {
		t.Errorf("WaitFailover = %s, Master = %s, Replica = %s; want master %s and replica %s", promoted, s.Master(), s.Replica(), replica, old)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v1" {
		t.Fatalf("GET through the FailoverClient after failover = %q, %v; want v1", got, err)
	}
	if err := c.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatalf("SET after failover: %v", err)
	}

	// The old master rejoins as a replica of the new one and receives its writes.
	s.Restart(old)
	if r, err := queryRole(ctx, s.admin[old]); err != nil || r != (role{name: "slave", master: promoted, linkUp: true}) {
		t.Errorf("after Restart %s is %v (%v), want a linked replica of %s", old, r, err, promoted)
	}
	pipe = c.Pipeline()
	pipe.Set(ctx, "k", "v3", 0)
	acked = pipe.Do(ctx, "WAIT", 1, 5000)
	if _, err := pipe.Exec(ctx); err != nil || acked.Val() != int64(1) {
		t.Fatalf("SET + WAIT 1 after Restart: %v replicas, %v", acked.Val(), err)
	}
	if got, err := s.Node(old).Client(t).Get(ctx, "k").Result(); err != nil || got != "v3" {
		t.Errorf("GET on the rejoined %s = %q, %v; want v3", old, got, err)
	}
}
