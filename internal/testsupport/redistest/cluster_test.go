package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

func TestCluster(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	c := StartCluster(rec, ClusterConfig("maxmemory", "64mb"))
	ctx := context.Background()

	addrs := c.Addrs()
	if len(addrs) != 6 {
		t.Fatalf("Addrs = %v, want 6 nodes", addrs)
	}
	if want := "redis+cluster://" + strings.Join(addrs, ","); c.URL() != want {
		t.Errorf("URL = %q, want %q", c.URL(), want)
	}
	masters := c.Masters()
	if len(masters) != 3 {
		t.Fatalf("Masters = %v, want 3", masters)
	}
	for _, a := range addrs {
		cfg := c.Node(a).Client(t).ConfigGet(ctx, "*").Val()
		for k, want := range map[string]string{"cluster-enabled": "yes", "cluster-node-timeout": "2000", "appendonly": "yes", "appendfsync": "always", "maxmemory": "67108864"} {
			if cfg[k] != want {
				t.Errorf("%s: config %s = %q, want %q", a, k, cfg[k], want)
			}
		}
	}
	cc := c.Client(t)

	t.Run("hash tags", func(t *testing.T) {
		// A shard for each master: the first shard numbers whose keys land there.
		shardOn := map[string]string{}
		for i := 0; len(shardOn) < len(masters) && i < 1000; i++ {
			shard := strconv.Itoa(i)
			if m := c.MasterFor("wp:{" + shard + "}:stream"); shardOn[m] == "" {
				shardOn[m] = shard
			}
		}
		if len(shardOn) != len(masters) {
			t.Fatalf("shards 0-999 land on %d masters (%v), want %d", len(shardOn), shardOn, len(masters))
		}
		for m, shard := range shardOn {
			direct := c.Node(m).Client(t)
			for _, k := range []string{"wp:{" + shard + "}:stream", "wp:{" + shard + "}:delayed", "wp:{" + shard + "}:dead"} {
				if got := c.MasterFor(k); got != m {
					t.Errorf("MasterFor(%q) = %s, want %s like the shard's other keys", k, got, m)
				}
				if err := cc.Set(ctx, k, m, 0).Err(); err != nil {
					t.Fatalf("SET %s through the cluster client: %v", k, err)
				}
				// A plain client on the node MasterFor names answers MOVED for a key it does not serve.
				if got, err := direct.Get(ctx, k).Result(); err != nil || got != m {
					t.Errorf("GET %s on %s = %q, %v; want it served there", k, m, got, err)
				}
			}
		}
	})

	t.Run("script on one tag", func(t *testing.T) {
		script := redis.NewScript(`redis.call('SET', KEYS[1], ARGV[1]) return redis.call('INCR', KEYS[2])`)
		keys := []string{"wp:{lua}:a", "wp:{lua}:b"}
		n, err := script.Run(ctx, cc, keys, "x").Int()
		if err != nil || n != 1 {
			t.Fatalf("script on %v = %d, %v; want 1, nil", keys, n, err)
		}
		if got := cc.Get(ctx, keys[0]).Val(); got != "x" {
			t.Errorf("GET %s = %q, want x", keys[0], got)
		}
	})

	t.Run("script across tags is CROSSSLOT", func(t *testing.T) {
		keys := []string{"wp:{1}:a", "wp:{2}:a"}
		if s1, s2 := cc.ClusterKeySlot(ctx, keys[0]).Val(), cc.ClusterKeySlot(ctx, keys[1]).Val(); s1 == s2 {
			t.Fatalf("%v share slot %d; the test needs two slots", keys, s1)
		}
		script := redis.NewScript(`redis.call('SET', KEYS[1], 'x') redis.call('SET', KEYS[2], 'x') return 1`)
		err := script.Run(ctx, cc, keys).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
			t.Fatalf("script on %v: err = %v, want CROSSSLOT", keys, err)
		}
		for _, k := range keys {
			if n := cc.Exists(ctx, k).Val(); n != 0 {
				t.Errorf("%s exists after the refused script", k)
			}
		}
	})

	t.Run("helpers fail with the cluster's state", func(t *testing.T) {
		replica := replicaOf(t, c, masters[0])
		msg := rec.expectFatal(func() { c.KillMaster(replica) })
		for _, want := range []string{"not a master serving slots", "cluster nodes:", "cluster_state:ok", "myself,", "redis.log"} {
			if !strings.Contains(msg, want) {
				t.Errorf("KillMaster(replica) failure lacks %q:\n%s", want, msg)
			}
		}
		for _, a := range addrs {
			if !strings.Contains(msg, a) {
				t.Errorf("KillMaster(replica) failure does not name node %s", a)
			}
		}
		if msg := rec.expectFatal(func() { c.WaitPromotion(masters[0]) }); !strings.Contains(msg, "was not a master serving slots when Kill stopped it") {
			t.Errorf("WaitPromotion of a running node: %s", msg)
		}
		if msg := rec.expectFatal(func() { c.Node("127.0.0.1:1") }); !strings.Contains(msg, "no cluster node at 127.0.0.1:1") {
			t.Errorf("Node of an unknown address: %s", msg)
		}
		if !c.Node(replica).running() {
			t.Error("a refused KillMaster killed the node")
		}
	})

	// Failover: a write its replica acknowledged survives SIGKILL of its master.
	key := "wp:{failover}:k"
	old := c.MasterFor(key)
	replica := replicaOf(t, c, old)
	pipe := c.Node(old).Client(t).Pipeline()
	pipe.Set(ctx, key, "v1", 0)
	acked := pipe.Do(ctx, "WAIT", 1, 5000)
	if _, err := pipe.Exec(ctx); err != nil || acked.Val() != int64(1) {
		t.Fatalf("SET + WAIT 1 on %s: %v replicas, %v", old, acked.Val(), err)
	}
	c.KillMaster(old)
	start := time.Now()
	promoted := c.WaitPromotion(old)
	t.Logf("%s took over from %s in %v", promoted, old, time.Since(start).Round(time.Millisecond))
	if promoted != replica {
		t.Errorf("WaitPromotion = %s, want %s, the replica of %s", promoted, replica, old)
	}
	if got := c.MasterFor(key); got != promoted {
		t.Errorf("MasterFor after failover = %s, want %s", got, promoted)
	}
	if got := c.Masters(); len(got) != 3 || slices.Contains(got, old) || !slices.Contains(got, promoted) {
		t.Errorf("Masters after failover = %v", got)
	}
	fresh := c.Client(t)
	if got, err := fresh.Get(ctx, key).Result(); err != nil || got != "v1" {
		t.Fatalf("GET after failover = %q, %v; want v1", got, err)
	}
	if err := fresh.Set(ctx, key, "v2", 0).Err(); err != nil {
		t.Fatalf("SET after failover: %v", err)
	}
	// A client that loaded the slot map before the kill keeps routing to the dead master until
	// it reloads; ReloadState starts that, in the background.
	cc.ReloadState(ctx)
	if r := poll(func() string {
		got, err := cc.Get(ctx, key).Result()
		if err != nil || got != "v2" {
			return fmt.Sprintf("GET = %q, %v", got, err)
		}
		return ""
	}); r != "" {
		t.Errorf("the client from before the failover, after ReloadState: %s", r)
	}

	// The old master rejoins as a replica of the node that took over, with its data.
	c.Restart(old)
	r, err := queryRole(ctx, c.admin[old])
	if err != nil || r != (role{name: "slave", master: promoted, linkUp: true}) {
		t.Errorf("after Restart %s is %v (%v), want a linked replica of %s", old, r, err, promoted)
	}
	conn := c.Node(old).Client(t).Conn()
	defer conn.Close()
	if err := conn.ReadOnly(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := conn.Get(ctx, key).Result(); err != nil || got != "v2" {
		t.Errorf("GET %s on the rejoined %s = %q, %v; want v2", key, old, got, err)
	}
	if got := c.MasterFor(key); got != promoted {
		t.Errorf("MasterFor after Restart = %s, want %s", got, promoted)
	}
	if err := fresh.Set(ctx, key, "v3", 0).Err(); err != nil {
		t.Errorf("SET after Restart: %v", err)
	}
}

func TestClusterOptions(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, ClusterMasters(4), ClusterReplicas(0), ClusterConfig("cluster-node-timeout", "3000"))
	if got := len(c.Addrs()); got != 4 {
		t.Errorf("%d nodes, want 4", got)
	}
	if d := cmp.Diff(c.Addrs(), c.Masters(), cmp.Transformer("sort", func(s []string) []string { return slices.Sorted(slices.Values(s)) })); d != "" {
		t.Errorf("with no replicas every node is a master (-nodes +masters):\n%s", d)
	}
	for _, a := range c.Addrs() {
		if got := c.Node(a).Client(t).ConfigGet(context.Background(), "cluster-node-timeout").Val()["cluster-node-timeout"]; got != "3000" {
			t.Errorf("%s: cluster-node-timeout = %q, want the option's 3000", a, got)
		}
	}
}

func TestParseClusterNodes(t *testing.T) {
	raw := "07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host4 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected\n" +
		"67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master,fail - 0 1426238316232 2 disconnected\n" +
		"e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460\n" +
		"6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 slave,fail? 67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 0 1426238316232 5 connected\n"
	got, err := parseClusterNodes(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := []nodeLine{
		{id: "07c37dfeb235213a872192d90877d0cd55635b91", flags: []string{"slave"}, master: "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca"},
		{id: "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1", flags: []string{"master", "fail"}, master: "-"},
		{id: "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca", flags: []string{"myself", "master"}, master: "-"},
		{id: "6ec23923021cf3ffec47632106199cb7f496ce01", flags: []string{"slave", "fail?"}, master: "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1"},
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(nodeLine{})); d != "" {
		t.Errorf("parseClusterNodes (-want +got):\n%s", d)
	}
	var failing []bool
	for _, l := range got {
		failing = append(failing, l.failing())
	}
	if d := cmp.Diff([]bool{false, true, false, true}, failing); d != "" {
		t.Errorf("failing (-want +got):\n%s", d)
	}
	if _, err := parseClusterNodes("abc 127.0.0.1:1@2 master"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("short line: err = %v, want one naming line 1", err)
	}
}

func TestParseRole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply []any
		want  role
		err   bool
	}{
		{"master", []any{"master", int64(3129659), []any{}}, role{name: "master"}, false},
		{"linked replica", []any{"slave", "127.0.0.1", int64(9001), "connected", int64(3167038)}, role{name: "slave", master: "127.0.0.1:9001", linkUp: true}, false},
		{"syncing replica", []any{"slave", "127.0.0.1", int64(9001), "sync", int64(-1)}, role{name: "slave", master: "127.0.0.1:9001"}, false},
		{"sentinel", []any{"sentinel", []any{"wp"}}, role{name: "sentinel"}, false},
		{"short replica", []any{"slave", "127.0.0.1"}, role{}, true},
		{"empty", nil, role{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRole(tc.reply)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("parseRole(%v) = %+v, %v; want %+v, error %v", tc.reply, got, err, tc.want, tc.err)
			}
		})
	}
}

// replicaOf is the node whose ROLE says it replicates master.
func replicaOf(t *testing.T, c *Cluster, master string) string {
	t.Helper()
	for _, a := range c.Addrs() {
		if r, err := queryRole(context.Background(), c.admin[a]); err == nil && r.name == "slave" && r.master == master {
			return a
		}
	}
	t.Fatalf("no node replicates %s\n%s", master, c.describe())
	return ""
}
