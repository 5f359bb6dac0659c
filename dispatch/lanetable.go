package dispatch

import "sync"

// laneTable is every lane of this process, by shard and provider: the reclaimer offers entries
// to them, the janitor and the queue statistics walk their streams. A registry reload adds the
// lanes of a new provider while the others read it; a provider is never removed.
type laneTable struct {
	mu      sync.RWMutex
	byShard []map[string]*lane // guarded by mu
	ids     []string           // guarded by mu; provider ids, in registry order
}

func newLaneTable(shards int) *laneTable {
	t := &laneTable{byShard: make([]map[string]*lane, shards)}
	for s := range t.byShard {
		t.byShard[s] = map[string]*lane{}
	}
	return t
}

// add records the lanes of provider id, one per shard in shard order.
func (t *laneTable) add(id string, lanes []*lane) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s, l := range lanes {
		t.byShard[s][id] = l
	}
	t.ids = append(t.ids, id)
}

// of is provider id's lane on shard, nil when there is none.
func (t *laneTable) of(shard int, id string) *lane {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byShard[shard][id]
}

// providers are the provider ids with lanes, in registry order (a copy).
func (t *laneTable) providers() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return append([]string(nil), t.ids...)
}

// shards is the number of shards.
func (t *laneTable) shards() int { return len(t.byShard) }
