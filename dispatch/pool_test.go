package dispatch

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkersReuseIdleGoroutinesAndEndOnDone: a worker that finished its work takes the next
// (w.work is unbuffered, so a handover succeeds only to a waiting worker), and once done is
// closed every worker ends and wait returns.
func TestWorkersReuseIdleGoroutinesAndEndOnDone(t *testing.T) {
	done := make(chan struct{})
	w := newWorkers(done)
	var ran, reused atomic.Int32
	w.run(func() { ran.Add(1) })
	for range 20 {
		deadline := time.Now().Add(2 * time.Second)
		handed := false
		for !handed && time.Now().Before(deadline) {
			select {
			case w.work <- func() { reused.Add(1) }:
				handed = true
			default:
				time.Sleep(time.Millisecond)
			}
		}
		if !handed {
			t.Fatal("no worker came back for more work")
		}
	}
	close(done)
	waited := make(chan struct{})
	go func() {
		w.wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return after done was closed")
	}
	if ran.Load() != 1 || reused.Load() != 20 {
		t.Fatalf("first work ran %d times, %d of 20 handovers ran on the idle worker", ran.Load(), reused.Load())
	}
}
