package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func setFault(t *testing.T, e *env, provider string, f pushsim.Fault) {
	t.Helper()
	if err := e.sim.SetFault(provider, f); err != nil {
		t.Fatal(err)
	}
}

// promoteNow runs one promotion at the current clock, as any replica's promoter would, and
// returns how many retries it moved.
func promoteNow(t *testing.T, e *env) int {
	t.Helper()
	n, err := e.store.PromoteDue(context.Background(), 0, e.clock.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitDelayed waits for id to be in the delayed set after n requests reached pushsim, and
// returns its due time.
func waitDelayed(t *testing.T, e *env, id string, n int) time.Time {
	t.Helper()
	var due time.Time
	waitFor(t, id+" in the delayed set", func() bool {
		var ok bool
		due, ok = e.delayedDue(id)
		return ok && len(e.deliveriesOf(id)) == n
	})
	return due
}

func TestProviderDownGoesToDelayedThenDelivers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.Apple, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503}) // no Retry-After
	start := e.clock.Now()
	ids := []string{"down-1", "down-2", "down-3"}
	for _, id := range ids {
		e.enqueue(job(id, sub, "text of "+id))
	}
	e.start(e.config(e.store)) // Rand 0.5: half of the 5 s first ceiling

	for _, id := range ids {
		if due := waitDelayed(t, e, id, 1); !due.Equal(start.Add(2500 * time.Millisecond)) {
			t.Errorf("%s due at +%v, want +2.5s", id, due.Sub(start))
		}
	}
	if n := len(e.all("results")); n != 0 {
		t.Errorf("%d ledger records for jobs that are only waiting", n)
	}
	e.clock.Step(2499 * time.Millisecond)
	if n := promoteNow(t, e); n != 0 {
		t.Errorf("%d retries promoted 1 ms before they are due", n)
	}
	setFault(t, e, pushsim.Apple, pushsim.Fault{})
	e.clock.Step(time.Millisecond)
	for _, id := range ids {
		r := e.waitRecord("results", id)
		if r["code"] != "ACCEPTED" || r["attempt"] != "1" {
			t.Errorf("%s: %v, want ACCEPTED at attempt 1", id, r)
		}
		ds := e.deliveriesOf(id)
		if len(ds) != 2 || ds[0].Code != "PROVIDER_DOWN" || ds[1].Code != "ACCEPTED" {
			t.Errorf("%s: pushsim saw %d requests, want the 503 then the accepted one", id, len(ds))
		}
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	fcm := e.subscribe(pushsim.FCM, e.key)
	wns := e.subscribe(pushsim.WNS, e.key)
	setFault(t, e, pushsim.FCM, pushsim.Fault{Kind: pushsim.Fail, Status: 503})                      // FCM's 503 carries Retry-After: 10
	setFault(t, e, pushsim.WNS, pushsim.Fault{Kind: pushsim.Throttle, RetryAfter: 90 * time.Second}) // 406 + Retry-After: 90
	start := e.clock.Now()
	e.enqueue(job("after-10", fcm, "a"), job("after-90", wns, "b"))
	e.start(e.config(e.store))

	if due := waitDelayed(t, e, "after-10", 1); !due.Equal(start.Add(10 * time.Second)) {
		t.Errorf("FCM 503 retry due at +%v, want +10s (Retry-After beats the 2.5 s backoff)", due.Sub(start))
	}
	if due := waitDelayed(t, e, "after-90", 1); !due.Equal(start.Add(90 * time.Second)) {
		t.Errorf("WNS 406 retry due at +%v, want +90s", due.Sub(start))
	}
	setFault(t, e, "*", pushsim.Fault{})
	e.clock.Step(10*time.Second - time.Millisecond)
	if n := promoteNow(t, e); n != 0 {
		t.Errorf("%d retries promoted before their Retry-After", n)
	}
	e.clock.Step(time.Millisecond)
	if r := e.waitRecord("results", "after-10"); r["code"] != "ACCEPTED" || r["attempt"] != "1" {
		t.Errorf("after-10: %v", r)
	}
	if _, ok := e.delayedDue("after-90"); !ok {
		t.Error("after-90 left the delayed set 80 s early")
	}
	e.clock.Step(80 * time.Second)
	if r := e.waitRecord("results", "after-90"); r["code"] != "ACCEPTED" || r["attempt"] != "1" {
		t.Errorf("after-90: %v", r)
	}
}

func TestTTLExpiryIsNeverSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	fcm := e.subscribe(pushsim.FCM, e.key)
	apple := e.subscribe(pushsim.Apple, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	e.enqueue(
		// Queued two hours with a one-hour TTL.
		job("stale", fcm, "x", "ttl", 3600, "enqueued_at", e.clock.Now().Add(-2*time.Hour).UnixMilli()),
		// Fails with 2 s left; the retry would be due in 2.5 s.
		job("short", apple, "x", "ttl", 2),
		// Fails, waits 2.5 s in the delayed set, but the clock moves 11 s.
		job("waits", apple, "x", "ttl", 10),
	)
	e.start(e.config(e.store))

	r := e.waitRecord("results", "stale")
	if r["code"] != "EXPIRED" || r["detail"] != "ttl of 3600s ran out in the queue before attempt 1; not sent" {
		t.Errorf("stale: %v", r)
	}
	r = e.waitRecord("results", "short")
	if r["code"] != "EXPIRED" || !strings.HasPrefix(r["detail"], "ttl ends before attempt 2 could be made; last attempt: PROVIDER_DOWN 503") {
		t.Errorf("short: %v", r)
	}
	waitDelayed(t, e, "waits", 1)
	setFault(t, e, pushsim.Apple, pushsim.Fault{})
	e.clock.Step(11 * time.Second)
	r = e.waitRecord("results", "waits")
	if r["code"] != "EXPIRED" || r["attempt"] != "1" || r["detail"] != "ttl of 10s ran out in the queue before attempt 2; not sent" {
		t.Errorf("waits: %v", r)
	}
	for id, want := range map[string]int{"stale": 0, "short": 1, "waits": 1} {
		if n := len(e.deliveriesOf(id)); n != want {
			t.Errorf("%s: pushsim saw %d requests, want %d", id, n, want)
		}
	}
}

func TestAttemptsExhaustedGoToDead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.Apple, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	e.enqueue(job("doomed", sub, "x"))
	cfg := e.config(e.store)
	cfg.Backoff = Backoff{Base: time.Second, Cap: 4 * time.Second, MaxRetries: 2}
	e.start(cfg)

	for n := 1; n <= 2; n++ {
		waitDelayed(t, e, "doomed", n)
		e.clock.Step(cfg.Backoff.Cap)
	}
	d := e.waitRecord("dead", "doomed")
	if d["code"] != "PROVIDER_DOWN" || d["attempt"] != "2" || d["provider"] != "apple" ||
		!strings.HasPrefix(d["reason"], "gave up after 3 attempts: PROVIDER_DOWN 503") {
		t.Errorf("dead record %v", d)
	}
	if n := len(e.deliveriesOf("doomed")); n != 3 {
		t.Errorf("pushsim saw %d requests, want 3", n)
	}
	if rs := e.byID("results")["doomed"]; len(rs) != 0 {
		t.Errorf("ledger records for a dead job: %v", rs)
	}
}

func TestDelayedSetCapsDeadLetterWithReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		configure  func(*Config)
		recipients []string
		reason     string
	}{
		{"per recipient", func(c *Config) { c.MaxPerRecipient = 1 }, []string{"alice", "alice", "bob"},
			"recipient alice has 1 jobs waiting to retry"},
		{"global", func(c *Config) { c.MaxDelayed = 2 }, []string{"carol", "dave", "erin"},
			"delayed set is full for apple (2 retries waiting); not retried"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			sub := e.subscribe(pushsim.Apple, e.key)
			setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
			for i, r := range tc.recipients {
				e.enqueue(job(tc.name+string(rune('a'+i)), sub, "x", "recipient", r))
			}
			cfg := e.config(e.store)
			tc.configure(&cfg)
			e.start(cfg)

			queued := func() int {
				n := 0
				for i := range tc.recipients {
					if _, ok := e.delayedDue(tc.name + string(rune('a'+i))); ok {
						n++
					}
				}
				return n
			}
			waitFor(t, "two jobs waiting, one refused", func() bool { return len(e.all("dead")) == 1 && queued() == 2 })
			d := e.all("dead")[0]
			if d["reason"] != tc.reason || d["code"] != "PROVIDER_DOWN" || d["attempt"] != "0" {
				t.Errorf("dead record %v, want reason %q", d, tc.reason)
			}
			if n := len(e.all("results")); n != 0 {
				t.Errorf("%d ledger records, want none", n)
			}
		})
	}
}

func TestRetryToEndpointGoneMeanwhileIsDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.Apple, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	e.enqueue(job("first", sub, "x"))
	e.start(e.config(e.store))
	waitDelayed(t, e, "first", 1)

	// While it waits, a later job to the same subscription learns that it is gone.
	setFault(t, e, pushsim.Apple, pushsim.Fault{})
	e.sim.Expire(sub.Endpoint)
	e.enqueue(job("later", sub, "y"))
	if r := e.waitRecord("results", "later"); r["code"] != "GONE" {
		t.Fatalf("later: %v, want GONE", r)
	}
	e.clock.Step(5 * time.Second)
	r := e.waitRecord("results", "first")
	if r["code"] != "GONE" || r["detail"] != goneMeanwhile || r["attempt"] != "1" {
		t.Errorf("first: %v, want GONE %q at attempt 1", r, goneMeanwhile)
	}
	if n := len(e.deliveriesOf("first")); n != 1 {
		t.Errorf("pushsim saw %d requests for the dropped retry, want only the first", n)
	}
	if gs := e.byID("gone"); len(gs["later"]) != 1 || len(gs["first"]) != 0 {
		t.Errorf("gone stream: %d records for later, %d for first; want 1 and 0", len(gs["later"]), len(gs["first"]))
	}
}

// TestRetryToEndpointAfterKeyMismatchIsSent: KEY_MISMATCH tells the upstream (gone stream) but
// does not mark the endpoint gone, so a retry to it signed with the right key is still sent
// rather than dropped as "reported gone meanwhile".
func TestRetryToEndpointAfterKeyMismatchIsSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	other, err := vapid.GenerateKey("other")
	if err != nil {
		t.Fatal(err)
	}
	sub := e.subscribe(pushsim.FCM, other) // made with the "other" key
	setFault(t, e, pushsim.FCM, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	e.enqueue(job("right-key", sub, "x", "vapid_key", "other"))
	cfg := e.config(e.store)
	cfg.Keys["other"] = other
	e.start(cfg)
	due := waitDelayed(t, e, "right-key", 1)

	// While it waits, a job signed with the wrong key learns that the keys do not match.
	setFault(t, e, pushsim.FCM, pushsim.Fault{})
	e.enqueue(job("wrong-key", sub, "y"))
	if r := e.waitRecord("results", "wrong-key"); r["code"] != "KEY_MISMATCH" {
		t.Fatalf("wrong-key: %v, want KEY_MISMATCH", r)
	}
	e.clock.Step(due.Sub(e.clock.Now()) + time.Second) // FCM's 503 may carry a Retry-After
	if r := e.waitRecord("results", "right-key"); r["code"] != "ACCEPTED" || r["attempt"] != "1" {
		t.Errorf("right-key: %v, want ACCEPTED at attempt 1", r)
	}
	if n := len(e.deliveriesOf("right-key")); n != 2 {
		t.Errorf("pushsim saw %d requests for right-key, want 2", n)
	}
	if gs := e.byID("gone"); len(gs["wrong-key"]) != 1 || len(gs["right-key"]) != 0 {
		t.Errorf("gone stream: %d records for wrong-key, %d for right-key; want 1 and 0", len(gs["wrong-key"]), len(gs["right-key"]))
	}
}

// TestCopiesOfAHeldJobEndWithNoRecordOfTheirOwn: copies of a job enqueued while it waits to
// retry, and while it is in flight, are acknowledged at intake with no record: the job ends
// with exactly one terminal record and the copies send nothing.
func TestCopiesOfAHeldJobEndWithNoRecordOfTheirOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.Apple, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	j := job("twice", sub, "x")
	e.enqueue(j)
	e.start(e.config(e.store))
	waitDelayed(t, e, "twice", 1)

	// Two copies while the first waits to retry.
	e.enqueue(j, j)
	waitFor(t, "the copies acknowledged", func() bool { return e.xlen(e.store.Keys(0).Intake) == 0 })
	// And one while it is in flight: the retry hangs until the copy is in.
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Slow, Delay: time.Second})
	e.clock.Step(time.Minute)
	waitFor(t, "the retry in flight", func() bool { return e.sim.Stats().InFlight == 1 })
	e.enqueue(j)
	waitFor(t, "the copy acknowledged", func() bool { return e.xlen(e.store.Keys(0).Intake) == 0 })

	if r := e.waitRecord("results", "twice"); r["code"] != "ACCEPTED" || r["attempt"] != "1" {
		t.Errorf("ledger %v, want ACCEPTED at attempt 1", r)
	}
	waitFor(t, "nothing left", e.queuesEmpty)
	if n := len(e.byID("results")["twice"]) + len(e.byID("dead")["twice"]); n != 1 {
		t.Errorf("%d terminal records, want 1", n)
	}
	if n := len(e.deliveriesOf("twice")); n != 2 {
		t.Errorf("pushsim saw %d requests, want 2 (the 503 and the retry): copies must send nothing", n)
	}
}

// TestOneProvidersRetriesDoNotPushOutAnothers: apple's failing jobs fill apple's cap on the
// delayed set (--max-delayed 2), and the third is dead-lettered naming apple; autopush's retry
// beside them still goes to the delayed set, not to dead.
func TestOneProvidersRetriesDoNotPushOutAnothers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	apple := e.subscribe(pushsim.Apple, e.key)
	autopush := e.subscribe(pushsim.Autopush, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	setFault(t, e, pushsim.Autopush, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	for _, id := range []string{"apple-a", "apple-b", "apple-c"} {
		e.enqueue(job(id, apple, "x"))
	}
	cfg := e.config(e.store)
	cfg.MaxDelayed = 2
	e.start(cfg)
	waitFor(t, "apple's cap full and one apple retry refused", func() bool { return len(e.all("dead")) == 1 })
	e.enqueue(job("autopush-a", autopush, "x"))
	waitFor(t, "autopush's retry in the delayed set", func() bool {
		_, ok := e.delayedDue("autopush-a")
		return ok || len(e.all("dead")) > 1
	})
	if d := e.all("dead"); len(d) != 1 {
		t.Errorf("dead records %v; want only apple's one", d)
	}
	if _, ok := e.delayedDue("autopush-a"); !ok {
		t.Error("autopush's retry is not in the delayed set")
	}
	if d := e.all("dead")[0]; d["reason"] != "delayed set is full for apple (2 retries waiting); not retried" || d["provider"] != "apple" {
		t.Errorf("dead record %v; want apple's refused retry, naming apple", d)
	}
}
