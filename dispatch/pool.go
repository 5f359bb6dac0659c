package dispatch

import (
	"sync"
	"time"
)

// workerIdle is how long a worker goroutine waits for more work before it ends.
const workerIdle = 5 * time.Second

// workers runs functions on goroutines that stay a while after their work, for the next one. A
// lane starts a send for every job and intake a move for every entry; a new goroutine each time
// grows a new stack each time (HTTP/2, TLS and the encryption go deep), a cost that shows in the
// worker's CPU profile (BENCHMARKS.md). A worker keeps its grown stack.
type workers struct {
	work chan func() // unbuffered: a handover succeeds only to a worker that waits
	done <-chan struct{}
	wg   sync.WaitGroup
}

// newWorkers returns a pool whose idle workers end when done is closed; wait for them with
// wait once done is closed.
func newWorkers(done <-chan struct{}) *workers {
	return &workers{work: make(chan func()), done: done}
}

// run runs f on an idle worker, or on a new one when none is idle. It never waits for f.
func (w *workers) run(f func()) {
	select {
	case w.work <- f:
	default:
		w.wg.Add(1)
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	defer w.wg.Done()
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		t.Reset(workerIdle)
		select {
		case f = <-w.work:
		case <-t.C:
			return
		case <-w.done:
			return
		}
	}
}

// wait returns once every worker has ended: after done is closed and their work returned.
func (w *workers) wait() { w.wg.Wait() }
