package limits

import (
	"strings"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
)

// ProvenHosts remembers which client-supplied hosts have been seen answering: a host is proven
// by an answer that shows it serves pushes (a 2xx, or a 4xx other than 429) and stops being
// proven when it no longer answers at all or its breaker opens. A lane of client-supplied
// hosts gives unproven hosts only a small pool of its slots and tokens, so any number of hosts
// that were never seen answering (each of them seen once, too few failures to trip a breaker)
// cannot take the capacity the hosts known to answer need.
//
// At most MaxHosts hosts are remembered; the host proven least recently is forgotten first,
// and a forgotten host is unproven until its next good answer. Keys are used as given, as in
// HostBreaker. Safe for concurrent use.
type ProvenHosts struct {
	// hosts is ordered by the last Prove of each host: Proven only peeks (Contains), so asking
	// about a host does not keep it remembered. The cache has its own lock.
	hosts *lru.Cache[string, struct{}]
	// gen counts the hosts that became proven, so a waiter can tell cheaply whether any did
	// since it last looked.
	gen atomic.Uint64
}

// NewProvenHosts returns a table that remembers at most maxHosts hosts (< 1: DefaultMaxHosts).
func NewProvenHosts(maxHosts int) *ProvenHosts {
	orDefault(&maxHosts, DefaultMaxHosts)
	hosts, _ := lru.New[string, struct{}](maxHosts) // fails only for a size < 1
	return &ProvenHosts{hosts: hosts}
}

// Proven reports whether host is remembered as answering.
func (p *ProvenHosts) Proven(host string) bool { return p.hosts.Contains(host) }

// Prove records that host answered well: it is proven, and the most recently proven.
func (p *ProvenHosts) Prove(host string) {
	if _, ok := p.hosts.Get(host); ok { // Get makes it the most recently proven
		return
	}
	// A full table forgets its least recently proven host. The key is a copy: the caller's
	// may be a substring of a whole job entry (HostLimits.track).
	if known, _ := p.hosts.ContainsOrAdd(strings.Clone(host), struct{}{}); !known {
		p.gen.Add(1)
	}
}

// Forget makes host unproven again.
func (p *ProvenHosts) Forget(host string) { p.hosts.Remove(host) }

// Len is the number of hosts proven.
func (p *ProvenHosts) Len() int { return p.hosts.Len() }

// Generation changes whenever a host becomes proven.
func (p *ProvenHosts) Generation() uint64 { return p.gen.Load() }
