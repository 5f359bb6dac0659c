package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// BenchmarkCampaignMillion: one campaign of 1,000,000 FCM recipients behind a paused FCM, as
// a sender enqueues one before its push service takes them. It reports how long the producer
// took to write the recipients (enqueue-s), how long until the worker had routed every one
// into the campaign's list (routed-s), and what Redis holds for each waiting recipient
// (INFO memory, clients' buffers left out) beyond its subscription's own bytes. AOF is off:
// the figures are Redis's, not the disk's.
//
//	go test -run XXX -bench CampaignMillion -benchtime 1x ./dispatch/
func BenchmarkCampaignMillion(b *testing.B) {
	const n = 1_000_000
	e := newEnv(b, envOptions{redis: []redistest.Option{redistest.WithConfig("appendonly", "no")}})
	ctx := context.Background()
	if err := e.inspector().PauseProvider(ctx, inspect.Pause{Provider: "fcm", Reason: "bench", At: e.clock.Now()}); err != nil {
		b.Fatal(err)
	}
	e.start(e.config(e.store))
	waitFor(b, "the pause seen", func() bool { return strings.Contains(e.logs.String(), "provider paused by an operator") })
	subs := make([][]byte, n)
	subBytes := 0
	for i := range subs {
		subs[i], _ = json.Marshal(fakeSubscription(b, "fcm.googleapis.com", i))
		subBytes += len(subs[i])
	}
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("million-%d", i)
		raw, _ := json.Marshal(map[string]any{"id": id, "payload": strings.Repeat("x", 1024), "ttl": 86400})
		if _, err := e.prod.CreateCampaign(ctx, raw); err != nil {
			b.Fatal(err)
		}
		base := e.usedMemory()
		start := time.Now()
		if _, err := e.prod.AddRecipients(ctx, id, subs...); err != nil {
			b.Fatal(err)
		}
		enqueued := time.Since(start)
		deadline := time.Now().Add(10 * time.Minute)
		for {
			st, err := e.inspector().Campaign(ctx, id, time.Now())
			if err == nil && st.Queued == n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("not routed after 10 minutes: %+v, %v", st, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		routed := time.Since(start)
		grown := e.usedMemory() - base
		b.ReportMetric(enqueued.Seconds(), "enqueue-s")
		b.ReportMetric(routed.Seconds(), "routed-s")
		b.ReportMetric(float64(subBytes)/n, "sub-bytes/recipient")
		b.ReportMetric(float64(grown)/n, "redis-bytes/recipient")
		b.ReportMetric(float64(grown-int64(subBytes))/n, "beyond-sub-bytes/recipient")
		if _, err := e.inspector().CancelCampaign(ctx, id, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSmallCampaignBesideABigOne: how long a campaign of 100 FCM recipients takes from its
// create entry to its last record, alone (small-alone-s) and created once a campaign of 3,000
// keeps FCM's lane full (small-beside-s), with FCM at 200 sends a second and a lane depth of
// 200; and how much of the big one had been sent by then (big-sent-share).
//
//	go test -run '^$' -bench SmallCampaignBesideABigOne -benchtime 1x -count 3 ./dispatch/
func BenchmarkSmallCampaignBesideABigOne(b *testing.B) {
	for b.Loop() {
		alone, _ := smallCampaignTime(b, 0, 1)
		beside, share := smallCampaignTime(b, 3000, 1)
		b.ReportMetric(alone.Seconds(), "small-alone-s")
		b.ReportMetric(beside.Seconds(), "small-beside-s")
		b.ReportMetric(share, "big-sent-share")
	}
}

// smallCampaignTime runs a campaign of 100 FCM recipients in an env of its own of shards
// shards, with FCM at 200 sends a second and a lane depth of 200, after one of big recipients
// on the same shard has started sending (none: alone), and returns how long it took from its
// create entry to its last record and the share of the big one sent by then. With more than
// one shard, a third campaign of 3,000 runs on another shard meanwhile.
func smallCampaignTime(tb testing.TB, big, shards int) (time.Duration, float64) {
	e := newEnv(tb, envOptions{shards: shards, wallClock: true, registry: testRegistry(map[string]string{"fcm": "rate: 200\nburst: 20"})})
	cfg := e.config(e.store)
	cfg.CampaignLaneDepth = 200
	e.start(cfg)
	home := shards - 1
	if shards > 1 {
		other := e.createCampaign(map[string]any{"id": campaignIDOn("other", 0, shards), "payload": "p"})
		e.addRecipients(other, e.subscriptions(pushsim.FCM, 3000)...)
	}
	bigID := campaignIDOn("big", home, shards)
	if big > 0 {
		e.createCampaign(map[string]any{"id": bigID, "payload": "p"})
		e.addRecipients(bigID, e.subscriptions(pushsim.FCM, big)...)
		waitFor(tb, "the big campaign sending", func() bool { return e.campaignStatus(bigID).Finished["ACCEPTED"] >= 100 })
	}
	subs := e.subscriptions(pushsim.FCM, 100)
	start := time.Now()
	small := e.createCampaign(map[string]any{"id": campaignIDOn("small", home, shards), "payload": "p"})
	e.addRecipients(small, subs...)
	waitFor(tb, "the small campaign sent", func() bool { return e.campaignStatus(small).Finished["ACCEPTED"] == 100 })
	took := time.Since(start)
	if big == 0 {
		return took, 0
	}
	return took, float64(e.campaignStatus(bigID).Finished["ACCEPTED"]) / float64(big)
}
