package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of every Redis Cluster.
const clusterSlots = 16384

// clusterNodeTimeout is cluster-node-timeout in milliseconds: a master unreachable this long
// is flagged failing, and its replica's election follows within a second or two.
const clusterNodeTimeout = "2000"

// Cluster is a Redis Cluster of Servers on loopback, formed with redis-cli --cluster create.
// Nodes are named by their address (127.0.0.1:port), which stays the same across Kill and
// Restart, as do their directories and node IDs. Methods must be called from one goroutine at
// a time; the Servers and clients they hand out are safe for concurrent use.
type Cluster struct {
	t     testing.TB
	cfg   clusterConfig            // immutable
	nodes []*Server                // in start order; immutable
	ids   map[string]string        // address -> node ID; immutable after StartCluster
	addrs map[string]string        // node ID -> address; immutable after StartCluster
	admin map[string]*redis.Client // address -> the helper's own client; immutable

	mu     sync.Mutex
	served map[string][]slotRange // guarded by mu: slots each killed node served as master
}

// ClusterOption changes how StartCluster builds the cluster.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	masters  int
	replicas int // per master
	extra    []string
}

// ClusterMasters sets the number of masters (default 3, the least redis-cli accepts).
func ClusterMasters(n int) ClusterOption { return func(c *clusterConfig) { c.masters = n } }

// ClusterReplicas sets the number of replicas of each master (default 1).
func ClusterReplicas(n int) ClusterOption { return func(c *clusterConfig) { c.replicas = n } }

// ClusterConfig adds a redis-server configuration directive for every node, as WithConfig
// does for Start; it can override the helper's own, for example cluster-node-timeout.
func ClusterConfig(name string, values ...string) ClusterOption {
	return func(c *clusterConfig) { c.extra = append(c.extra, directive(name, values)...) }
}

// StartCluster starts masters×(1+replicas) cluster-enabled Servers (AOF always, node timeout
// 2000 ms), joins them with redis-cli --cluster create, and returns once every node reports
// cluster_state:ok with all 16384 slots served, every node agrees on which node serves which
// slots, and every replica's link to its master is up. Everything is stopped at cleanup.
// It fails the test, never skips it, when redis-server or redis-cli is missing.
func StartCluster(t testing.TB, opts ...ClusterOption) *Cluster {
	t.Helper()
	cfg := clusterConfig{masters: 3, replicas: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.masters < 3 {
		t.Fatalf("redistest: StartCluster: %d masters; a cluster needs at least 3 (redis-cli --cluster create refuses fewer)", cfg.masters)
	}
	if cfg.replicas < 0 {
		t.Fatalf("redistest: StartCluster: %d replicas per master; want 0 or more", cfg.replicas)
	}
	server := lookBinary(t, "redis-server")
	cli := lookBinary(t, "redis-cli")

	c := &Cluster{
		t:      t,
		cfg:    cfg,
		ids:    map[string]string{},
		addrs:  map[string]string{},
		admin:  map[string]*redis.Client{},
		served: map[string][]slotRange{},
	}
	extra := append([]string{"--cluster-node-timeout", clusterNodeTimeout}, cfg.extra...)
	for range cfg.masters * (1 + cfg.replicas) {
		n := launch(t, server, spec{mode: clusterNode, extra: extra})
		c.nodes = append(c.nodes, n)
		c.admin[n.Addr()] = adminClient(n.Addr())
	}
	// Registered after the servers' Stop, so it runs before them.
	t.Cleanup(func() {
		for _, a := range c.admin {
			_ = a.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	for _, n := range c.nodes {
		id, err := c.admin[n.Addr()].ClusterMyID(ctx).Result()
		if err != nil {
			t.Fatalf("redistest: CLUSTER MYID on %s: %v", n.Addr(), err)
		}
		c.ids[n.Addr()], c.addrs[id] = id, n.Addr()
	}

	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(cfg.replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = procAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: %s %s: %v\n%s\n%s", cli, strings.Join(args, " "), err, out, c.describe())
	}

	c.await("the cluster to form", func(v []nodeView) string {
		if r := c.settled(v); r != "" {
			return r
		}
		if got := len(v[0].masters()); got != cfg.masters {
			return fmt.Sprintf("%d masters serve slots, want %d", got, cfg.masters)
		}
		for _, m := range v[0].masters() {
			if got := len(v[0].replicas(m)); got != cfg.replicas {
				return fmt.Sprintf("master %s has %d replicas, want %d", c.addrs[m], got, cfg.replicas)
			}
		}
		return ""
	})
	return c
}

// URL is the worker's URL for the cluster: redis+cluster:// and every node's address.
func (c *Cluster) URL() string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") }

// Addrs is every node's address, in start order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Node is the Server at addr; the test fails if there is none.
func (c *Cluster) Node(addr string) *Server {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	c.t.Fatalf("redistest: no cluster node at %s (nodes: %s)", addr, strings.Join(c.Addrs(), ", "))
	return nil
}

// Client returns a new ClusterClient seeded with every node's address, with go-redis's default
// options, closed at the test's cleanup. It routes by the slot map it last loaded, so after a
// failover it needs ReloadState (see the package documentation).
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Masters is the address of every master that serves slots, in slot order. The cluster must
// be settled (as StartCluster, WaitPromotion and Restart leave it); otherwise the test fails.
func (c *Cluster) Masters() []string {
	c.t.Helper()
	var out []string
	for _, id := range c.settledView("Masters").masters() {
		out = append(out, c.addrs[id])
	}
	return out
}

// MasterFor is the address of the master that serves the hash slot of key, as every running
// node reports it. The cluster must be settled; otherwise the test fails.
func (c *Cluster) MasterFor(key string) string {
	c.t.Helper()
	v := c.settledView("MasterFor")
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	slot, err := c.admin[v.addr].ClusterKeySlot(ctx, key).Result()
	if err != nil {
		c.t.Fatalf("redistest: CLUSTER KEYSLOT %q on %s: %v", key, v.addr, err)
	}
	id := v.owner(int(slot))
	if id == "" {
		c.t.Fatalf("redistest: slot %d of %q is served by no node\n%s", slot, key, c.describe())
	}
	return c.addrs[id]
}

// KillMaster SIGKILLs the master at addr, as Kill does; the test fails if addr does not serve
// slots as a master.
func (c *Cluster) KillMaster(addr string) {
	c.t.Helper()
	if !slices.Contains(c.Masters(), addr) {
		c.t.Fatalf("redistest: KillMaster(%s): not a master serving slots\n%s", addr, c.describe())
	}
	c.Kill(addr)
}

// Kill SIGKILLs the node at addr and waits for it to exit. The slots it served as a master,
// if any, are what WaitPromotion later waits to see served by another node.
func (c *Cluster) Kill(addr string) {
	c.t.Helper()
	n := c.Node(addr)
	var served []slotRange
	for _, v := range c.collect() {
		if v.err == nil {
			served = v.servedBy(c.ids[addr])
			break
		}
	}
	n.Kill()
	c.mu.Lock()
	c.served[addr] = served
	c.mu.Unlock()
}

// WaitPromotion waits until the slots oldMaster served when it was killed are all served by
// one other node that answers ROLE master, every running node reports cluster_state:ok and
// they agree on the slot map, and returns that node's address.
func (c *Cluster) WaitPromotion(oldMaster string) string {
	c.t.Helper()
	c.mu.Lock()
	served, killed := c.served[oldMaster]
	c.mu.Unlock()
	if !killed || len(served) == 0 {
		c.t.Fatalf("redistest: WaitPromotion(%s): the node was not a master serving slots when Kill stopped it", oldMaster)
	}
	oldID := c.ids[oldMaster]
	var promoted string
	c.await("a replica to take over the slots of "+oldMaster, func(v []nodeView) string {
		if r := c.settled(v); r != "" {
			return r
		}
		newID := ""
		for _, r := range served {
			for slot := r.start; slot <= r.end; slot++ {
				id := v[0].owner(slot)
				switch {
				case id == oldID:
					return fmt.Sprintf("slot %d is still served by %s", slot, oldMaster)
				case newID == "":
					newID = id
				case id != newID:
					return fmt.Sprintf("the slots of %s are split between %s and %s", oldMaster, c.addrs[newID], c.addrs[id])
				}
			}
		}
		promoted = c.addrs[newID]
		for _, nv := range v {
			if nv.addr == promoted && nv.role.name != "master" {
				return fmt.Sprintf("%s serves the slots but ROLE says %s", promoted, nv.role)
			}
		}
		return ""
	})
	return promoted
}

// Restart starts the node at addr again on its port and directory (AOF and nodes.conf kept,
// so it keeps its node ID) and waits until the cluster is settled with it: every running node,
// it included, reports cluster_state:ok, agrees on the slot map, sees it as healthy, and, if it
// came back as a replica (as a master whose slots were taken over does), its link is up.
func (c *Cluster) Restart(addr string) {
	c.t.Helper()
	c.Node(addr).Restart()
	c.await(addr+" to rejoin the cluster", c.settled)
	c.mu.Lock()
	delete(c.served, addr)
	c.mu.Unlock()
}

// slotRange is one line of CLUSTER SLOTS, with the master named by ID.
type slotRange struct {
	start, end int
	master     string
}

// nodeView is what one running node reports about the cluster.
type nodeView struct {
	addr  string
	err   error
	info  map[string]string // CLUSTER INFO
	slots []slotRange       // CLUSTER SLOTS, by start
	nodes []nodeLine        // CLUSTER NODES
	raw   string            // CLUSTER NODES as sent
	role  role
}

// nodeLine is one line of CLUSTER NODES.
type nodeLine struct {
	id     string
	flags  []string
	master string // ID, "-" for a master
}

// parseClusterNodes reads the reply of CLUSTER NODES: one line a node, "<id> <ip:port@bus>
// <flags> <master id or -> ..." (https://redis.io/commands/cluster-nodes/).
func parseClusterNodes(raw string) ([]nodeLine, error) {
	var out []nodeLine
	for i, line := range strings.Split(strings.TrimSpace(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %d %q: %d fields, want at least 8", i+1, line, len(f))
		}
		out = append(out, nodeLine{id: f[0], flags: strings.Split(f[2], ","), master: f[3]})
	}
	return out, nil
}

// failing reports whether the line flags the node as failing, or not yet known.
func (l nodeLine) failing() bool {
	for _, f := range l.flags {
		switch f {
		case "fail", "fail?", "handshake", "noaddr":
			return true
		}
	}
	return false
}

func (v nodeView) owner(slot int) string {
	for _, r := range v.slots {
		if r.start <= slot && slot <= r.end {
			return r.master
		}
	}
	return ""
}

func (v nodeView) servedBy(id string) []slotRange {
	var out []slotRange
	for _, r := range v.slots {
		if r.master == id {
			out = append(out, r)
		}
	}
	return out
}

// masters is the ID of every master that serves slots, in slot order.
func (v nodeView) masters() []string {
	var out []string
	for _, r := range v.slots {
		if !slices.Contains(out, r.master) {
			out = append(out, r.master)
		}
	}
	return out
}

// replicas is the ID of every replica of master not flagged failing, sorted. They come from
// CLUSTER NODES: CLUSTER SLOTS leaves out a replica until its replication offset, gossiped
// between nodes, is above zero, which on an idle master takes up to repl-ping-replica-period.
func (v nodeView) replicas(master string) []string {
	var out []string
	for _, l := range v.nodes {
		if l.master == master && !l.failing() {
			out = append(out, l.id)
		}
	}
	slices.Sort(out)
	return out
}

// slotMap is the slot map, with each master's replicas, as one comparable string.
func (v nodeView) slotMap() string {
	var b strings.Builder
	for _, r := range v.slots {
		fmt.Fprintf(&b, "%d-%d:%s<%s ", r.start, r.end, r.master, strings.Join(v.replicas(r.master), ","))
	}
	return b.String()
}

// collect asks every running node for its view, in start order.
func (c *Cluster) collect() []nodeView {
	var out []nodeView
	for _, n := range c.nodes {
		if n.running() {
			out = append(out, c.look(n.Addr()))
		}
	}
	return out
}

func (c *Cluster) look(addr string) nodeView {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	v := nodeView{addr: addr}
	pipe := c.admin[addr].Pipeline()
	info := pipe.ClusterInfo(ctx)
	slots := pipe.ClusterSlots(ctx)
	nodes := pipe.ClusterNodes(ctx)
	roleCmd := pipe.Do(ctx, "ROLE")
	if _, v.err = pipe.Exec(ctx); v.err != nil {
		return v
	}
	v.info = map[string]string{}
	for _, line := range strings.Split(info.Val(), "\n") {
		if k, val, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			v.info[k] = val
		}
	}
	for _, s := range slots.Val() {
		r := slotRange{start: s.Start, end: s.End}
		if len(s.Nodes) > 0 {
			r.master = s.Nodes[0].ID
		}
		v.slots = append(v.slots, r)
	}
	slices.SortFunc(v.slots, func(a, b slotRange) int { return a.start - b.start })
	v.raw = nodes.Val()
	if v.nodes, v.err = parseClusterNodes(v.raw); v.err != nil {
		return v
	}
	r, _ := roleCmd.Slice()
	v.role, v.err = parseRole(r)
	return v
}

// settled says why the cluster is not settled, or "" when it is: every running node answers,
// reports cluster_state:ok with all slots assigned and served, has the same slot map as the
// others, knows every running node and sees none of them as failing, and is linked to its
// master if it is a replica.
func (c *Cluster) settled(views []nodeView) string {
	if len(views) == 0 {
		return "no node is running"
	}
	var live []string
	for _, v := range views {
		live = append(live, c.ids[v.addr])
	}
	for _, v := range views {
		if v.err != nil {
			return fmt.Sprintf("%s: %v", v.addr, v.err)
		}
		if s := v.info["cluster_state"]; s != "ok" {
			return fmt.Sprintf("%s reports cluster_state:%s", v.addr, s)
		}
		for _, k := range []string{"cluster_slots_assigned", "cluster_slots_ok"} {
			if v.info[k] != strconv.Itoa(clusterSlots) {
				return fmt.Sprintf("%s reports %s:%s", v.addr, k, v.info[k])
			}
		}
		if v.slotMap() != views[0].slotMap() {
			return fmt.Sprintf("%s and %s disagree on the slot map", v.addr, views[0].addr)
		}
		seen := 0
		for _, l := range v.nodes {
			if !slices.Contains(live, l.id) {
				continue
			}
			seen++
			if l.failing() {
				return fmt.Sprintf("%s sees %s as %s", v.addr, c.addrs[l.id], strings.Join(l.flags, ","))
			}
		}
		if seen != len(live) {
			return fmt.Sprintf("%s knows %d of the %d running nodes", v.addr, seen, len(live))
		}
		if v.role.name == "slave" && !v.role.linkUp {
			return fmt.Sprintf("%s is a replica of %s with its link down", v.addr, v.role.master)
		}
	}
	return ""
}

// settledView is one running node's view of a settled cluster; the test fails if it is not
// settled.
func (c *Cluster) settledView(caller string) nodeView {
	c.t.Helper()
	v := c.collect()
	if r := c.settled(v); r != "" {
		c.t.Fatalf("redistest: %s needs a settled cluster: %s\n%s", caller, r, c.describe())
	}
	return v[0]
}

// await polls until cond (given every running node's view) returns "", or fails the test
// with the last reason and the state the cluster reached.
func (c *Cluster) await(what string, cond func([]nodeView) string) {
	c.t.Helper()
	if r := poll(func() string { return cond(c.collect()) }); r != "" {
		c.t.Fatalf("redistest: cluster: no %s within %v: %s\n%s", what, topologyTimeout, r, c.describe())
	}
}

// describe is the state the cluster reached, for failure messages: every node with its ID and
// role, what each running node reports (CLUSTER INFO and CLUSTER NODES), and each log's tail.
func (c *Cluster) describe() string {
	views := map[string]nodeView{}
	for _, v := range c.collect() {
		views[v.addr] = v
	}
	var b strings.Builder
	b.WriteString("cluster nodes:\n")
	for _, n := range c.nodes {
		state := "killed"
		if v, ok := views[n.Addr()]; ok {
			state = "running, " + v.role.String()
			if v.err != nil {
				state = "running, not answering: " + v.err.Error()
			}
		}
		fmt.Fprintf(&b, "  %s id %s: %s\n", n.Addr(), c.ids[n.Addr()], state)
	}
	for _, n := range c.nodes {
		v, ok := views[n.Addr()]
		if !ok || v.err != nil {
			continue
		}
		fmt.Fprintf(&b, "as %s reports it:\n", v.addr)
		for _, k := range []string{"cluster_state", "cluster_slots_assigned", "cluster_slots_ok", "cluster_slots_pfail", "cluster_slots_fail", "cluster_known_nodes", "cluster_size", "cluster_current_epoch"} {
			fmt.Fprintf(&b, "  %s:%s\n", k, v.info[k])
		}
		b.WriteString(indent(v.raw) + "\n")
	}
	b.WriteString(logTails(c.nodes, 15))
	return b.String()
}
