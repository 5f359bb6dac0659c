package dispatch

import (
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"
)

// maxTurnKeys bounds the keys whose put-backs turns spreads: recipients are client-supplied.
const maxTurnKeys = 4096

// turns spreads over time the entries of one key that went back to the delayed set because
// what they need is held by the sends ahead of them (a recipient at its cap, the unproven hosts'
// pool): each is due one share of a send's time after the one put back before it, so a
// recipient's backlog comes back about as fast as its cap lets it go, not all at once, and
// not a second apart. One per provider, shared by its lanes on every shard.
type turns struct {
	mu   sync.Mutex
	last *lru.LRU[string, time.Time] // guarded by mu; the due time last given to each key
	// hold is the provider's mean time a turn holds its slot, in ns.
	hold atomic.Int64
}

func newTurns() *turns {
	last, _ := lru.NewLRU[string, time.Time](maxTurnKeys, nil) // errors only for a size < 1
	return &turns{last: last}
}

// next is when an entry of key put back at now may start: a share of a send's time after the
// last one of key, given slots of them in flight at once; at least now.
func (t *turns) next(key string, now time.Time, slots int) time.Time {
	// Before any send of the provider has ended there is no mean: a few milliseconds a turn
	// keeps the first put-backs from coming back all at once.
	per := max(time.Duration(t.hold.Load()), minTurnHold) / time.Duration(max(slots, 1))
	t.mu.Lock()
	defer t.mu.Unlock()
	due, _ := t.last.Get(key)
	if due.Before(now) {
		due = now
	}
	due = due.Add(per)
	if limit := now.Add(parkDelayMax); due.After(limit) {
		due = limit
	}
	t.last.Add(key, due)
	return due
}

// noteHold folds how long a turn held its slot into the provider's running mean.
func (t *turns) noteHold(d time.Duration) {
	old := t.hold.Load()
	if old == 0 {
		t.hold.Store(int64(d))
		return
	}
	t.hold.Store(old + (int64(d)-old)/8)
}

// minTurnHold is the least a turn is taken to hold its slot, for the spacing of put-backs.
const minTurnHold = 10 * time.Millisecond

// parkDelayMax bounds how far out a put-back's turn is given.
const parkDelayMax = 10 * time.Minute
