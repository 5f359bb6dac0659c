package crash_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// TestWorkersKilledLoseNoCampaignRecipient: a paced campaign to subscriptions of the listed
// providers, and workers SIGKILLed while its recipients are expanded and sent. Every recipient
// ends with exactly one terminal record: those waiting in the campaign's lists, in a lane,
// pending for a killed worker or waiting to retry are all picked up, and status counts what
// the ledger holds.
func TestWorkersKilledLoseNoCampaignRecipient(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t)
	const recipients, kills = 900, 5
	subs := c.campaignSubscriptions(225)
	ctx := context.Background()
	c.startWorkers(crashWorkers)
	id, err := c.producer.CreateCampaign(ctx, []byte(`{"id":"crash","payload":"to all","ttl":3600,"rate":300}`))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.producer.AddRecipients(ctx, id, subs...); err != nil || n != recipients {
		t.Fatalf("AddRecipients: %d, %v", n, err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	for k := range kills {
		time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
		c.killAndReplace(rng.IntN(crashWorkers))
		t.Logf("kill %d done", k+1)
	}
	ids := make([]string, recipients)
	for i := range ids {
		ids[i] = job.RecipientJobID(id, int64(i+1))
	}
	c.requireOneRecordEach(ids, 2*time.Minute)
	dups, delivered := c.duplicates()
	t.Logf("%d recipients, %d kills, %d duplicate sends", recipients, kills, dups)
	if bound := kills * inFlightPerProvider * 5; dups > bound {
		t.Fatalf("%d duplicate sends after %d kills; at most %d allowed", dups, kills, bound)
	}
	if len(delivered) != recipients {
		t.Fatalf("pushsim accepted %d distinct recipients, want %d", len(delivered), recipients)
	}
	st, err := c.store.Campaign(ctx, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.Added != recipients || st.Done != recipients || st.Queued != 0 || st.InLanes != 0 || st.Finished["ACCEPTED"] != recipients {
		t.Fatalf("status %+v, want all %d ACCEPTED and nothing left", st, recipients)
	}
}

// campaignSubscriptions are perProvider pushsim subscriptions of each listed provider, as
// the JSON a campaign's recipients are.
func (c *cluster) campaignSubscriptions(perProvider int) [][]byte {
	c.t.Helper()
	var subs [][]byte
	for _, p := range []string{"fcm", "autopush", "apple", "wns"} {
		for range perProvider {
			s, err := c.sim.Subscribe(p, "", c.subscribeKey)
			if err != nil {
				c.t.Fatal(err)
			}
			subs = append(subs, mustJSON(c.t, s))
		}
	}
	return subs
}

// TestRedisKilledLosesNoCampaignRecipient: Redis killed and restarted three times while a
// paced campaign is expanded and sent, its recipients added in batches meanwhile. Every
// recipient the producer wrote ends with exactly one terminal record: the campaign's lists and
// counts are in the AOF with the rest, and each expansion is one script.
func TestRedisKilledLosesNoCampaignRecipient(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t)
	ctx := context.Background()
	subs := c.campaignSubscriptions(150)
	c.startWorkers(crashWorkers)
	id, err := c.producer.CreateCampaign(ctx, []byte(`{"id":"outage","payload":"to all","ttl":3600,"rate":250}`))
	if err != nil {
		t.Fatal(err)
	}
	added := make(chan error, 1)
	go func() { // owned by the test, which receives from added below
		for i := 0; i < len(subs); i += 50 {
			for {
				_, err := c.producer.AddRecipients(ctx, id, subs[i:min(i+50, len(subs))]...)
				if err == nil {
					break
				}
				// Redis is down for a moment: the producer retries, as an upstream would. A
				// batch written twice adds its recipients twice; the count below is Redis's.
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
		}
		added <- nil
	}()
	for k := range 3 {
		time.Sleep(400 * time.Millisecond)
		c.redis.Kill()
		time.Sleep(200 * time.Millisecond)
		c.redis.Restart()
		t.Logf("redis restart %d done", k+1)
	}
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	var ids []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		ids, err = c.store.CampaignRecipientIDs(ctx, id)
		if err == nil && len(ids) >= len(subs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the campaign has %d recipients (%v), want at least the %d written", len(ids), err, len(subs))
		}
		time.Sleep(200 * time.Millisecond) // polling Redis for a state, not waiting for an event
	}
	c.requireOneRecordEach(ids, 2*time.Minute)
	st, err := c.store.Campaign(ctx, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.Done != int64(len(ids)) || st.Queued != 0 || st.InLanes != 0 {
		t.Fatalf("status %+v, want all %d done", st, len(ids))
	}
}
