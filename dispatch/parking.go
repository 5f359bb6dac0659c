package dispatch

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// parkMax bounds the entries one lane keeps parked in memory. Past it an entry goes back to
// the delayed set, due when the entries parked ahead of it are likely to have gone.
var parkMax = 4096

// parkSweepEvery is how often the reader looks for parked entries that may start because a
// lane of another shard freed what they wait for (a lane's own sends wake its parked entries
// as they end). It also bounds how long the reader blocks on an empty lane while entries are
// parked.
const parkSweepEvery = 20 * time.Millisecond

// parkDelayMax bounds the delay of an entry that found the parking full.
const parkDelayMax = 10 * time.Minute

// parking holds a lane's entries that may not start yet, in memory, each pending for this
// consumer in Redis (and held, so the reclaimer keeps refreshing its idle time): those of a
// recipient that has its cap of deliveries in flight, and, in the fallback lane, those of
// unproven hosts while the unproven pool is full. An entry waits for its own recipient or for
// the pool, not behind the lane's other entries, and without a round trip through the delayed
// set for every turn it waits: it starts when a send of its recipient (or of an unproven host)
// ends. Entries of unproven hosts are started one host at a time in turn, so one host's
// backlog does not keep another new host from proving itself.
type parking struct {
	mu sync.Mutex
	// queues are the parked deliveries by what they wait for (a recipient's key, or a host's),
	// oldest first. Guarded by mu.
	queues map[parkKey]*parkQueue
	// hosts are the keys of unproven hosts with entries parked, in the order they get the
	// pool's next place. Guarded by mu.
	hosts list.List
	n     int // guarded by mu; entries parked
	// sweptGen is the proven hosts' generation at the last sweep of the host queues.
	sweptGen uint64 // guarded by mu
	// count mirrors n for the reader, which checks it every round without the lock.
	count atomic.Int64
	// sweptAt is when the reader last swept (unix ns).
	sweptAt atomic.Int64
	// fresh counts the entries the reader parked since it last asked (readPastParked).
	fresh atomic.Int64
}

// parkKey is what a parked entry waits for.
type parkKey struct {
	recipient string // set: a place of this recipient
	host      string // set: a place in the unproven pool for this host
}

type parkQueue struct {
	ds   list.List     // of *delivery
	elem *list.Element // in parking.hosts, for a host key
	// lastDue is the turn given to the last entry of this key sent back to the delayed set
	// because the parking was full (parking.overflow).
	lastDue time.Time
}

// park adds d at the back of key's queue, a transactional d ahead of the bulk ones (front: at
// the front, a delivery that was taken out to start and could not); false when the parking
// is full.
func (p *parking) park(key parkKey, d *delivery, front bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !front && p.n >= parkMax {
		return false
	}
	q := p.queues[key]
	if q == nil {
		if p.queues == nil {
			p.queues = make(map[parkKey]*parkQueue)
		}
		q = &parkQueue{}
		p.queues[key] = q
		if key.host != "" {
			q.elem = p.hosts.PushBack(key)
		}
	}
	switch {
	case front:
		q.ds.PushFront(d)
	case d.bulk():
		q.ds.PushBack(d)
	default:
		// A transactional entry goes ahead of the bulk ones parked under its key: a recipient's
		// bulk backlog must not hold its transactional pushes back.
		e := q.ds.Back()
		for e != nil && e.Value.(*delivery).bulk() {
			e = e.Prev()
		}
		if e == nil {
			q.ds.PushFront(d)
		} else {
			q.ds.InsertAfter(d, e)
		}
	}
	p.n++
	p.count.Store(int64(p.n))
	return true
}

// overflow is when an entry of key that found the parking full at now may start: after the
// entries parked under key and those of key sent back before it, each taking per of the key's
// time. The entries sent back are given turns one after the other from the last one given,
// so that one sent back again (its turn came too early) goes after those already waiting.
func (p *parking) overflow(key parkKey, now time.Time, per time.Duration) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queues[key]
	if q == nil {
		return now
	}
	due := now.Add(time.Duration(q.ds.Len()) * per)
	if q.lastDue.After(due) {
		due = q.lastDue
	}
	due = due.Add(per)
	if limit := now.Add(parkDelayMax); due.After(limit) {
		due = limit
	}
	q.lastDue = due
	return due
}

// pop takes the oldest delivery of key's queue; nil when none waits.
func (p *parking) pop(key parkKey) *delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queues[key]
	if q == nil || q.ds.Len() == 0 {
		return nil
	}
	d := p.remove(key, q, q.ds.Front())
	return d
}

// remove takes e out of key's queue q, dropping the queue when it is empty. Called with mu held.
func (p *parking) remove(key parkKey, q *parkQueue, e *list.Element) *delivery {
	d := q.ds.Remove(e).(*delivery)
	p.n--
	p.count.Store(int64(p.n))
	if q.ds.Len() == 0 {
		if q.elem != nil {
			p.hosts.Remove(q.elem)
		}
		delete(p.queues, key)
	}
	return d
}

// nextHosts are the host keys with entries parked, in turn; the first is moved to the back.
func (p *parking) nextHosts() []parkKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]parkKey, 0, p.hosts.Len())
	for e := p.hosts.Front(); e != nil; e = e.Next() {
		keys = append(keys, e.Value.(parkKey))
	}
	if f := p.hosts.Front(); f != nil {
		p.hosts.MoveToBack(f)
	}
	return keys
}

// recipientKeys are the recipient keys with entries parked.
func (p *parking) recipientKeys() []parkKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keys []parkKey
	for k := range p.queues {
		if k.recipient != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// hostsChanged reports whether a host became proven since the last call that said so.
func (p *parking) hostsChanged(gen uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sweptGen == gen {
		return false
	}
	p.sweptGen = gen
	return true
}

// drain takes every parked delivery out.
func (p *parking) drain() []*delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*delivery
	for _, q := range p.queues {
		for e := q.ds.Front(); e != nil; e = e.Next() {
			out = append(out, e.Value.(*delivery))
		}
	}
	p.queues, p.n = nil, 0
	p.hosts.Init()
	p.count.Store(0)
	return out
}

// startResult is what begin did with a delivery.
type startResult int

const (
	started  startResult = iota // running on a worker, holding its slot
	parked                      // waiting in the parking
	sentBack                    // put back to the delayed set (or left pending: the lane is stopping)
	stopping                    // the lane is told to stop: left pending
)

// begin takes what d needs to start: a place in the unproven pool when its host is unproven
// (fallback lane), then a slot; and runs it on a worker. fresh says the reader took d now
// (it may wait for a free slot, and a parked d goes at the back of its queue); otherwise d
// was parked and is being woken (it never waits, and goes back to the front of its queue).
func (l *lane) begin(readCtx, sendCtx context.Context, d *delivery, fresh bool) startResult {
	cfg := l.cfg
	for {
		if readCtx.Err() != nil {
			return stopping
		}
		pooled := false
		if d.host != "" && l.lim.proven != nil && !l.lim.proven.Proven(d.host) {
			if !l.lim.tryUnproven() {
				return l.parkOrSendBack(readCtx, d, parkKey{host: d.host}, fresh)
			}
			pooled = true
		}
		err := l.lim.slots.TryAcquire(d.retry, d.recipient)
		if err == nil {
			l.run(readCtx, sendCtx, d, pooled)
			return started
		}
		if pooled {
			l.lim.releaseUnproven()
		}
		switch {
		case errors.Is(err, limits.ErrNoCapacity):
			if !fresh {
				l.park.park(l.slotKey(d, pooled), d, true)
				return parked
			}
			if l.lim.slots.Wait(readCtx) != nil {
				return stopping
			}
		case errors.Is(err, limits.ErrRecipientBusy):
			return l.parkOrSendBack(readCtx, d, parkKey{recipient: d.recipient}, fresh)
		default: // limits.ErrRetryShare
			// A round trip: it paces the reader, which has nothing better to do than move
			// entries it may not start, and bounds how many are moved at once.
			now := cfg.Now()
			d.record(readCtx, l.putBack(d.laneJob, now.Add(putBackDelay(cfg.Rand())), now))
			l.release(d.e)
			return sentBack
		}
	}
}

// slotKey is the key a woken delivery that found no free slot goes back under: its
// recipient's (the empty one when it has none, which every end of a send wakes), or, for a
// delivery to an unproven host without a recipient, its host's, to keep its turn in the pool.
func (l *lane) slotKey(d *delivery, pooled bool) parkKey {
	if d.recipient == "" && pooled {
		return parkKey{host: d.host}
	}
	return parkKey{recipient: d.recipient}
}

// parkOrSendBack parks d under key; when the parking is full it sends d back to the delayed
// set, due once the entries of its key ahead of it are likely to have started.
func (l *lane) parkOrSendBack(readCtx context.Context, d *delivery, key parkKey, fresh bool) startResult {
	if l.park.park(key, d, !fresh) {
		if fresh {
			l.park.fresh.Add(1)
		}
		return parked
	}
	cfg := l.cfg
	turns := int64(l.lim.unprovenCap())
	if key.recipient != "" {
		turns = int64(max(1, l.lim.provider().PerRecipientInFlight))
	}
	now := cfg.Now()
	due := l.park.overflow(key, now, time.Duration(int64(l.holdTime())/turns))
	next := l.putBack(d.laneJob, due.Add(putBackDelay(cfg.Rand())), now)
	// Written on a worker, not by the reader: the entries behind it in the lane, other
	// recipients' and other hosts', do not wait for the round trip. At most
	// maxPutBackWriters at once, so that a flood of entries past the parking's bound cannot
	// start a goroutine each; past that the reader writes it itself, which paces the flood.
	write := func() {
		defer l.release(d.e)
		d.record(readCtx, next)
	}
	if l.putBackWriters.Add(1) > maxPutBackWriters {
		l.putBackWriters.Add(-1)
		write()
		return sentBack
	}
	l.inflight.Add(1)
	l.workers.run(func() {
		defer l.inflight.Done()
		defer l.putBackWriters.Add(-1)
		write()
	})
	return sentBack
}

// run runs d on a worker holding its slot (and its place in the unproven pool when pooled);
// when it ends, what waits for what it held is woken.
func (l *lane) run(readCtx, sendCtx context.Context, d *delivery, pooled bool) {
	d.pooled = pooled
	if !pooled {
		d.tok.join(l.lim, d.laneJob.class.IsBulk()) // a pooled delivery joins once it has its unproven token (admit)
	}
	l.inflight.Add(1)
	began := time.Now()
	l.workers.run(func() {
		defer l.inflight.Done()
		defer func() {
			l.noteHold(time.Since(began))
			l.release(d.e)
			if pooled {
				l.lim.releaseUnproven()
			}
			l.lim.slots.Release(d.retry, d.recipient)
			l.wake(readCtx, sendCtx, d.recipient, pooled)
		}()
		d.run(sendCtx, readCtx)
	})
}

// wake starts what waited for a place of recipient (when it is not "") and, when pooled,
// for a place in the unproven pool.
func (l *lane) wake(readCtx, sendCtx context.Context, recipient string, pooled bool) {
	if l.park.count.Load() == 0 {
		return
	}
	if recipient != "" {
		l.wakeKey(readCtx, sendCtx, parkKey{recipient: recipient})
	}
	l.wakeKey(readCtx, sendCtx, parkKey{})
	if pooled {
		l.wakeHosts(readCtx, sendCtx, false)
	}
}

// wakeKey starts key's parked deliveries in order until one cannot start.
func (l *lane) wakeKey(readCtx, sendCtx context.Context, key parkKey) {
	for {
		d := l.park.pop(key)
		if d == nil {
			return
		}
		if r := l.begin(readCtx, sendCtx, d, false); r == parked || r == stopping {
			return
		}
	}
}

// wakeHosts gives the unproven pool's free places to the parked hosts in turn, one delivery a
// host a round, and starts every parked delivery of a host that has been proven since it
// parked (it needs no place in the pool). all says to look at every host even while the pool
// is full, for hosts proven meanwhile.
func (l *lane) wakeHosts(readCtx, sendCtx context.Context, all bool) {
	for _, key := range l.park.nextHosts() {
		proven := l.lim.proven.Proven(key.host)
		if !proven && l.lim.unprovenFull() {
			if !all {
				return
			}
			continue
		}
		if proven {
			l.wakeKey(readCtx, sendCtx, key)
			continue
		}
		if d := l.park.pop(key); d != nil {
			if r := l.begin(readCtx, sendCtx, d, false); r == stopping {
				return
			}
		}
	}
}

// sweepParked is the reader's look at the parked entries, at most once per parkSweepEvery:
// those whose recipient has room again through a lane of another shard, those of hosts proven
// since, and the unproven pool's free places.
func (l *lane) sweepParked(readCtx, sendCtx context.Context) {
	if l.park.count.Load() == 0 {
		return
	}
	now := time.Now().UnixNano()
	if now-l.park.sweptAt.Load() < int64(parkSweepEvery) {
		return
	}
	l.park.sweptAt.Store(now)
	if l.lim.slots.Free() > 0 {
		for _, key := range l.park.recipientKeys() {
			l.wakeKey(readCtx, sendCtx, key)
		}
		l.wakeKey(readCtx, sendCtx, parkKey{})
	}
	if l.lim.proven != nil {
		l.wakeHosts(readCtx, sendCtx, l.park.hostsChanged(l.lim.proven.Generation()))
	}
}

// maxPutBackWriters bounds the workers writing put-backs of entries the parking could not hold
// (parkOrSendBack) at once.
const maxPutBackWriters = 8

// parkReadMax bounds how many entries past the free slots one read takes (readPastParked).
const parkReadMax = 512

// readPastParked is how many entries the reader may read past the free slots: twice as many
// as it parked since it last asked (at most parkReadMax, and no more than the parking has room
// for). An entry parked holds no slot, so a lane whose reads are mostly parked (one recipient's
// backlog ahead of the others') gets through them in a few reads, instead of a slot's worth
// per read while the entries behind them wait.
func (l *lane) readPastParked() int {
	k := l.park.fresh.Swap(0)
	room := int64(parkMax) - l.park.count.Load()
	return int(max(0, min(2*k, parkReadMax, room)))
}

// readBlock is how long the reader's next read may block on an empty lane: cfg.Block, or no
// longer than parkSweepEvery while entries are parked, so that they are looked at.
func (l *lane) readBlock() time.Duration {
	if l.park.count.Load() > 0 {
		return min(l.cfg.Block, parkSweepEvery)
	}
	return l.cfg.Block
}

// dropParked lets go of the parked entries when the lane stops: they were never started and
// stay pending, for the replica that takes them over.
func (l *lane) dropParked() {
	for _, d := range l.park.drain() {
		l.release(d.e)
	}
}

// noteHold folds how long a delivery held its slot into the lane's running mean, which
// estimates when an entry that found the parking full will have its turn.
func (l *lane) noteHold(d time.Duration) {
	old := l.meanHold.Load()
	if old == 0 {
		l.meanHold.Store(int64(d))
		return
	}
	l.meanHold.Store(old + (int64(d)-old)/8)
}

// holdTime is the lane's mean time a delivery holds its slot; 0 before any ended (no turn can
// be told yet: an entry then goes back for putBackDelay alone).
func (l *lane) holdTime() time.Duration { return time.Duration(l.meanHold.Load()) }

// bulk says whether d is a bulk job's delivery (false for an entry that did not decode).
func (d *delivery) bulk() bool { return d.laneJob != nil && d.laneJob.class.IsBulk() }
