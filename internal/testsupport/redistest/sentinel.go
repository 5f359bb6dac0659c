package redistest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a Redis master, one replica and three Sentinels on loopback, the Sentinels
// monitoring the master with quorum 2. Data nodes are named by their address
// (127.0.0.1:port), which stays the same across Kill and Restart. Methods must be called from
// one goroutine at a time; the Servers and clients they hand out are safe for concurrent use.
type Sentinel struct {
	t         testing.TB
	name      string                           // immutable
	data      []*Server                        // the first master, then its replica; immutable
	sentinels []*Server                        // immutable
	admin     map[string]*redis.Client         // data node address -> the helper's own client; immutable
	watch     map[string]*redis.SentinelClient // Sentinel address -> the helper's own client; immutable

	mu     sync.Mutex
	master string // guarded by mu: the master as of StartSentinel or the last WaitFailover
}

// SentinelOption changes how StartSentinel builds the setup.
type SentinelOption func(*sentinelConfig)

type sentinelConfig struct {
	name       string
	extra      []string // for the data nodes
	directives []string // sentinel.conf lines
}

// SentinelMasterName sets the name the Sentinels monitor the master as (default "wp").
func SentinelMasterName(name string) SentinelOption {
	return func(c *sentinelConfig) { c.name = name }
}

// SentinelNodeConfig adds a redis-server configuration directive for the master and the
// replica, as WithConfig does for Start.
func SentinelNodeConfig(name string, values ...string) SentinelOption {
	return func(c *sentinelConfig) { c.extra = append(c.extra, directive(name, values)...) }
}

// SentinelMonitorConfig sets a per-master Sentinel directive, written to sentinel.conf as
// "sentinel <name> <master name> <value>", for example SentinelMonitorConfig("failover-timeout",
// "10000"). It overrides the helper's own (down-after-milliseconds 1000, failover-timeout 5000,
// parallel-syncs 1).
func SentinelMonitorConfig(name, value string) SentinelOption {
	return func(c *sentinelConfig) { c.directives = append(c.directives, name+" "+value) }
}

// sentinelQuorum is how many Sentinels must agree the master is down.
const sentinelQuorum = 2

// StartSentinel starts a master, a replica (--replicaof) and three Sentinels, each with a
// generated sentinel.conf: monitor the master with quorum 2, down-after-milliseconds 1000,
// failover-timeout 5000, parallel-syncs 1. It returns once the replica's link is up and every
// Sentinel names the master, sees it up, lists the replica as up and linked, and knows the two
// other Sentinels. Everything is stopped at cleanup. It fails the test, never skips it, when
// redis-server is missing.
func StartSentinel(t testing.TB, opts ...SentinelOption) *Sentinel {
	t.Helper()
	cfg := sentinelConfig{name: "wp"}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.name == "" || strings.ContainsAny(cfg.name, " \t\r\n\"'") {
		t.Fatalf("redistest: StartSentinel: master name %q must be non-empty without spaces or quotes", cfg.name)
	}
	bin := lookBinary(t, "redis-server")
	s := &Sentinel{t: t, name: cfg.name, admin: map[string]*redis.Client{}, watch: map[string]*redis.SentinelClient{}}

	master := launch(t, bin, spec{extra: cfg.extra})
	replica := launch(t, bin, spec{extra: cfg.extra, replicaOf: master.Addr()})
	s.data = []*Server{master, replica}
	s.master = master.Addr()
	for _, n := range s.data {
		s.admin[n.Addr()] = adminClient(n.Addr())
	}

	var conf strings.Builder
	fmt.Fprintf(&conf, "sentinel monitor %s 127.0.0.1 %d %d\n", cfg.name, master.port, sentinelQuorum)
	for _, d := range append([]string{"down-after-milliseconds 1000", "failover-timeout 5000", "parallel-syncs 1"}, cfg.directives...) {
		name, value, _ := strings.Cut(d, " ")
		fmt.Fprintf(&conf, "sentinel %s %s %s\n", name, cfg.name, value)
	}
	for range 3 {
		n := launch(t, bin, spec{mode: sentinel, conf: conf.String()})
		s.sentinels = append(s.sentinels, n)
		s.watch[n.Addr()] = redis.NewSentinelClient(adminOptions(n.Addr()))
	}
	// Registered after the servers' Stop, so it runs before them.
	t.Cleanup(func() {
		for _, a := range s.admin {
			_ = a.Close()
		}
		for _, w := range s.watch {
			_ = w.Close()
		}
	})
	s.await("the Sentinels to agree on "+master.Addr(), func() string { return s.agreed(master.Addr(), replica.Addr()) })
	return s
}

// URL is the worker's URL for the setup: redis+sentinel://, the Sentinels' addresses, and the
// master name.
func (s *Sentinel) URL() string {
	return "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.name
}

// MasterName is the name the Sentinels monitor the master as.
func (s *Sentinel) MasterName() string { return s.name }

// SentinelAddrs is the address of each Sentinel.
func (s *Sentinel) SentinelAddrs() []string {
	out := make([]string, len(s.sentinels))
	for i, n := range s.sentinels {
		out[i] = n.Addr()
	}
	return out
}

// Master is the master's address as of StartSentinel or the last WaitFailover.
func (s *Sentinel) Master() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.master
}

// Replica is the other data node's address: the replica of Master, or the old master while
// it is down after a failover.
func (s *Sentinel) Replica() string {
	m := s.Master()
	for _, n := range s.data {
		if n.Addr() != m {
			return n.Addr()
		}
	}
	return ""
}

// Node is the data node (master or replica) at addr; the test fails if there is none.
func (s *Sentinel) Node(addr string) *Server {
	s.t.Helper()
	for _, n := range s.data {
		if n.Addr() == addr {
			return n
		}
	}
	s.t.Fatalf("redistest: no data node at %s (master %s, replica %s)", addr, s.Master(), s.Replica())
	return nil
}

// Client returns a new FailoverClient (go-redis's Sentinel-aware client) for the master,
// closed at the test's cleanup.
func (s *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.name, SentinelAddrs: s.SentinelAddrs()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// KillMaster SIGKILLs the current master, waits for it to exit, and returns its address.
func (s *Sentinel) KillMaster() string {
	s.t.Helper()
	old := s.Master()
	s.Node(old).Kill()
	return old
}

// WaitFailover waits until every Sentinel names one data node other than old as the master,
// none reports a failover in progress or the master down, and that node answers ROLE master;
// it returns the node's address, which Master reports from then on.
func (s *Sentinel) WaitFailover(old string) string {
	s.t.Helper()
	var promoted string
	s.await("a failover away from "+old, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
		defer cancel()
		promoted = ""
		for _, n := range s.sentinels {
			got, err := s.masterAddr(ctx, n)
			if err != nil {
				return err.Error()
			}
			switch {
			case got == old:
				return fmt.Sprintf("Sentinel %s still names %s", n.Addr(), old)
			case promoted == "":
				promoted = got
			case got != promoted:
				return fmt.Sprintf("Sentinels name %s and %s", promoted, got)
			}
			m, err := s.watch[n.Addr()].Master(ctx, s.name).Result()
			if err != nil {
				return fmt.Sprintf("Sentinel %s: SENTINEL MASTER: %v", n.Addr(), err)
			}
			if m["flags"] != "master" {
				return fmt.Sprintf("Sentinel %s reports the master %s as %s", n.Addr(), got, m["flags"])
			}
		}
		a, ok := s.admin[promoted]
		if !ok {
			return fmt.Sprintf("the Sentinels name %s, which is not one of the data nodes", promoted)
		}
		if r, err := queryRole(ctx, a); err != nil || r.name != "master" {
			return fmt.Sprintf("%s is named master but ROLE says %v (%v)", promoted, r, err)
		}
		return ""
	})
	s.mu.Lock()
	s.master = promoted
	s.mu.Unlock()
	return promoted
}

// Restart starts the data node at addr again on its port and directory. Any node but the
// current master starts as its replica (--replicaof), as an operator would restart a failed
// master; Sentinel would otherwise convert it itself, but only after it had been reachable as
// a master for 8 s. Restart waits until the node's link is up and every Sentinel lists it as
// an up, linked replica of the master; restarting the current master waits until every
// Sentinel sees it up again.
func (s *Sentinel) Restart(addr string) {
	s.t.Helper()
	n := s.Node(addr)
	master := s.Master()
	if addr == master {
		n.setReplicaOf("")
		n.Restart()
		s.await(addr+" to be seen up again as master", func() string { return s.agreed(master, "") })
		return
	}
	n.setReplicaOf(master)
	n.Restart()
	s.await(addr+" to rejoin as a replica of "+master, func() string { return s.agreed(master, addr) })
}

// masterAddr is the master as Sentinel n names it.
func (s *Sentinel) masterAddr(ctx context.Context, n *Server) (string, error) {
	addr, err := s.watch[n.Addr()].GetMasterAddrByName(ctx, s.name).Result()
	if err != nil {
		return "", fmt.Errorf("%s: SENTINEL GET-MASTER-ADDR-BY-NAME: %w", n.Addr(), err)
	}
	if len(addr) != 2 {
		return "", fmt.Errorf("%s: SENTINEL GET-MASTER-ADDR-BY-NAME answered %q", n.Addr(), addr)
	}
	return net.JoinHostPort(addr[0], addr[1]), nil
}

// agreed says why the setup is not settled on master (and replica, unless ""), or "" when it
// is: the replica answers ROLE as master's replica with its link up, and every Sentinel names
// master, sees it up, knows the other Sentinels, and lists the replica as up and linked.
func (s *Sentinel) agreed(master, replica string) string {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	if replica != "" {
		r, err := queryRole(ctx, s.admin[replica])
		if err != nil {
			return fmt.Sprintf("%s: ROLE: %v", replica, err)
		}
		if r.name != "slave" || r.master != master || !r.linkUp {
			return fmt.Sprintf("%s is %s, want a linked replica of %s", replica, r, master)
		}
	}
	for _, n := range s.sentinels {
		sc := s.watch[n.Addr()]
		got, err := s.masterAddr(ctx, n)
		if err != nil {
			return err.Error()
		}
		if got != master {
			return fmt.Sprintf("Sentinel %s names %s as master, want %s", n.Addr(), got, master)
		}
		m, err := sc.Master(ctx, s.name).Result()
		if err != nil {
			return fmt.Sprintf("Sentinel %s: SENTINEL MASTER: %v", n.Addr(), err)
		}
		if m["flags"] != "master" {
			return fmt.Sprintf("Sentinel %s reports the master as %s", n.Addr(), m["flags"])
		}
		if want := fmt.Sprint(len(s.sentinels) - 1); m["num-other-sentinels"] != want {
			return fmt.Sprintf("Sentinel %s knows %s other Sentinels, want %s", n.Addr(), m["num-other-sentinels"], want)
		}
		if replica == "" {
			continue
		}
		replicas, err := sc.Replicas(ctx, s.name).Result()
		if err != nil {
			return fmt.Sprintf("Sentinel %s: SENTINEL REPLICAS: %v", n.Addr(), err)
		}
		found := false
		for _, r := range replicas {
			if r["name"] != replica {
				continue
			}
			found = true
			if r["flags"] != "slave" || r["master-link-status"] != "ok" {
				return fmt.Sprintf("Sentinel %s sees replica %s as %s with master-link-status %s", n.Addr(), replica, r["flags"], r["master-link-status"])
			}
		}
		if !found {
			return fmt.Sprintf("Sentinel %s does not list %s among %d replicas", n.Addr(), replica, len(replicas))
		}
	}
	return ""
}

// await polls until cond returns "", or fails the test with the last reason and the state the
// setup reached.
func (s *Sentinel) await(what string, cond func() string) {
	s.t.Helper()
	if r := poll(cond); r != "" {
		s.t.Fatalf("redistest: sentinel: no %s within %v: %s\n%s", what, topologyTimeout, r, s.describe())
	}
}

// describe is the state the setup reached, for failure messages: each data node's ROLE, what
// each Sentinel reports about the master and its replicas, and each log's tail.
func (s *Sentinel) describe() string {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	var b strings.Builder
	b.WriteString("data nodes:\n")
	for _, n := range s.data {
		state := "killed"
		if n.running() {
			r, err := queryRole(ctx, s.admin[n.Addr()])
			state = "running, " + r.String()
			if err != nil {
				state = "running, ROLE: " + err.Error()
			}
		}
		fmt.Fprintf(&b, "  %s: %s\n", n.Addr(), state)
	}
	b.WriteString("Sentinels:\n")
	for _, n := range s.sentinels {
		if !n.running() {
			fmt.Fprintf(&b, "  %s: killed\n", n.Addr())
			continue
		}
		sc := s.watch[n.Addr()]
		m, err := sc.Master(ctx, s.name).Result()
		if err != nil {
			fmt.Fprintf(&b, "  %s: SENTINEL MASTER: %v\n", n.Addr(), err)
			continue
		}
		fmt.Fprintf(&b, "  %s: master %s:%s flags=%s num-slaves=%s num-other-sentinels=%s failover-state=%s config-epoch=%s\n",
			n.Addr(), m["ip"], m["port"], m["flags"], m["num-slaves"], m["num-other-sentinels"], m["failover-state"], m["config-epoch"])
		replicas, err := sc.Replicas(ctx, s.name).Result()
		if err != nil {
			fmt.Fprintf(&b, "    SENTINEL REPLICAS: %v\n", err)
		}
		for _, r := range replicas {
			fmt.Fprintf(&b, "    replica %s flags=%s master-link-status=%s master=%s:%s\n", r["name"], r["flags"], r["master-link-status"], r["master-host"], r["master-port"])
		}
	}
	b.WriteString(logTails(append(append([]*Server{}, s.data...), s.sentinels...), 15))
	return b.String()
}
