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
// answers each request after hold, alice may have 2 in flight) and returns the Redis commands
// the run cost, when each job was first sent, and how many entries went to the delayed set.
func recipientBacklog(t *testing.T, backlog, others int, hold time.Duration) (commands int64, sentAt map[string]time.Time, delayed int64) {
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
	for name, n := range stats {
		if name != "info" && name != "config|resetstat" {
			commands += n
		}
	}
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
	}
	// The delayed set's ZADDs, less the heartbeat's (one each, with its one ZREMRANGEBYSCORE).
	return commands, sentAt, stats["zadd"] - stats["zremrangebyscore"]
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

// TestRecipientOverCapWaitsWithoutChurn: a recipient with a backlog far over its in-flight cap
// has its excess wait in the lane's parking, not bounced lane -> delayed set -> lane (no entry
// goes to the delayed set, and the log gives Redis's commands a send, background loops
// included), and the other recipients' jobs behind the backlog in the lane are sent at once,
// not after it.
func TestRecipientOverCapWaitsWithoutChurn(t *testing.T) {
	const backlog, others, hold = 200, 50, 10 * time.Millisecond
	commands, sentAt, delayed := recipientBacklog(t, backlog, others, hold)
	perSend := float64(commands) / float64(backlog+others)
	t.Logf("%d jobs: %d Redis commands, %.1f a send; %d to the delayed set", backlog+others, commands, perSend, delayed)
	if delayed != 0 {
		t.Errorf("%d entries went to the delayed set; an entry over its recipient's cap waits in the lane", delayed)
	}
	alice := aliceSends(sentAt)
	// alice goes 2 at a time, hold each: her 50th send is about a quarter of a second in.
	mark := alice[49]
	for i := range others {
		id := fmt.Sprintf("other-%03d", i)
		if at, ok := sentAt[id]; !ok || !at.Before(mark) {
			t.Errorf("%s was sent %v after alice's first send, after her 50th: it waited behind her backlog", id, at.Sub(alice[0]))
		}
	}
}

// TestRecipientOverflowPastTheParking: past the parking's bound an entry goes to the delayed
// set once, due about when the entries ahead of it have gone, not back every second.
func TestRecipientOverflowPastTheParking(t *testing.T) {
	// Restored once the worker has stopped: cleanups run last registered first.
	was := parkMax
	t.Cleanup(func() { parkMax = was })
	parkMax = 50
	const backlog, others, hold = 200, 20, 10 * time.Millisecond
	commands, sentAt, delayed := recipientBacklog(t, backlog, others, hold)
	t.Logf("%d jobs: %d Redis commands, %.1f a send; %d to the delayed set", backlog+others, commands,
		float64(commands)/float64(backlog+others), delayed)
	// At most the entries the parking could not hold, and about once each (the estimate of
	// their turn errs both ways).
	if over := int64(backlog - parkMax); delayed > 2*over {
		t.Errorf("%d entries to the delayed set for %d that the parking could not hold, want at most %d", delayed, over, 2*over)
	}
	alice := aliceSends(sentAt)
	for i := range others {
		id := fmt.Sprintf("other-%03d", i)
		if at, ok := sentAt[id]; !ok || !at.Before(alice[49]) {
			t.Errorf("%s was sent %v after alice's first send, after her 50th: it waited behind her backlog", id, at.Sub(alice[0]))
		}
	}
}
