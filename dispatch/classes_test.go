package dispatch

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestBulkBacklogNeverDelaysTransactional: FCM held to 20 requests a second behind more than a
// minute's work of bulk jobs; transactional jobs enqueued then are each sent within a bounded
// time of their enqueue (not behind the backlog), bulk keeps moving meanwhile, and every job
// has one ledger record. On a single lane, first come first served, the first transactional
// job would wait the whole backlog.
func TestBulkBacklogNeverDelaysTransactional(t *testing.T) {
	const rate = 20.0
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{"fcm": "rate: 20\nburst: 4"})})
	sub := e.subscribe(pushsim.FCM, e.key)
	var bulk [][]byte
	for i := range 1300 { // 65 s of work at the rate
		bulk = append(bulk, job(fmt.Sprintf("bulk-%d", i), sub, "newsletter", "class", "bulk"))
	}
	e.enqueue(bulk...)
	e.start(e.config(e.store))
	waitFor(t, "the bulk backlog to start moving", func() bool { return len(e.sentAt(pushsim.FCM)) >= 40 })

	const txJobs = 10
	enqueued := map[string]time.Time{}
	var txStart time.Time
	for i := range txJobs {
		id := fmt.Sprintf("reset-%d", i)
		at := time.Now()
		if i == 0 {
			txStart = at
		}
		e.enqueue(job(id, sub, "your code is 1234", "urgency", "high"))
		enqueued[id] = at
		time.Sleep(300 * time.Millisecond)
	}
	waitFor(t, "every transactional job sent", func() bool {
		for id := range enqueued {
			if len(e.deliveriesOf(id)) == 0 {
				return false
			}
		}
		return true
	})
	// A bound in seconds, far below the backlog's minute: what matters is that no job waits
	// behind the campaign, not a figure (the bench measures those).
	const bound = 2 * time.Second
	var waits []time.Duration
	for id, at := range enqueued {
		d := e.deliveriesOf(id)
		if len(d) != 1 {
			t.Errorf("%s: %d deliveries, want 1", id, len(d))
			continue
		}
		wait := d[0].At.Sub(at)
		waits = append(waits, wait)
		if wait > bound {
			t.Errorf("%s sent %v after its enqueue, behind the bulk backlog; want within %v", id, wait, bound)
		}
		if r := e.waitRecord("results", id); r["code"] != "ACCEPTED" {
			t.Errorf("%s: ledger code %s, want ACCEPTED", id, r["code"])
		}
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	t.Logf("transactional waits behind a bulk backlog at %.0f/s: %v", rate, waits)

	// Bulk kept moving while the transactional jobs went: all but the transactional sends of the
	// window were bulk.
	end := txStart.Add(txJobs * 300 * time.Millisecond)
	var bulkSent int
	for _, d := range e.sim.Deliveries() {
		if strings.HasPrefix(d.JobID, "bulk-") && !d.At.Before(txStart) && d.At.Before(end) {
			bulkSent++
		}
	}
	if want := int(0.5 * rate * end.Sub(txStart).Seconds()); bulkSent < want {
		t.Errorf("bulk sent %d in the %v the transactional jobs took, want at least %d: bulk stalled", bulkSent, end.Sub(txStart), want)
	}
	// The bulk jobs sent so far have one record each, and none of them went twice.
	seen := map[string]int{}
	for _, d := range e.sim.Deliveries() {
		seen[d.JobID]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
}

// TestBulkKeepsItsShareUnderTransactionalLoad: transactional jobs arrive faster than FCM's rate
// while a bulk backlog waits; bulk still gets bulk_min_share of the sends, and transactional
// jobs the rest. Without the share a steady transactional flow would hold bulk back for as long
// as it lasts.
func TestBulkKeepsItsShareUnderTransactionalLoad(t *testing.T) {
	const rate, share = 40.0, 0.25
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{
		"fcm": fmt.Sprintf("rate: %g\nburst: 4\nbulk_min_share: %g", rate, share)})})
	sub := e.subscribe(pushsim.FCM, e.key)
	var bulk [][]byte
	for i := range 800 {
		bulk = append(bulk, job(fmt.Sprintf("bulk-%d", i), sub, "newsletter", "class", "bulk"))
	}
	e.enqueue(bulk...)
	stop := e.feed("tx", sub, 1.5*rate) // more than the provider takes: transactional never runs dry
	e.start(e.config(e.store))
	from := time.Now().Add(2 * time.Second)
	const window = 5 * time.Second
	waitFor(t, "the measuring window to pass", func() bool { return time.Now().After(from.Add(window + 200*time.Millisecond)) })
	stop()
	var tx, bk int
	for _, d := range e.sim.Deliveries() {
		if d.At.Before(from) || !d.At.Before(from.Add(window)) {
			continue
		}
		if strings.HasPrefix(d.JobID, "bulk-") {
			bk++
		} else {
			tx++
		}
	}
	got := float64(bk) / float64(bk+tx)
	t.Logf("in %v at %.0f/s: %d transactional, %d bulk sends (bulk %.2f, its share %.2f)", window, rate, tx, bk, got, share)
	if got < 0.8*share {
		t.Errorf("bulk got %.2f of the sends under a saturating transactional flow, want at least about its share %.2f", got, share)
	}
	if float64(tx)/float64(bk+tx) < 1-share-0.1 {
		t.Errorf("transactional got %d of %d sends, want about %.0f%%: bulk took more than its share", tx, bk+tx, 100*(1-share))
	}
}

// TestGrantLeavesTransactionalItsReserves: a read may take as many transactional entries as
// it has tokens; bulk ones leave a token for the next transactional job and a tenth of the
// slots free, until bulk is owed its share: then the read takes that share of bulk first.
func TestGrantLeavesTransactionalItsReserves(t *testing.T) {
	u := newUnitLane(t, "apple") // 16 slots, a large bucket
	pl := u.lim
	now := time.Now()
	pl.slots.Take(16) // the read's own
	if got, want := pl.grant(now, 16), (stream.LaneRead{Total: 16, BulkMax: 14}); got != want {
		t.Errorf("grant of all 16 slots = %+v, want %+v (a token kept, 2 of 16 slots reserved)", got, want)
	}
	pl.tokens.Configure(now, 100, 3)
	pl.tokens.Take(now, 100, 0)
	pl.tokens.Return(now, 3)
	if got, want := pl.grant(now, 16), (stream.LaneRead{Total: 3, BulkMax: 2}); got != want {
		t.Errorf("grant with 3 tokens = %+v, want %+v", got, want)
	}
	if got := pl.grant(now, 16); got.Total != 0 {
		t.Errorf("grant of an empty bucket = %+v, want nothing", got)
	}
	// Transactional entries took everything of late: bulk is owed its tenth, first.
	for range 50 {
		pl.mix.took(now, jobfmt.ClassTransactional)
	}
	pl.tokens.Return(now, 3)
	if got, want := pl.grant(now, 16), (stream.LaneRead{Total: 3, BulkFirst: 1, BulkMax: 3}); got != want {
		t.Errorf("grant while bulk is owed = %+v, want %+v", got, want)
	}
}

// TestGrantLetsBulkUseALaneOfOneSlot: a lane of a single slot (a reserve of none) with tokens to
// spare reads bulk entries: the token kept for transactional jobs stays in the bucket, not out
// of the read.
func TestGrantLetsBulkUseALaneOfOneSlot(t *testing.T) {
	pl := newTestLimits(1, 1000)
	now := time.Now()
	pl.slots.Take(1)
	if got, want := pl.grant(now, 1), (stream.LaneRead{Total: 1, BulkMax: 1}); got != want {
		t.Errorf("grant of a lane of one slot = %+v, want %+v", got, want)
	}
}
