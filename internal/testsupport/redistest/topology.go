package redistest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// topologyTimeout bounds every wait of a Cluster or a Sentinel setup: forming, a failover
// (node-timeout 2000 ms or down-after 1000 ms, then an election) and a rejoin take a few
// seconds, so reaching this means the topology is stuck and the failure says where.
const topologyTimeout = 30 * time.Second

// pollInterval is how often a wait looks at the topology again.
const pollInterval = 50 * time.Millisecond

// queryTimeout bounds one look at one process; loopback answers in well under a millisecond
// and a killed process refuses the connection at once.
const queryTimeout = time.Second

// poll calls check until it returns "" or topologyTimeout has passed, and returns the last
// reason check gave ("" when it was satisfied).
func poll(check func() string) string {
	deadline := time.Now().Add(topologyTimeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		reason := check()
		if reason == "" || !time.Now().Before(deadline) {
			return reason
		}
		<-tick.C
	}
}

// adminOptions are for the helpers' own connections to one process: no retries, so a look at
// a killed process fails at once instead of backing off.
func adminOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:         addr,
		MaxRetries:   -1,
		DialTimeout:  queryTimeout,
		ReadTimeout:  queryTimeout,
		WriteTimeout: queryTimeout,
		PoolSize:     2,
	}
}

func adminClient(addr string) *redis.Client { return redis.NewClient(adminOptions(addr)) }

// role is what ROLE reports: "master", "slave" or "sentinel", and for a replica the master
// it follows and whether its link to it is up.
type role struct {
	name   string
	master string // host:port; replicas only
	linkUp bool   // replicas only
}

func (r role) String() string {
	if r.name != "slave" {
		return r.name
	}
	state := "link down"
	if r.linkUp {
		state = "link up"
	}
	return fmt.Sprintf("replica of %s (%s)", r.master, state)
}

// parseRole reads the reply of ROLE.
func parseRole(v []any) (role, error) {
	if len(v) == 0 {
		return role{}, fmt.Errorf("empty ROLE reply")
	}
	name, _ := v[0].(string)
	r := role{name: name}
	if name == "slave" {
		if len(v) < 4 {
			return role{}, fmt.Errorf("ROLE reply %v: want 5 fields for a replica", v)
		}
		host, _ := v[1].(string)
		port, _ := v[2].(int64)
		state, _ := v[3].(string)
		r.master = fmt.Sprintf("%s:%d", host, port)
		r.linkUp = state == "connected"
	}
	return r, nil
}

// queryRole asks one process its ROLE.
func queryRole(ctx context.Context, c *redis.Client) (role, error) {
	v, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return role{}, err
	}
	return parseRole(v)
}

// logTails is the last lines of every process's log, for failure messages.
func logTails(servers []*Server, n int) string {
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "--- %s redis.log (last %d lines):\n%s\n", s.Addr(), n, s.logTail(n))
	}
	return b.String()
}

// indent prefixes every line of s with two spaces.
func indent(s string) string {
	s = strings.TrimRight(s, "\r\n")
	return "  " + strings.ReplaceAll(strings.ReplaceAll(s, "\r", ""), "\n", "\n  ")
}
