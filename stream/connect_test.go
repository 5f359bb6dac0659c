package stream

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

func TestConnectSingle(t *testing.T) {
	env := newEnv(t)
	main, blocking, err := Connect(env.srv.URL(), ConnectOptions{PoolSize: 7, BlockingPoolSize: 3, ClientName: "gw-test", ReadTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer main.Close()
	defer blocking.Close()
	for _, c := range []redis.UniversalClient{main, blocking} {
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
	}
	if o := main.(*redis.Client).Options(); o.PoolSize != 7 || o.ClientName != "gw-test" || o.ReadTimeout != 2*time.Second {
		t.Errorf("main options: pool %d name %q read %v", o.PoolSize, o.ClientName, o.ReadTimeout)
	}
	if o := blocking.(*redis.Client).Options(); o.PoolSize != 3 {
		t.Errorf("blocking pool = %d, want 3", o.PoolSize)
	}
	if main == blocking {
		t.Error("blocking reads must have their own pool")
	}
}

func TestConnectParse(t *testing.T) {
	s, err := parseSentinel("redis+sentinel://u:pw@s1:26379,s2:26380/mymaster/2?sentinel_password=sp&sentinel_username=su", false)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{s.MasterName, s.SentinelAddrs, s.DB, s.Username, s.Password, s.SentinelUsername, s.SentinelPassword, s.TLSConfig == nil}
	want := []any{"mymaster", []string{"s1:26379", "s2:26380"}, 2, "u", "pw", "su", "sp", true}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sentinel (-want +got):\n%s", d)
	}
	s, err = parseSentinel("rediss+sentinel://s1:26379/m", true)
	if err != nil || s.TLSConfig == nil || s.TLSConfig.ServerName != "s1" {
		t.Errorf("rediss+sentinel: %+v, %v", s, err)
	}
	c, err := parseCluster("redis+cluster://:secret@n1:7000,n2:7001,n3:7002", false)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"n1:7000", "n2:7001", "n3:7002"}, c.Addrs); d != "" || c.Password != "secret" {
		t.Errorf("cluster addrs (-want +got):\n%s password %q", d, c.Password)
	}
	for _, u := range []string{"redis+sentinel://s1:26379,s2:26379/m", "redis+cluster://n1:7000,n2:7001"} {
		m, b, err := Connect(u, ConnectOptions{})
		if err != nil {
			t.Errorf("Connect(%s): %v", u, err)
			continue
		}
		m.Close()
		b.Close()
	}
	if _, ok := mustConnect(t, "redis+cluster://n1:7000").(*redis.ClusterClient); !ok {
		t.Error("cluster URL did not give a cluster client")
	}
}

func mustConnect(t *testing.T, u string) redis.UniversalClient {
	m, b, err := Connect(u, ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); b.Close() })
	return m
}

func TestConnectErrors(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"localhost:6379", "no scheme"},
		{"http://x:1", `unsupported redis URL scheme "http"`},
		{"redis+sentinel://s1:26379", "the path must be /mastername"},
		{"redis+sentinel://s1/m", `host "s1" has no port`},
		{"redis+sentinel://s1:1/m/x", `db "x" is not a number`},
		{"redis+cluster://n1:7000/3", "only database 0"},
		{"redis+cluster:///", "no host"},
		{"redis://:hunter2@h:1/notadb", "redis URL"},
	} {
		_, _, err := Connect(c.url, ConnectOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Connect(%q) = %v, want an error containing %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Connect(%q) error leaks the password: %v", c.url, err)
		}
	}
}
