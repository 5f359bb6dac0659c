package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// delayedStat is the delayed set's row of shard 0's queue statistics at the env's clock.
func delayedStat(t *testing.T, e *env) stream.QueueStat {
	t.Helper()
	qs, err := e.store.QueueStats(context.Background(), 0, nil, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Stream == "delayed" {
			return q
		}
	}
	t.Fatal("no delayed row in the queue statistics")
	return stream.QueueStat{}
}

// TestScheduledJobIsSentAtItsSendAt: a job whose send_at is to come waits in the delayed set,
// due at its send_at (either format), is not sent a millisecond early, and goes out at its time
// with its class and the whole ttl; a send_at now or past, and no send_at, are sent at once.
func TestScheduledJobIsSentAtItsSendAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	start := e.clock.Now()
	in30, in90 := start.Add(30*time.Second), start.Add(90*time.Second)
	e.enqueue(
		job("at-30", sub, "x", "send_at", in30.UnixMilli(), "ttl", 60),
		job("at-90", sub, "x", "send_at", in90.UTC().Format(time.RFC3339Nano), "class", "bulk"),
		job("past", sub, "x", "send_at", start.Add(-time.Hour).UnixMilli()),
		job("now", sub, "x", "send_at", start.UnixMilli()),
		job("plain", sub, "x"),
	)
	e.start(e.config(e.store))

	for _, id := range []string{"past", "now", "plain"} {
		if r := e.waitRecord("results", id); r["code"] != "ACCEPTED" {
			t.Errorf("%s: %v, want ACCEPTED at once", id, r)
		}
	}
	var due30, due90 time.Time
	waitFor(t, "the scheduled jobs in the delayed set", func() bool {
		var ok30, ok90 bool
		due30, ok30 = e.delayedDue("at-30")
		due90, ok90 = e.delayedDue("at-90")
		return ok30 && ok90
	})
	if !due30.Equal(in30) || !due90.Equal(in90) {
		t.Errorf("due at +%v and +%v, want +30s and +90s", due30.Sub(start), due90.Sub(start))
	}
	if q := delayedStat(t, e); q.Scheduled != 2 || !q.NextSendAt.Equal(in30) || q.DueNow != 0 {
		t.Errorf("delayed row: %d scheduled, next send_at +%v, %d due; want 2, +30s, 0", q.Scheduled, q.NextSendAt.Sub(start), q.DueNow)
	}

	e.clock.Step(30*time.Second - time.Millisecond)
	if n := promoteNow(t, e); n != 0 {
		t.Errorf("%d scheduled jobs promoted 1 ms before their send_at", n)
	}
	time.Sleep(50 * time.Millisecond) // the worker's own promoter runs every 10 ms
	if n := len(e.deliveriesOf("at-30")); n != 0 {
		t.Fatalf("at-30 reached pushsim %d times before its send_at", n)
	}
	e.clock.Step(time.Millisecond)
	if r := e.waitRecord("results", "at-30"); r["code"] != "ACCEPTED" || r["attempt"] != "0" {
		t.Errorf("at-30: %v, want ACCEPTED at attempt 0", r)
	}
	ds := e.deliveriesOf("at-30")
	if len(ds) != 1 || ds[0].At.Before(in30) || ds[0].TTL != 60 {
		t.Errorf("at-30: %d requests, the first at +%v with TTL %d; want one at +30s with the whole ttl 60", len(ds), ds[0].At.Sub(start), ds[0].TTL)
	}
	if q := delayedStat(t, e); q.Scheduled != 1 || !q.NextSendAt.Equal(in90) {
		t.Errorf("after the first: %d scheduled, next +%v; want 1, +90s", q.Scheduled, q.NextSendAt.Sub(start))
	}
	if _, ok := e.delayedDue("at-90"); !ok {
		t.Error("at-90 left the delayed set 60 s early")
	}
	e.clock.Step(60 * time.Second)
	if r := e.waitRecord("results", "at-90"); r["code"] != "ACCEPTED" {
		t.Errorf("at-90: %v", r)
	}
	if ds := e.deliveriesOf("at-90"); len(ds) != 1 || ds[0].At.Before(in90) {
		t.Errorf("at-90: %d requests, want one at or after its send_at", len(ds))
	}
	if q := delayedStat(t, e); q.Scheduled != 0 || !q.NextSendAt.IsZero() || q.Entries != 0 {
		t.Errorf("after both: %+v, want an empty delayed set", q)
	}
	if d := e.all("dead"); len(d) != 0 {
		t.Errorf("dead records: %v", d)
	}
}

// TestScheduledJobIsSentPromptly runs on the real clock: a job scheduled a moment ahead reaches
// pushsim no sooner than its send_at and within the promoter's period and a send after it.
func TestScheduledJobIsSentPromptly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{wallClock: true})
	sub := e.subscribe(pushsim.FCM, e.key)
	cfg := e.config(e.store)
	cfg.PromoteEvery = 0 // the shipped period
	e.waitRunning(e.start(cfg))
	at := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
	e.enqueue(job("soon", sub, "x", "send_at", at.UnixMilli()))
	e.waitRecord("results", "soon")
	ds := e.deliveriesOf("soon")
	if len(ds) != 1 {
		t.Fatalf("%d requests, want 1", len(ds))
	}
	if late := ds[0].At.Sub(at); late < 0 || late > 2*time.Second {
		t.Errorf("received %v after its send_at; want between 0 and 2s", late)
	}
}

// TestScheduleBeyondTheHorizonIsDeadLettered: a send_at further out than MaxScheduleAhead is
// INVALID_JOB with the horizon named, the job kept whole to replay; one at the horizon waits.
func TestScheduleBeyondTheHorizonIsDeadLettered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	start := e.clock.Now()
	far := start.Add(2*time.Hour + 30*time.Second)
	farJob := job("far", sub, "x", "send_at", far.UnixMilli())
	e.enqueue(farJob, job("edge", sub, "x", "send_at", start.Add(time.Hour).UnixMilli()))
	cfg := e.config(e.store)
	cfg.MaxScheduleAhead = time.Hour
	e.start(cfg)

	d := e.waitRecord("dead", "far")
	want := "send_at: " + far.UTC().Format(time.RFC3339Nano) + " is 2h0m30s ahead; at most 1h0m0s (run --max-schedule-ahead)"
	if d["code"] != "INVALID_JOB" || d["reason"] != want || d["job"] != string(farJob) || d["note"] != "" {
		t.Errorf("dead record %v, want INVALID_JOB %q with the whole job", d, want)
	}
	waitFor(t, "edge in the delayed set", func() bool { _, ok := e.delayedDue("edge"); return ok })
	if n := len(e.sim.Deliveries()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

// TestScheduledJobTTLCountsFromSendAt: a scheduled job's ttl counts from its send_at, however
// long before it was enqueued; one that comes due after send_at + ttl is EXPIRED, not sent.
func TestScheduledJobTTLCountsFromSendAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	start := e.clock.Now()
	e.enqueue(
		// Enqueued an hour ago with a 5 s ttl: alive, since its ttl starts at its send_at.
		job("fresh", sub, "x", "send_at", start.Add(10*time.Second).UnixMilli(), "ttl", 5,
			"enqueued_at", start.Add(-time.Hour).UnixMilli()),
		// Due at +12 s with a 3 s ttl: expired from +15 s.
		job("late", sub, "x", "send_at", start.Add(12*time.Second).UnixMilli(), "ttl", 3),
	)
	e.start(e.config(e.store))
	waitFor(t, "both in the delayed set", func() bool {
		_, a := e.delayedDue("fresh")
		_, b := e.delayedDue("late")
		return a && b
	})
	e.clock.Step(10 * time.Second)
	if r := e.waitRecord("results", "fresh"); r["code"] != "ACCEPTED" {
		t.Errorf("fresh: %v, want ACCEPTED", r)
	}
	if ds := e.deliveriesOf("fresh"); len(ds) != 1 || ds[0].TTL != 5 {
		t.Errorf("fresh: %v, want one request with TTL 5", ds)
	}
	// The promoter finds late due only once its ttl has run out (a promoter that was down).
	e.clock.Step(5*time.Second + time.Millisecond)
	r := e.waitRecord("results", "late")
	if r["code"] != "EXPIRED" || r["detail"] != "ttl of 3s ran out in the queue before attempt 1; not sent" {
		t.Errorf("late: %v, want EXPIRED", r)
	}
	if n := len(e.deliveriesOf("late")); n != 0 {
		t.Errorf("late reached pushsim %d times", n)
	}
}

// TestScheduledJobsAreOutsideTheDelayedSetsCaps: scheduled jobs are neither refused by
// MaxDelayed and MaxPerRecipient nor counted toward them: a retry of the same provider and
// recipient still finds room, and nothing is dead-lettered.
func TestScheduledJobsAreOutsideTheDelayedSetsCaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.Apple, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	start := e.clock.Now()
	var ids []string
	for _, id := range []string{"sched-a", "sched-b", "sched-c"} {
		ids = append(ids, id)
		e.enqueue(job(id, sub, "x", "send_at", start.Add(time.Minute).UnixMilli(), "recipient", "alice"))
	}
	cfg := e.config(e.store)
	cfg.MaxDelayed, cfg.MaxPerRecipient = 1, 1
	e.start(cfg)
	waitFor(t, "the scheduled jobs in the delayed set", func() bool {
		for _, id := range ids {
			if _, ok := e.delayedDue(id); !ok {
				return false
			}
		}
		return true
	})
	e.enqueue(job("retry", sub, "x", "recipient", "alice"))
	waitDelayed(t, e, "retry", 1)
	if d := e.all("dead"); len(d) != 0 {
		t.Fatalf("dead records: %v", d)
	}
	setFault(t, e, pushsim.Apple, pushsim.Fault{})
	e.clock.Step(time.Minute)
	for _, id := range append(ids, "retry") {
		if r := e.waitRecord("results", id); r["code"] != "ACCEPTED" {
			t.Errorf("%s: %v", id, r)
		}
	}
	if d := e.all("dead"); len(d) != 0 {
		t.Errorf("dead records: %v", d)
	}
	if logs := e.logs.String(); strings.Contains(logs, "delayed set is full") {
		t.Error("the log reports a full delayed set")
	}
}
