package limits

import (
	"container/list"
	"strings"
	"sync"
	"sync/atomic"
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
	max int // immutable

	mu    sync.Mutex
	hosts map[string]*list.Element // guarded by mu; values are the host names in order
	order list.List                // guarded by mu; least recently proven at the front
	// gen counts the hosts that became proven, so a waiter can tell cheaply whether any did
	// since it last looked.
	gen atomic.Uint64
}

// NewProvenHosts returns a table that remembers at most maxHosts hosts (< 1: DefaultMaxHosts).
func NewProvenHosts(maxHosts int) *ProvenHosts {
	orDefault(&maxHosts, DefaultMaxHosts)
	return &ProvenHosts{max: maxHosts, hosts: make(map[string]*list.Element)}
}

// Proven reports whether host is remembered as answering.
func (p *ProvenHosts) Proven(host string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.hosts[host]
	return ok
}

// Prove records that host answered well: it is proven, and the most recently proven.
func (p *ProvenHosts) Prove(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.hosts[host]; ok {
		p.order.MoveToBack(e)
		return
	}
	for len(p.hosts) >= p.max {
		front := p.order.Front()
		delete(p.hosts, front.Value.(string))
		p.order.Remove(front)
	}
	host = strings.Clone(host) // the caller's may be a substring of a whole job entry (HostLimits.track)
	p.hosts[host] = p.order.PushBack(host)
	p.gen.Add(1)
}

// Forget makes host unproven again.
func (p *ProvenHosts) Forget(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.hosts[host]; ok {
		delete(p.hosts, host)
		p.order.Remove(e)
	}
}

// Len is the number of hosts proven.
func (p *ProvenHosts) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.hosts)
}

// Generation changes whenever a host becomes proven.
func (p *ProvenHosts) Generation() uint64 { return p.gen.Load() }
