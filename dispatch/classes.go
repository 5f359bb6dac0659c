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
// A transactional job never waits behind bulk jobs: the lane reads the transactional lane
// first; bulk jobs are read only with the slots the transactional ones leave, less a reserve,
// and no further ahead than bulkReadAhead of tokens; and a bulk job takes a token only when the
// bucket keeps one for the next transactional job. Bulk jobs are owed their share
// (bulk_min_share) while transactional ones take most of the provider: then they read and
// reserve tokens in turn like transactional ones, until the recent split gives them the share.

// bulkReadAhead is how far ahead of its tokens the lane reads bulk jobs. Short, because the
// slots a bulk job holds while it waits for its token are slots a transactional job may need.
const bulkReadAhead = 100 * time.Millisecond

// bulkIdleRecheck is how long a lane whose bulk lane had nothing new skips reading it while
// transactional jobs keep it busy; an idle lane waits on both lanes at once (Store.WaitLanes),
// so a bulk job is never left unread longer than this.
const bulkIdleRecheck = 100 * time.Millisecond

// mixSpan is the span of the recent split between the classes: two of these are counted.
const mixSpan = time.Second

// classMix counts the tokens the provider's deliveries reserved by class, over the current and
// the previous mixSpan, to tell whether bulk jobs are getting their share. A reservation is
// counted when it is made, not when its token comes: transactional jobs reserve up to
// readAhead ahead, and counting at the send would see a bulk job's turn that late.
type classMix struct {
	mu        sync.Mutex
	start     time.Time  // guarded by mu; when the current span began
	cur, prev [2]float64 // guarded by mu; [transactional, bulk]
}

func classIndex(c jobfmt.Class) int {
	if c.IsBulk() {
		return 1
	}
	return 0
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

// took counts a token reserved by a delivery of class c.
func (m *classMix) took(now time.Time, c jobfmt.Class) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roll(now)
	m.cur[classIndex(c)]++
}

// bulkOwed says whether bulk jobs got less than share of the tokens recently while
// transactional jobs took some: then bulk takes its turn like a transactional job.
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

// txQueued are the deliveries waiting for a token that are not bulk jobs.
func (pl *providerLimits) txQueued() int64 { return pl.queued.Load() - pl.bulkQueued.Load() }

// bulkSlotReserve is how many of the provider's slots bulk jobs leave free for transactional
// ones: a tenth (rounded up), none when the provider has a single slot.
func bulkSlotReserve(capacity int) int {
	return min(int(math.Ceil(float64(capacity)/10)), capacity-1)
}

// bulkReadable is how many bulk entries the lane may start now: the free slots less the
// transactional jobs' reserve, and no more than bulkReadAhead of tokens beyond those bulk jobs
// already waiting for theirs; while bulk is owed its share, no reserve and readAhead.
func (pl *providerLimits) bulkReadable(owed bool) int {
	free := pl.slots.Free()
	if !owed {
		free -= bulkSlotReserve(pl.slots.Cap())
	}
	if free <= 0 {
		return 0
	}
	r := pl.bucket.Rate()
	if math.IsInf(r, 1) {
		return free
	}
	// Owed, bulk reserves in turn behind transactional reservations up to readAhead out: with
	// only bulkReadAhead of them waiting it could not reach its share.
	span := bulkReadAhead
	if owed {
		span = readAhead
	}
	ahead := max(1, int(math.Ceil(r*span.Seconds())))
	return max(0, min(free, ahead-int(pl.bulkQueued.Load())))
}

// waitClassToken is waitToken for a delivery of class c. A transactional delivery reserves its
// token at once. A bulk delivery, unless bulk is owed its share, reserves only when the bucket
// holds a token more than it takes (when its burst allows one), so that the next transactional
// job finds a token at once rather than behind the bulk jobs' reservations; until then it looks
// again when the bucket will have refilled.
func (pl *providerLimits) waitClassToken(stop context.Context, now func() time.Time, c jobfmt.Class) error {
	if !c.IsBulk() {
		pl.mix.took(now(), c)
		return pl.waitToken(stop, now)
	}
	took, err := pl.spareToken(stop, now)
	if err != nil || took {
		return err
	}
	pl.mix.took(now(), c)
	return pl.waitToken(stop, now)
}

// spareToken waits until a bulk delivery may reserve: at once while bulk is owed its share (it
// then reserves in turn, like a transactional job: took is false), else once the bucket holds
// a token more than it takes, which it takes (took is true). One bulk delivery at a time looks, and it reserves before the next looks:
// several that saw the spare token at once would all reserve, and the next transactional job
// would wait behind them.
func (pl *providerLimits) spareToken(stop context.Context, now func() time.Time) (took bool, err error) {
	select {
	case pl.bulkTurn <- struct{}{}:
	case <-stop.Done():
		return false, stop.Err()
	}
	for {
		t := now()
		r := pl.bucket.Rate()
		if math.IsInf(r, 1) || pl.mix.bulkOwed(t, pl.provider().BulkMinShare) {
			<-pl.bulkTurn
			return false, nil
		}
		keep := min(1.0, float64(pl.bucket.Burst()-1))
		have := pl.bucket.Tokens(t)
		if have >= 1+keep {
			// The token is there: reserving it takes no wait, so the next bulk delivery looks
			// only after this one's reservation counts.
			pl.mix.took(t, jobfmt.ClassBulk)
			err := pl.waitToken(stop, now)
			<-pl.bulkTurn
			return err == nil, err
		}
		d := time.Duration((1 + keep - have) / r * float64(time.Second))
		sleep(stop, min(max(d, time.Millisecond), 50*time.Millisecond))
		if stop.Err() != nil {
			<-pl.bulkTurn
			return false, stop.Err()
		}
	}
}

// readClasses reads up to n transactional entries and up to nb bulk entries of the lane, most
// in all and no more than the free slots and past (what the reader may read past them for the
// parking, readPastParked), without blocking: bulk first for its share when it
// is owed, then transactional, then bulk with what is left.
func (l *lane) readClasses(ctx context.Context, n, nb, most, past int, owed bool) ([]stream.Entry, error) {
	var out []stream.Entry
	// past is for transactional entries only: a bulk entry read past the free slots would
	// take the next free slot ahead of transactional work.
	slotsFree := min(l.lim.slots.Free(), most)
	free := min(slotsFree+past, most)
	readBulk := func(count int) error {
		count = min(count, nb, slotsFree-len(out))
		// Owed its share, bulk is read again at once after a short read, which may only mean
		// its backlog is still arriving; after a read that found nothing it waits as when it is
		// not owed: a provider that carries no bulk jobs at all is always "owed" (no bulk job
		// took a token), and would otherwise ask Redis for its empty bulk lane at every read.
		if count <= 0 || (time.Now().Before(l.bulkIdleUntil) && (!owed || l.bulkEmpty)) {
			return nil
		}
		got, err := l.store.ReadLane(ctx, l.shard, l.provider, jobfmt.ClassBulk, count, 0)
		if err != nil {
			return err
		}
		l.bulkEmpty = len(got) == 0
		if len(got) < count {
			l.bulkIdleUntil = time.Now().Add(bulkIdleRecheck)
		} else {
			l.bulkIdleUntil = time.Time{}
		}
		nb -= len(got)
		out = append(out, got...)
		return nil
	}
	if owed {
		if err := readBulk(max(1, int(math.Ceil(l.lim.provider().BulkMinShare*float64(n-past))))); err != nil {
			return out, err
		}
	}
	if n = min(n, free-len(out)); n > 0 {
		got, err := l.store.ReadLane(ctx, l.shard, l.provider, jobfmt.ClassTransactional, n, 0)
		if err != nil {
			return out, err
		}
		out = append(out, got...)
	}
	if owed {
		// The slots transactional jobs did not take now stay theirs, less the share read
		// above: bulk jobs waiting for their turn must not hold every slot.
		return out, readBulk(slotsFree - len(out) - bulkSlotReserve(l.lim.slots.Cap()))
	}
	return out, readBulk(nb)
}

// waitNew is the lane's wait when neither class had anything it may read. With room for both
// classes it blocks up to Block on both lanes at once, so a job of either class is read as it
// arrives (one of each at most). With room for transactional jobs only (bulk jobs are held back
// by their limits), it blocks on the transactional lane alone, up to the time a bulk job may go
// again. With no room for transactional jobs (enough of them wait for tokens) it only paces, as
// a lane always did: reading one more would make it wait in the process rather than in Redis.
func (l *lane) waitNew(ctx context.Context, n, nb int) ([]stream.Entry, error) {
	cfg := l.cfg
	switch {
	case n <= 0:
		sleep(ctx, l.lim.paceWait(cfg.Block))
		return nil, nil
	case nb > 0:
		got, err := l.store.WaitLanes(ctx, l.shard, l.provider, l.readBlock())
		for _, e := range got {
			if stream.ClassOfLane(e.Stream).IsBulk() {
				l.bulkIdleUntil, l.bulkEmpty = time.Time{}, false
			}
		}
		return got, err
	}
	return l.store.ReadLane(ctx, l.shard, l.provider, jobfmt.ClassTransactional, n, min(l.lim.paceWait(cfg.Block), l.readBlock()))
}
