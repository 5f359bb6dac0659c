package dispatch

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// recipientBacklog seeds apple's lane with backlog entries for one recipient (alice) and then
// one entry for each of others recipients, runs a worker until all are accepted (apple
// answers each request after hold, alice may have 2 in flight) and returns when each job was
// first sent and how many times an entry went to the delayed set.
func recipientBacklog(t *testing.T, backlog, others int, hold time.Duration) (sentAt map[string]time.Time, delayed int64) {
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{
		"apple": "max_in_flight: 16\nper_recipient_in_flight: 2",
	})})
	sub := e.subscribe(pushsim.Apple, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Slow, Delay: hold})
	if err := e.store.Setup(context.Background(), []string{"apple"}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range backlog {
		id := fmt.Sprintf("alice-%05d", i)
		e.laneEntry("apple", 0, job(id, sub, "x", "recipient", "alice"))
		ids = append(ids, id)
	}
	for i := range others {
		id := fmt.Sprintf("other-%03d", i)
		e.laneEntry("apple", 0, job(id, sub, "x", "recipient", fmt.Sprintf("user-%03d", i)))
		ids = append(ids, id)
	}
	e.redis.ResetStats(t)
	e.start(e.config(e.store))
	e.waitAccepted(ids)
	stats := e.redis.CommandStats(t)
	sentAt = map[string]time.Time{}
	for _, d := range e.sim.Deliveries() {
		if at, ok := sentAt[d.JobID]; !ok || d.At.Before(at) {
			sentAt[d.JobID] = d.At
		}
	}
	for _, id := range ids {
		if r := e.one("results", id); r["attempt"] != "0" {
			t.Errorf("%s recorded at attempt %s, want 0: waiting for the recipient is not an attempt", id, r["attempt"])
		}
		if n := len(e.deliveriesOf(id)); n != 1 {
			t.Errorf("%s sent %d times, want once", id, n)
		}
	}
	// The delayed set's ZADDs, less the heartbeat's (one each, with its one ZREMRANGEBYSCORE).
	return sentAt, stats["zadd"] - stats["zremrangebyscore"]
}

// aliceSends are the times alice's jobs were first sent, in order.
func aliceSends(sentAt map[string]time.Time) []time.Time {
	var out []time.Time
	for id, at := range sentAt {
		if strings.HasPrefix(id, "alice-") {
			out = append(out, at)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// TestRecipientOverCapDoesNotHoldTheOthers: a recipient with a backlog far over its in-flight
// cap keeps its excess waiting in Redis (the delayed set), each entry back in its turn as her
// cap lets her sends go, so the other recipients' jobs behind her backlog in the lane are sent
// at once, not after it; every job goes once, at attempt 0, and her entries go back to the
// delayed set a bounded number of times, not once per read until her turn.
func TestRecipientOverCapDoesNotHoldTheOthers(t *testing.T) {
	const backlog, others, hold = 200, 50, 10 * time.Millisecond
	sentAt, delayed := recipientBacklog(t, backlog, others, hold)
	alice := aliceSends(sentAt)
	t.Logf("%d jobs: %d put-backs to the delayed set; alice's sends took %v", backlog+others, delayed, alice[len(alice)-1].Sub(alice[0]))
	if delayed > 3*backlog {
		t.Errorf("%d put-backs for a backlog of %d; want each entry back in its turn, at most 3 times", delayed, backlog)
	}
	// alice goes 2 at a time, hold each: her 50th send is a quarter of a second in at the least.
	mark := alice[49]
	for i := range others {
		id := fmt.Sprintf("other-%03d", i)
		if at, ok := sentAt[id]; !ok || !at.Before(mark) {
			t.Errorf("%s was sent %v after alice's first send, after her 50th: it waited behind her backlog", id, at.Sub(alice[0]))
		}
	}
}
