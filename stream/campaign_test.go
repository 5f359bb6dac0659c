package stream

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

func testSubJSON() string {
	return `{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}`
}

// campaignEntry writes raw to shard 0's intake and reads it back for s, as intake does.
func (e *env) campaignEntry(t *testing.T, s *Store, raw string) Entry {
	t.Helper()
	e.enqueue(t, s, raw)
	return e.readIntake(t, s, 1)[0]
}

func (e *env) createCampaign(t *testing.T, s *Store, raw string) (*job.Campaign, CreateVerdict) {
	t.Helper()
	c, err := job.DecodeCampaign(raw, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := CampaignsOf(s).Create(e.ctx, e.campaignEntry(t, s, raw), c, raw, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c, v
}

func (e *env) addRecipients(t *testing.T, s *Store, id string, rs ...RoutedRecipient) int64 {
	t.Helper()
	return e.addBatch(t, s, id, "", rs...)
}

func (e *env) addBatch(t *testing.T, s *Store, id, batch string, rs ...RoutedRecipient) int64 {
	t.Helper()
	first, err := CampaignsOf(s).Add(e.ctx, e.campaignEntry(t, s, `{"add_recipients":{}}`), id, batch, rs, time.Now())
	if err != nil || first == 0 {
		t.Fatalf("Add: %d, %v", first, err)
	}
	return first
}

func fcmRecipients(n int, key string) []RoutedRecipient {
	rs := make([]RoutedRecipient, n)
	for i := range rs {
		rs[i] = RoutedRecipient{Provider: "fcm", Key: key, Compact: testSubJSON()}
	}
	return rs
}

// TestCampaignCreateOnce: a create entry makes the campaign; a copy of it is acknowledged
// with no record; another campaign under the same id is dead-lettered with why; an entry no
// longer ours changes nothing.
func TestCampaignCreateOnce(t *testing.T) {
	e, s := newStore(t, "fcm")
	raw := `{"create_campaign":{"id":"c1","payload":"hi"}}`
	if _, v := e.createCampaign(t, s, raw); v != Created {
		t.Fatalf("first create: %v", v)
	}
	if _, v := e.createCampaign(t, s, raw); v != CreateCopy {
		t.Fatalf("a copy: %v, want CreateCopy", v)
	}
	if _, v := e.createCampaign(t, s, `{"create_campaign":{"id":"c1","payload":"other"}}`); v != CreateConflict {
		t.Fatalf("another message under the id: %v, want CreateConflict", v)
	}
	dead := e.entries(t, s.Keys(0).Dead)
	if len(dead) != 1 || !strings.Contains(fieldsOf(dead[0])["reason"], "campaign c1 exists with another message") {
		t.Errorf("dead records %v", dead)
	}
	if n := e.xlen(t, s.Keys(0).Intake); n != 0 {
		t.Errorf("%d intake entries left", n)
	}
	c, _ := job.DecodeCampaign(raw, time.Now())
	if v, err := CampaignsOf(s).Create(e.ctx, Entry{Stream: s.Keys(0).Intake, ID: "1-1", Shard: 0}, c, raw, time.Now()); err != nil || v != CreateNotOwner {
		t.Errorf("an entry not ours: %v, %v", v, err)
	}
}

// TestCampaignExpandMakesTheJobs: recipients added before the campaign wait; once it exists
// they are expanded into the provider's lane of the campaign's class as jobs that decode to the
// campaign's message with each recipient's id, key and subscription, in the jobs index, and
// the list shrinks; the lane depth bounds each call.
func TestCampaignExpandMakesTheJobs(t *testing.T) {
	e, s := newStore(t, "fcm")
	ops := CampaignsOf(s)
	first := e.addRecipients(t, s, "c2", append(fcmRecipients(3, "u-1"), fcmRecipients(2, "")...)...)
	if first != 1 {
		t.Fatalf("first recipient numbered %d, want 1", first)
	}
	if x, err := ops.Expand(e.ctx, 0, "c2", "fcm", job.ClassBulk, 100, 1000, false); err != nil || x.Moved != 0 || x.Why != "not_created" || x.Left != 5 {
		t.Fatalf("before the create: %+v, %v", x, err)
	}
	c, _ := e.createCampaign(t, s, `{"create_campaign":{"id":"c2","payload":"hello","ttl":30}}`)
	lane := s.Keys(0).LaneOf("fcm", job.ClassBulk)
	x, err := ops.Expand(e.ctx, 0, "c2", "fcm", job.ClassBulk, 100, 2, false)
	if err != nil || x.Moved != 2 || x.Left != 3 {
		t.Fatalf("expand to a depth of 2: %+v, %v", x, err)
	}
	if x, _ := ops.Expand(e.ctx, 0, "c2", "fcm", job.ClassBulk, 100, 2, false); x.Moved != 0 || x.Why != "full" {
		t.Fatalf("a full lane: %+v", x)
	}
	if x, _ := ops.Expand(e.ctx, 0, "c2", "fcm", job.ClassBulk, 100, 100, false); x.Moved != 3 || x.Left != 0 {
		t.Fatalf("the rest: %+v", x)
	}
	for i, m := range e.entries(t, lane) {
		f := fieldsOf(m)
		key := "u-1"
		if i >= 3 {
			key = ""
		}
		// The entry names its campaign rather than copying its message: joined with it, its job
		// is the recipient's whole job.
		if want := job.CampaignJob(c, int64(i+1), key, testSubJSON()); job.WithMessage(f["job"], c.Message) != want || f["campaign"] != "c2" {
			t.Errorf("entry %d: job %s for campaign %q, want %s joined with the message of c2", i, f["job"], f["campaign"], want)
		}
		if strings.Contains(f["job"], "hello") {
			t.Errorf("entry %d carries the campaign's message: %s", i, f["job"])
		}
		j, err := job.DecodeString(job.WithMessage(f["job"], c.Message), time.Now())
		if err != nil || j.Campaign != "c2" || string(j.Payload) != "hello" || j.TTL != 30 || j.Recipient != key {
			t.Errorf("entry %d decodes to %+v, %v", i, j, err)
		}
		if f["provider"] != "fcm" || f["attempt"] != "0" || f["enqueued_at"] == "" {
			t.Errorf("entry %d fields %v", i, f)
		}
		if p, err := e.c.HGet(e.ctx, s.Keys(0).Jobs, job.RecipientJobID("c2", int64(i+1))).Result(); err != nil || p != "fcm" {
			t.Errorf("entry %d: jobs index %q, %v", i, p, err)
		}
	}
	if n, err := e.c.Exists(e.ctx, ops.Keys(0, "c2").ListOf("fcm")).Result(); err != nil || n != 0 {
		t.Errorf("the drained list still exists: %d, %v", n, err)
	}
}

// TestCampaignExpandWaitingLeavesOutWhatIsRead: with waiting, the depth counts only the lane's
// entries not yet read; without, every entry, those read and not yet ended included.
func TestCampaignExpandWaitingLeavesOutWhatIsRead(t *testing.T) {
	e, s := newStore(t, "fcm")
	ops := CampaignsOf(s)
	e.createCampaign(t, s, `{"create_campaign":{"id":"w","payload":"p"}}`)
	e.addRecipients(t, s, "w", fcmRecipients(6, "")...)
	if x, err := ops.Expand(e.ctx, 0, "w", "fcm", job.ClassTransactional, 100, 2, true); err != nil || x.Moved != 2 {
		t.Fatalf("expand to a depth of 2: %+v, %v", x, err)
	}
	lane := s.Keys(0).LaneOf("fcm", job.ClassTransactional)
	if err := e.c.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "w1", Streams: []string{lane, ">"}, Count: 2}).Err(); err != nil {
		t.Fatal(err)
	}
	if x, _ := ops.Expand(e.ctx, 0, "w", "fcm", job.ClassTransactional, 100, 2, false); x.Moved != 0 || x.Why != "full" {
		t.Fatalf("every entry counted, two read: %+v, want full", x)
	}
	if x, _ := ops.Expand(e.ctx, 0, "w", "fcm", job.ClassTransactional, 100, 2, true); x.Moved != 2 || x.Left != 2 {
		t.Fatalf("only the waiting counted, two read: %+v, want 2 moved", x)
	}
	if x, _ := ops.Expand(e.ctx, 0, "w", "fcm", job.ClassTransactional, 100, 2, true); x.Moved != 0 || x.Why != "full" {
		t.Fatalf("two waiting: %+v, want full", x)
	}
}

// TestCampaignCallsMoveAChunkAtMost: however many recipients a caller asks for, one call
// expands or ends at most CampaignChunk of them, so that no call of a large campaign holds
// Redis for long; the calls after it take the rest.
func TestCampaignCallsMoveAChunkAtMost(t *testing.T) {
	e, s := newStore(t, "fcm")
	ops := CampaignsOf(s)
	const n = 2*CampaignChunk + 50
	e.createCampaign(t, s, `{"create_campaign":{"id":"big","payload":"p"}}`)
	e.addRecipients(t, s, "big", fcmRecipients(n, "")...)
	x, err := ops.Expand(e.ctx, 0, "big", "fcm", job.ClassBulk, 10*n, 10*n, false)
	if err != nil || x.Moved != CampaignChunk || x.Left != n-CampaignChunk {
		t.Fatalf("expand of %d asked at once: %+v, %v; want %d moved", 10*n, x, err, CampaignChunk)
	}

	e.createCampaign(t, s, `{"create_campaign":{"id":"gone","payload":"p"}}`)
	e.addRecipients(t, s, "gone", fcmRecipients(n, "")...)
	// Cancelled as an operator's cancel marks it (stream/inspect's SetCampaignState).
	if err := e.c.HSet(e.ctx, ops.Keys(0, "gone").Hash, "state", CampaignCanceled).Err(); err != nil {
		t.Fatal(err)
	}
	var calls []int64
	for {
		drained, left, ok, err := ops.Drain(e.ctx, 0, "gone", []string{"fcm"}, time.Now())
		if err != nil || !ok {
			t.Fatalf("Drain: %v, %v", ok, err)
		}
		calls = append(calls, drained)
		if left == 0 {
			break
		}
	}
	if want := []int64{CampaignChunk, CampaignChunk, n - 2*CampaignChunk}; !slices.Equal(calls, want) {
		t.Errorf("drained %v a call, want %v", calls, want)
	}
}

// TestCampaignPaceAndSendAt: a paced campaign expands no more than its bucket holds (a
// second's worth) and says how long to wait; one scheduled for later expands nothing (and a
// paused one: stream/inspect's TestCampaignPausedExpandsNothing).
func TestCampaignPaceAndSendAt(t *testing.T) {
	e, s := newStore(t, "fcm")
	ops := CampaignsOf(s)
	e.createCampaign(t, s, `{"create_campaign":{"id":"paced","payload":"p","rate":5}}`)
	e.addRecipients(t, s, "paced", fcmRecipients(20, "")...)
	x, err := ops.Expand(e.ctx, 0, "paced", "fcm", job.ClassBulk, 100, 1000, false)
	if err != nil || x.Moved != 5 {
		t.Fatalf("first call at 5/s: %+v, %v; want the bucket's 5", x, err)
	}
	x, _ = ops.Expand(e.ctx, 0, "paced", "fcm", job.ClassBulk, 100, 1000, false)
	if x.Moved != 0 || x.Why != "paced" || x.Wait <= 0 || x.Wait > 200*time.Millisecond {
		t.Fatalf("second call at once: %+v, want paced with a wait of at most a token's 200ms", x)
	}
	time.Sleep(450 * time.Millisecond)
	if x, _ = ops.Expand(e.ctx, 0, "paced", "fcm", job.ClassBulk, 100, 1000, false); x.Moved < 1 || x.Moved > 3 {
		t.Fatalf("after 450ms at 5/s: %+v, want 2 (1 to 3)", x)
	}

	at := time.Now().Add(time.Hour)
	e.createCampaign(t, s, `{"create_campaign":{"id":"later","payload":"p","send_at":`+itoa(at.UnixMilli())+`}}`)
	e.addRecipients(t, s, "later", fcmRecipients(2, "")...)
	if x, _ := ops.Expand(e.ctx, 0, "later", "fcm", job.ClassBulk, 100, 1000, false); x.Moved != 0 || x.Why != "scheduled" || x.Wait < 59*time.Minute {
		t.Fatalf("scheduled an hour on: %+v", x)
	}
}

// TestCampaignSettleSeesANewProvider: a settle that read the campaign's providers before a
// batch brought another's list leaves the campaign active.
func TestCampaignSettleSeesANewProvider(t *testing.T) {
	e, s := newStore(t, "fcm", "apple")
	ops := CampaignsOf(s)
	e.createCampaign(t, s, `{"create_campaign":{"id":"s1","payload":"p"}}`)
	e.addRecipients(t, s, "s1", fcmRecipients(1, "")...)
	ops.Expand(e.ctx, 0, "s1", "fcm", job.ClassBulk, 10, 1000, false)
	e.addRecipients(t, s, "s1", RoutedRecipient{Provider: "apple", Compact: testSubJSON()})
	if ok, err := ops.Settle(e.ctx, 0, "s1", []string{"fcm"}); err != nil || ok {
		t.Fatalf("settle with the providers read before apple's list came: %v, %v; want it kept active", ok, err)
	}
	if ok, err := ops.Settle(e.ctx, 0, "s1", []string{"fcm", "apple"}); err != nil || ok {
		t.Fatalf("settle with apple's recipient waiting: %v, %v", ok, err)
	}
}
