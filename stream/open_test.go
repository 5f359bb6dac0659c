package stream

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/job"
)

func TestOpenSingle(t *testing.T) {
	env := newEnv(t)
	s, err := Open(env.srv.URL(), OpenOptions{PoolSize: 7, BlockingPoolSize: 3, ClientName: "gw-test", ReadTimeout: 2 * time.Second,
		Options: Options{Prefix: "gwo", Shards: 2, Consumer: "w1", SentTTL: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []redis.UniversalClient{s.c, s.blocking, s.bell} {
		if err := c.Ping(env.ctx).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
	}
	if o := s.c.(*redis.Client).Options(); o.PoolSize != 7 || o.ClientName != "gw-test" || o.ReadTimeout != 2*time.Second {
		t.Errorf("main options: pool %d name %q read %v", o.PoolSize, o.ClientName, o.ReadTimeout)
	}
	for name, c := range map[string]redis.UniversalClient{"blocking": s.blocking, "doorbell": s.bell} {
		if o := c.(*redis.Client).Options(); o.PoolSize != 3 || o.ClientName != "gw-test" {
			t.Errorf("%s options: pool %d name %q, want 3 and gw-test", name, o.PoolSize, o.ClientName)
		}
	}
	if s.c == s.blocking || s.c == s.bell || s.blocking == s.bell {
		t.Error("blocking reads and the intake's wait must have pools of their own")
	}
	if got := []any{s.o.Prefix, s.o.Shards, s.Consumer(), s.o.SentTTL, s.o.GoneTTL}; !cmp.Equal(got, []any{"gwo", 2, "w1", time.Minute, 7 * 24 * time.Hour}) {
		t.Errorf("store options %v: the Options given, with New's defaults for the rest", got)
	}
}

// TestOpenCloseLeavesNothingRunning: a Store that has used each of its clients (scripts,
// blocking reads, the intake's wait) and is closed leaves no goroutine and no connection.
func TestOpenCloseLeavesNothingRunning(t *testing.T) {
	env := newEnv(t)
	before := goleak.IgnoreCurrent()
	s, err := Open(env.srv.URL(), OpenOptions{ClientName: "gw-leak", Options: Options{Consumer: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Setup(env.ctx, []string{"fcm"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadIntake(env.ctx, 0, job.ClassTransactional, 10, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := s.readLane(env.ctx, 0, "fcm", job.ClassTransactional, 10, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := connections(t, env, "gw-leak"); n < 3 {
		t.Fatalf("%d connections before Close; the test must use all three clients", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
	if err := s.c.Ping(env.ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("PING after Close = %v, want %v", err, redis.ErrClosed)
	}
	deadline := time.Now().Add(5 * time.Second)
	for connections(t, env, "gw-leak") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open after Close", connections(t, env, "gw-leak"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// connections is how many connections the server has from clients named name.
func connections(t *testing.T, env *env, name string) int {
	t.Helper()
	list, err := env.c.ClientList(env.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, " name="+name+" ")
}

// TestOpenTopologies: every kind of URL gives a Store that works end to end (a producer's
// job read by the intake) and whose intake wait refuses a reply over one entry, on a single
// node, through Sentinel and on a Cluster.
func TestOpenTopologies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) string
	}{
		{"single", func(t *testing.T) string { return redistest.Start(t).URL() }},
		{"sentinel", func(t *testing.T) string { return redistest.StartSentinel(t).URL() }},
		{"cluster", func(t *testing.T) string { return redistest.StartCluster(t).URL() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.start(t)
			ctx := context.Background()
			s, err := Open(url, OpenOptions{Options: Options{Consumer: "w1", Shards: 3}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Setup(ctx, []string{"fcm"}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Producer().Enqueue(ctx, []byte(validJob("t-1"))); err != nil {
				t.Fatal(err)
			}
			shard := ShardOf("t-1", 3)
			entries, _, err := s.ReadIntake(ctx, shard, job.ClassTransactional, 10, time.Second)
			if err != nil || len(entries) != 1 || jobID(entries[0].Fields["job"]) != "t-1" {
				t.Fatalf("ReadIntake = %v, %v; want the enqueued job", entries, err)
			}
			key := s.Keys(shard).Intake + ":big"
			if err := s.c.Set(ctx, key, strings.Repeat("x", job.MaxEntryBytes+8<<10), time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.bell.Get(ctx, key).Err(); !errors.Is(err, errReplyTooLarge) {
				t.Errorf("GET of %d bytes on the doorbell's connections = %v, want %v", job.MaxEntryBytes+8<<10, err, errReplyTooLarge)
			}
			if err := s.c.Get(ctx, key).Err(); err != nil {
				t.Errorf("GET of the same on the main client: %v", err)
			}
		})
	}
}

// TestOpenClusterFollowsFailover: after a master dies and its replica takes over, the Store
// writes to that shard again within seconds, not at go-redis's default slot map reload a
// minute later (clusterReloadInterval).
func TestOpenClusterFollowsFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	ctx := context.Background()
	s, err := Open(c.URL(), OpenOptions{Options: Options{Consumer: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.ProbeWrite(ctx, 0); err != nil {
		t.Fatal(err)
	}
	master := c.MasterFor(s.Keys(0).Probe)
	c.KillMaster(master)
	promoted := c.WaitPromotion(master)
	// Well under go-redis's default minute, and well over clusterReloadInterval.
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := s.ProbeWrite(ctx, 0)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes to shard 0 still fail after %s served it: %v", promoted, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestOpenParse(t *testing.T) {
	// parsed is what a URL says, whatever the kind of client.
	type parsed struct {
		Kind, Network                            string
		Addrs                                    []string
		Master                                   string
		DB                                       int
		User, Password, SentinelUser, SentinelPW string
		TLSServerName                            string
		DialTimeout, ReloadInterval              time.Duration
	}
	of := func(t *target) parsed {
		var p parsed
		switch {
		case t.single != nil:
			o := t.single
			p = parsed{Kind: "single", Network: o.Network, Addrs: []string{o.Addr}, DB: o.DB, User: o.Username, Password: o.Password, DialTimeout: o.DialTimeout}
			if o.TLSConfig != nil {
				p.TLSServerName = o.TLSConfig.ServerName
			}
		case t.failover != nil:
			o := t.failover
			p = parsed{Kind: "sentinel", Addrs: o.SentinelAddrs, Master: o.MasterName, DB: o.DB, User: o.Username, Password: o.Password,
				SentinelUser: o.SentinelUsername, SentinelPW: o.SentinelPassword, DialTimeout: o.DialTimeout}
			if o.TLSConfig != nil {
				p.TLSServerName = o.TLSConfig.ServerName
			}
		default:
			o := t.cluster
			p = parsed{Kind: "cluster", Addrs: o.Addrs, User: o.Username, Password: o.Password, DialTimeout: o.DialTimeout, ReloadInterval: o.ClusterStateReloadInterval}
			if o.TLSConfig != nil {
				p.TLSServerName = o.TLSConfig.ServerName
			}
		}
		return p
	}
	cluster := func(p parsed) parsed { p.Kind, p.ReloadInterval = "cluster", clusterReloadInterval; return p }
	for _, tc := range []struct {
		url  string
		want parsed
	}{
		{"redis://u:pw@h:6380/3", parsed{Kind: "single", Network: "tcp", Addrs: []string{"h:6380"}, DB: 3, User: "u", Password: "pw"}},
		{"rediss://h:6380?dial_timeout=3s", parsed{Kind: "single", Network: "tcp", Addrs: []string{"h:6380"}, TLSServerName: "h", DialTimeout: 3 * time.Second}},
		{"REDIS://h:1", parsed{Kind: "single", Network: "tcp", Addrs: []string{"h:1"}}},
		{"unix:///run/redis.sock?db=2", parsed{Kind: "single", Network: "unix", Addrs: []string{"/run/redis.sock"}, DB: 2}},
		{"unix://:pw@/run/redis.sock", parsed{Kind: "single", Network: "unix", Addrs: []string{"/run/redis.sock"}, Password: "pw"}},
		{"redis+sentinel://u:pw@s1:26379,s2:26380/mymaster/2?sentinel_password=sp&sentinel_username=su",
			parsed{Kind: "sentinel", Addrs: []string{"s1:26379", "s2:26380"}, Master: "mymaster", DB: 2, User: "u", Password: "pw", SentinelUser: "su", SentinelPW: "sp"}},
		{"redis+sentinel://s1:26379,s2:26379/m?sentinel_password=sp", parsed{Kind: "sentinel", Addrs: []string{"s1:26379", "s2:26379"}, Master: "m", SentinelPW: "sp"}},
		{"rediss+sentinel://s1:26379/m/", parsed{Kind: "sentinel", Addrs: []string{"s1:26379"}, Master: "m", TLSServerName: "s1"}},
		{"redis+sentinel://s1:26379,s2:26379/m?dial_timeout=3", parsed{Kind: "sentinel", Addrs: []string{"s1:26379", "s2:26379"}, Master: "m", DialTimeout: 3 * time.Second}},
		{"redis+cluster://:secret@n1:7000,n2:7001,n3:7002", cluster(parsed{Addrs: []string{"n1:7000", "n2:7001", "n3:7002"}, Password: "secret"})},
		{"redis+cluster://n1:7000/0", cluster(parsed{Addrs: []string{"n1:7000"}})},
		{"rediss+cluster://u:pw@n1:7000,n2:7001?dial_timeout=1s", cluster(parsed{Addrs: []string{"n1:7000", "n2:7001"}, User: "u", Password: "pw", TLSServerName: "n1", DialTimeout: time.Second})},
	} {
		got, err := parseURL(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if d := cmp.Diff(tc.want, of(got)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.url, d)
		}
	}
}

// TestOpenErrors: a URL Open cannot use is refused with what is wrong, and never with a
// password in the message, wherever the URL carries one and whichever parser refused it.
func TestOpenErrors(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"localhost:6379", "no scheme"},
		{"http://x:1", `unsupported redis URL scheme "http"`},
		{"redis+sentinel://s1:26379", "the path must be /mastername"},
		{"redis+sentinel://s1:1/m/0/x", "the path must be /mastername or /mastername/db"},
		{"redis+sentinel://s1/m", `host "s1" has no port`},
		{"redis+sentinel://s1:1/m/x", `invalid database number: "x"`},
		{"redis+cluster://n1:7000/3", "only database 0"},
		{"redis+cluster:///", "no host"},
		{"redis://:hunter2@h:1/notadb", "invalid database number"},
		{"redis://:hunter2@h:1/%zz", "not a valid URL"},
		{"redis://:hunter2@h:1/0?bogus=1", "unexpected option: bogus"},
		{"redis://:hunter2@h:1/0?dial_timeout=hunter2", "invalid dial_timeout duration"},
		{"unix://:hunter2@", "empty unix socket path"},
		{"redis+sentinel://u:hunter2@s1:1/m?pool_size=hunter2", "invalid pool_size number"},
		{"redis+sentinel://s1:1/m?sentinel_password=hunter2&max_retries=hunter2", "invalid max_retries number"},
		{"redis+sentinel://s1:1/m?bogus=1", "unexpected option: bogus"},
		{"redis+cluster://:hunter2@n1:1?max_retries=hunter2", "invalid max_retries number"},
		{"rediss+cluster://:hunter2@n1:1,n2:x", "not a valid URL"},
		{"redis+cluster://:hunter2@n1:1,n2,n3:3", `host "n2" has no port`},
	} {
		_, err := Open(c.url, OpenOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) error leaks the password: %v", c.url, err)
		}
	}
}

// TestDoorbellRefusesOversizedEntry: an entry over the limits that arrives while the intake
// waits ends the wait part way, on the doorbell's connection, instead of coming to the worker
// whole; the intake script then dead-letters it where it lies.
func TestDoorbellRefusesOversizedEntry(t *testing.T) {
	env := newEnv(t)
	waits := &xreadErrors{}
	s, err := Open(env.srv.URL(), OpenOptions{ClientName: "gw-bell", Options: Options{Consumer: "w1"}, Hooks: []redis.Hook{waits}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Setup(env.ctx, []string{"fcm"}); err != nil {
		t.Fatal(err)
	}
	type read struct {
		entries []Entry
		refused []Refusal
		err     error
	}
	done := make(chan read, 1)
	go func() {
		entries, refused, err := s.ReadIntake(env.ctx, 0, job.ClassTransactional, 10, 10*time.Second)
		done <- read{entries, refused, err}
	}()
	// The entry must arrive while the read waits, not before it reads.
	deadline := time.Now().Add(5 * time.Second)
	for {
		list, err := env.c.ClientList(env.ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(list, "name=gw-bell") && strings.Contains(list, "cmd=xread ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the intake never waited with XREAD:\n%s", list)
		}
		time.Sleep(10 * time.Millisecond)
	}
	big := `{"id":"big-1","payload":"` + strings.Repeat("x", 1<<20) + `"}`
	env.enqueue(t, s, big)
	var got read
	select {
	case got = <-done:
	case <-time.After(8 * time.Second):
		t.Fatal("ReadIntake did not return after the oversized entry arrived")
	}
	if got.err != nil || len(got.entries) != 0 || len(got.refused) != 1 || got.refused[0].ID != "big-1" {
		t.Fatalf("ReadIntake = %v, %v, %v; want the big entry refused", got.entries, got.refused, got.err)
	}
	if errs := waits.list(); len(errs) != 1 || !errors.Is(errs[0], errReplyTooLarge) {
		t.Errorf("XREAD errors %v, want the one wait cut short by %v", errs, errReplyTooLarge)
	}
}

// xreadErrors is a go-redis hook that keeps the errors of XREAD commands.
type xreadErrors struct {
	mu   sync.Mutex
	errs []error
}

func (h *xreadErrors) list() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}

func (h *xreadErrors) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *xreadErrors) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "xread" && err != nil {
			h.mu.Lock()
			h.errs = append(h.errs, err)
			h.mu.Unlock()
		}
		return err
	}
}

func (h *xreadErrors) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
