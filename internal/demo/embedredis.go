package demo

import (
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// embeddedTTLTick is how often the embedded Redis moves its TTLs on. The worker's shortest TTL
// (the replicas set) is seconds long, so a key may outlive its TTL by this much without
// changing anything the worker sees.
const embeddedTTLTick = 250 * time.Millisecond

// embeddedRedis is a Redis served from inside this process (miniredis), so that `gateway-lab
// demo` runs on a machine with no redis-server at all. It keeps everything in memory and dies
// with the process; it is for trying the product, never for production, and it is no
// benchmark: one lock serializes every command.
//
// Where it differs from redis-server in a way the worker can see: XINFO CONSUMERS reports
// idle -1 for a consumer that has only ever run XREADGROUP, so the janitor never finds a
// consumer idle enough to remove. A demo starts from an empty server and runs one worker, so
// there is never a departed consumer to remove.
type embeddedRedis struct {
	m    *miniredis.Miniredis // immutable after startEmbeddedRedis
	stop chan struct{}        // closed by Stop to end the TTL goroutine
	done chan struct{}        // closed by the TTL goroutine when it returns
	once sync.Once
}

// startEmbeddedRedis serves a new, empty Redis on a free loopback port. Loopback only: it has
// no password.
func startEmbeddedRedis() (*embeddedRedis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	r := &embeddedRedis{m: m, stop: make(chan struct{}), done: make(chan struct{})}
	go r.expire()
	return r, nil
}

// expire moves the server's TTLs on with the wall clock, which miniredis does not do by
// itself: the sent and gone marks (SET PX) and the replicas set (PEXPIRE) must run out as on
// redis-server. miniredis's ClockTTL would do it on every command instead, and each time it
// sorts the whole keyspace: with one sent mark per delivered job, a 2,000-job burst took 11 s
// with it and 4 s with this ticker. Started by startEmbeddedRedis, ended by Stop.
func (r *embeddedRedis) expire() {
	defer close(r.done)
	t := time.NewTicker(embeddedTTLTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// URL is the server's address as a redis:// URL for stream.Connect.
func (r *embeddedRedis) URL() string { return "redis://" + r.m.Addr() }

// Stop closes the listener and every client connection; the data is gone with it. Calling it
// again does nothing.
func (r *embeddedRedis) Stop() {
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		r.m.Close()
	})
}
