package dispatch

import (
	"context"
	"math"
	"sync"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// How a provider serves its two classes (docs/architecture.md, "Priority classes").
//
// A transactional job never waits behind bulk jobs: every read takes the transactional lane
// first, and bulk jobs get only what it leaves, less a reserve: a tenth of the provider's
// slots, and a token for the next transactional job (when the burst holds more than one).
// Bulk jobs are owed their share (bulk_min_share) while transactional ones take most of the
// provider: then each read takes their share of bulk entries first, with no reserve, until the
// recent split gives them the share.

// mixSpan is the span of the recent split between the classes: two of these are counted.
const mixSpan = time.Second

// classMix counts the entries the provider's lanes read by class, over the current and the
// previous mixSpan, to tell whether bulk jobs are getting their share.
type classMix struct {
	mu        sync.Mutex
	start     time.Time  // guarded by mu; when the current span began
	cur, prev [2]float64 // guarded by mu; [transactional, bulk]
}

// roll moves the spans on to now. Called with mu held.
func (m *classMix) roll(now time.Time) {
	switch el := now.Sub(m.start); {
	case m.start.IsZero() || el >= 2*mixSpan:
		m.prev, m.cur, m.start = [2]float64{}, [2]float64{}, now
	case el >= mixSpan:
		m.prev, m.cur, m.start = m.cur, [2]float64{}, m.start.Add(mixSpan)
	}
}

// read counts the entries of a read at now by class.
func (m *classMix) read(now time.Time, entries []stream.Entry) {
	for _, e := range entries {
		m.took(now, stream.ClassOfLane(e.Stream))
	}
}

// took counts an entry of class c read at now.
func (m *classMix) took(now time.Time, c jobfmt.Class) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roll(now)
	m.cur[classIndex(c)]++
}

// bulkOwed says whether bulk jobs got less than share of the reads recently while
// transactional jobs took some: then bulk takes its share first.
func (m *classMix) bulkOwed(now time.Time, share float64) bool {
	if share <= 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roll(now)
	tx, bulk := m.cur[0]+m.prev[0], m.cur[1]+m.prev[1]
	return tx > 0 && bulk < share*(tx+bulk)
}

// bulkSlotReserve is how many of the provider's slots bulk jobs leave free for transactional
// ones: a tenth (rounded up), none when the provider has a single slot.
func bulkSlotReserve(capacity int) int {
	return min(int(math.Ceil(float64(capacity)/10)), capacity-1)
}

// grant takes, at now, the tokens for a read of at most k entries (the lane took k slots) and
// says how many of each class the read may take: Total is the tokens taken (0 when the bucket
// has none), every one of which a transactional entry may use; bulk entries may use those that
// leave a token in the bucket for the next transactional job, and a tenth of the slots free, or,
// while they are owed their share, take it first.
func (pl *providerLimits) grant(now time.Time, k int) stream.LaneRead {
	share := pl.provider().BulkMinShare
	if pl.mix.bulkOwed(now, share) {
		total := pl.tokens.Take(now, k, 0)
		if total == 0 {
			return stream.LaneRead{}
		}
		return stream.LaneRead{Total: total, BulkMax: total, BulkFirst: max(1, int(math.Ceil(share*float64(total))))}
	}
	free := pl.slots.Free() + k // the slots free before this read took its own
	forBulk := pl.tokens.Take(now, k, bulkKeep(pl))
	total := forBulk + pl.tokens.Take(now, k-forBulk, 0)
	if total == 0 {
		return stream.LaneRead{}
	}
	return stream.LaneRead{Total: total, BulkMax: max(0, min(forBulk, free-bulkSlotReserve(pl.slots.Cap())))}
}

// grantReserved is grant for a read of one entry with a token reserved ahead (reserveToken):
// a transactional entry may take it; a bulk one only while bulk is owed its share, or when the
// provider's burst is a single token (no token can be kept for a transactional job).
func (pl *providerLimits) grantReserved(now time.Time) stream.LaneRead {
	if pl.mix.bulkOwed(now, pl.provider().BulkMinShare) {
		return stream.LaneRead{Total: 1, BulkFirst: 1, BulkMax: 1}
	}
	return stream.LaneRead{Total: 1, BulkMax: 1 - bulkKeep(pl)}
}

// bulkKeep is how many tokens bulk entries leave in the provider's bucket for the next
// transactional job: one, unless the burst holds no more than one.
func bulkKeep(pl *providerLimits) int { return min(1, pl.tokens.Burst()-1) }

// reserveToken reserves the provider's next token at now and waits until it is due: true once
// it is, with the token the caller's; false, with the token given back, when a reload raised
// the rate meanwhile (the caller reserves again at the new rate) or ctx ended.
func (pl *providerLimits) reserveToken(ctx context.Context, now time.Time) bool {
	raised := pl.tokens.Raised()
	due := pl.tokens.Reserve(now)
	d := due.Sub(now)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-raised:
	case <-ctx.Done():
	}
	pl.tokens.Return(time.Now(), 1)
	return false
}

// classIndex is c's place in classMix's counts.
func classIndex(c jobfmt.Class) int {
	if c.IsBulk() {
		return 1
	}
	return 0
}
