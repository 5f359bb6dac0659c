package inspect

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestCampaignPausedExpandsNothing: a paused campaign expands nothing, and a campaign nothing
// was written for cannot be paused.
func TestCampaignPausedExpandsNothing(t *testing.T) {
	e, s := newStore(t, "fcm")
	ops := stream.CampaignsOf(s)
	e.createCampaign(t, s, `{"create_campaign":{"id":"paced","payload":"p","rate":5}}`)
	e.addRecipients(t, s, "paced", fcmRecipients(20, "")...)
	ins := inspectorOf(s)
	if err := ins.SetCampaignState(e.ctx, "paced", stream.CampaignPaused); err != nil {
		t.Fatal(err)
	}
	if x, _ := ops.Expand(e.ctx, 0, "paced", "fcm", job.ClassBulk, 100, 1000, false); x.Moved != 0 || x.Why != "paused" {
		t.Fatalf("paused: %+v", x)
	}
	if err := ins.SetCampaignState(e.ctx, "nosuch", stream.CampaignPaused); err == nil || !strings.Contains(err.Error(), "no such campaign") {
		t.Errorf("pausing no campaign: %v", err)
	}
}

// TestCampaignHoldDrainSettle: a paused campaign's lane entry goes back to the head of its
// list; a cancel drains every waiting recipient into one CANCELED record each (with its key)
// and counts them; a drained, running campaign leaves the active ones and a new batch brings
// it back.
func TestCampaignHoldDrainSettle(t *testing.T) {
	e, s := newStore(t, "fcm")
	ops := stream.CampaignsOf(s)
	ins := inspectorOf(s)
	e.createCampaign(t, s, `{"create_campaign":{"id":"c3","payload":"p"}}`)
	e.addRecipients(t, s, "c3", fcmRecipients(4, "who")...)
	if x, _ := ops.Expand(e.ctx, 0, "c3", "fcm", job.ClassBulk, 1, 1000, false); x.Moved != 1 {
		t.Fatalf("expand one: %+v", x)
	}
	lane := s.Keys(0).LaneOf("fcm", job.ClassBulk)
	read, err := e.c.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: stream.Group, Consumer: "w1", Streams: []string{lane, ">"}, Count: 1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	m := read[0].Messages[0]
	en := stream.Entry{Stream: lane, ID: m.ID, Fields: fieldsOf(m), Shard: 0}
	el := stream.RecipientElement(1, "who", testSubJSON())
	held := stream.HeldJob{Campaign: "c3", Provider: "fcm", JobID: "c3/1", Recipient: "who", Job: en.Fields["job"], Element: el, At: time.Now()}
	if err := ins.SetCampaignState(e.ctx, "c3", stream.CampaignPaused); err != nil {
		t.Fatal(err)
	}
	if ok, err := ops.Hold(e.ctx, en, held); err != nil || !ok {
		t.Fatalf("Hold: %v, %v", ok, err)
	}
	if ok, _ := ops.Hold(e.ctx, en, held); ok {
		t.Error("a second hold of the same entry took it again")
	}
	head, _ := e.c.LIndex(e.ctx, ops.Keys(0, "c3").ListOf("fcm"), 0).Result()
	if head != el || e.xlen(t, lane) != 0 {
		t.Errorf("after the hold: list head %q, lane %d entries", head, e.xlen(t, lane))
	}
	st, err := ins.Campaign(e.ctx, "c3", time.Now())
	if err != nil || st.Queued != 4 || st.InLanes != 0 {
		t.Fatalf("status after the hold %+v, %v", st, err)
	}

	if _, _, ok, _ := ops.Drain(e.ctx, 0, "c3", []string{"fcm"}, time.Now()); ok {
		t.Error("a running campaign drained")
	}
	n, err := ins.CancelCampaign(e.ctx, "c3", time.Now())
	if err != nil || n != 4 {
		t.Fatalf("CancelCampaign: %d, %v", n, err)
	}
	recs := e.entries(t, s.Keys(0).Results)
	if len(recs) != 4 {
		t.Fatalf("%d ledger records, want 4", len(recs))
	}
	for _, r := range recs {
		f := fieldsOf(r)
		if f["code"] != "CANCELED" || f["campaign"] != "c3" || f["recipient"] != "who" || !strings.HasPrefix(f["id"], "c3/") || f["provider"] != "fcm" {
			t.Errorf("record %v", f)
		}
	}
	st, _ = ins.Campaign(e.ctx, "c3", time.Now())
	if st.State != stream.CampaignCanceled || st.Queued != 0 || st.Finished["CANCELED"] != 4 || st.Done != 4 {
		t.Errorf("status after the cancel %+v", st)
	}

	e.createCampaign(t, s, `{"create_campaign":{"id":"c4","payload":"p"}}`)
	e.addRecipients(t, s, "c4", fcmRecipients(1, "")...)
	active := func() bool {
		ok, err := e.c.SIsMember(e.ctx, ops.Keys(0, "c4").Active, "c4").Result()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if ok, _ := ops.Settle(e.ctx, 0, "c4", []string{"fcm"}); ok || !active() {
		t.Fatal("settled with a recipient waiting")
	}
	ops.Expand(e.ctx, 0, "c4", "fcm", job.ClassBulk, 10, 1000, false)
	if ok, _ := ops.Settle(e.ctx, 0, "c4", []string{"fcm"}); !ok || active() {
		t.Fatal("a drained campaign stays active")
	}
	e.addRecipients(t, s, "c4", fcmRecipients(1, "")...)
	if !active() {
		t.Error("a new batch does not make the campaign active again")
	}
}

// TestCampaignOutcomesCount: a finished job of a campaign counts in the campaign's status by
// code, and its ledger record carries the campaign and the recipient key.
func TestCampaignOutcomesCount(t *testing.T) {
	e, s := newStore(t, "fcm")
	ops := stream.CampaignsOf(s)
	e.createCampaign(t, s, `{"create_campaign":{"id":"c5","payload":"p"}}`)
	e.addRecipients(t, s, "c5", fcmRecipients(2, "k")...)
	ops.Expand(e.ctx, 0, "c5", "fcm", job.ClassBulk, 10, 1000, false)
	lane := s.Keys(0).LaneOf("fcm", job.ClassBulk)
	read, err := e.c.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: stream.Group, Consumer: "w1", Streams: []string{lane, ">"}, Count: 2}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range read[0].Messages {
		en := stream.Entry{Stream: lane, ID: m.ID, Fields: fieldsOf(m), Shard: 0}
		code := []string{"ACCEPTED", "GONE"}[i]
		r := stream.Result{ID: job.RecipientJobID("c5", int64(i+1)), Provider: "fcm", Code: code, At: time.Now(),
			Sent: code == "ACCEPTED", Gone: code == "GONE", Endpoint: testEndpoint, Campaign: "c5", Recipient: "k"}
		if ok, err := s.Finish(e.ctx, en, r); err != nil || !ok {
			t.Fatalf("Finish: %v, %v", ok, err)
		}
	}
	st, err := inspectorOf(s).Campaign(e.ctx, "c5", time.Now())
	if err != nil || st.Finished["ACCEPTED"] != 1 || st.Finished["GONE"] != 1 || st.Done != 2 || st.InLanes != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	for _, m := range append(e.entries(t, s.Keys(0).Results), e.entries(t, s.Keys(0).Gone)...) {
		if f := fieldsOf(m); f["campaign"] != "c5" {
			t.Errorf("record without its campaign: %v", f)
		}
	}
	for _, m := range e.entries(t, s.Keys(0).Results) {
		if f := fieldsOf(m); f["recipient"] != "k" {
			t.Errorf("ledger record without its recipient: %v", f)
		}
	}
}

// TestCampaignCancelledBeforeItsCreate: recipients that came before their campaign's create
// entry can be cancelled: they get their CANCELED records, and the create that comes after
// leaves the campaign cancelled.
func TestCampaignCancelledBeforeItsCreate(t *testing.T) {
	e, s := newStore(t, "fcm")
	ins := inspectorOf(s)
	e.addRecipients(t, s, "early", fcmRecipients(3, "")...)
	if n, err := ins.CancelCampaign(e.ctx, "early", time.Now()); err != nil || n != 3 {
		t.Fatalf("CancelCampaign: %d, %v", n, err)
	}
	if _, v := e.createCampaign(t, s, `{"create_campaign":{"id":"early","payload":"p"}}`); v != stream.Created {
		t.Fatalf("create after the cancel: %v", v)
	}
	st, err := ins.Campaign(e.ctx, "early", time.Now())
	if err != nil || st.State != stream.CampaignCanceled || !st.HasMessage || st.Finished["CANCELED"] != 3 {
		t.Fatalf("status %+v, %v; want cancelled with its 3 CANCELED records", st, err)
	}
	if x, _ := stream.CampaignsOf(s).Expand(e.ctx, 0, "early", "fcm", job.ClassBulk, 10, 100, false); x.Moved != 0 || x.Why != stream.CampaignCanceled {
		t.Errorf("expand after the create: %+v", x)
	}
	if err := ins.SetCampaignState(e.ctx, "never", stream.CampaignPaused); err == nil {
		t.Error("pausing a campaign nothing was written for")
	}
}

// TestCampaignBatchAddedOnce: an add entry whose batch id was taken already is a copy: acked,
// its recipients not added again.
func TestCampaignBatchAddedOnce(t *testing.T) {
	e, s := newStore(t, "fcm")
	if first := e.addBatch(t, s, "b1", "run-0", fcmRecipients(3, "")...); first != 1 {
		t.Fatalf("first batch numbered from %d", first)
	}
	if again := e.addBatch(t, s, "b1", "run-0", fcmRecipients(3, "")...); again != -1 {
		t.Fatalf("the same batch again: %d, want -1 (a copy)", again)
	}
	if next := e.addBatch(t, s, "b1", "run-1", fcmRecipients(2, "")...); next != 4 {
		t.Fatalf("the next batch numbered from %d, want 4", next)
	}
	st, err := inspectorOf(s).Campaign(e.ctx, "b1", time.Now())
	if err != nil || st.Added != 5 || st.Queued != 5 {
		t.Fatalf("status %+v, %v; want 5 added and queued", st, err)
	}
	if n := e.xlen(t, s.Keys(0).Intake); n != 0 {
		t.Errorf("%d intake entries left", n)
	}
}

// TestCampaignRecipientIDs: the ids of the recipients numbered so far, whether or not the
// campaign is created yet; none for a campaign created without recipients; ErrNoCampaign for
// an id nothing was written under.
func TestCampaignRecipientIDs(t *testing.T) {
	e, s := newStore(t, "fcm")
	insp := inspectorOf(s)
	if ids, err := insp.CampaignRecipientIDs(e.ctx, "nobody"); !errors.Is(err, ErrNoCampaign) || ids != nil {
		t.Errorf("an unknown campaign: %q, %v; want ErrNoCampaign", ids, err)
	}
	e.createCampaign(t, s, `{"create_campaign":{"id":"empty","payload":"hi"}}`)
	if ids, err := insp.CampaignRecipientIDs(e.ctx, "empty"); err != nil || len(ids) != 0 {
		t.Errorf("a campaign without recipients: %q, %v; want none", ids, err)
	}
	e.addRecipients(t, s, "early", fcmRecipients(2, "")...)
	e.addRecipients(t, s, "early", fcmRecipients(1, "u-1")...)
	if ids, err := insp.CampaignRecipientIDs(e.ctx, "early"); err != nil || strings.Join(ids, " ") != "early/1 early/2 early/3" {
		t.Errorf("a campaign not created yet with three recipients: %q, %v", ids, err)
	}
}

// readOne expands one recipient of campaign id into fcm's bulk lane and reads it for w1.
func (e *env) readOne(t *testing.T, s *stream.Store, id string) stream.Entry {
	t.Helper()
	if x, err := stream.CampaignsOf(s).Expand(e.ctx, 0, id, "fcm", job.ClassBulk, 1, 1000, false); err != nil || x.Moved != 1 {
		t.Fatalf("expand: %+v, %v", x, err)
	}
	lane := s.Keys(0).LaneOf("fcm", job.ClassBulk)
	read, err := e.c.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: stream.Group, Consumer: "w1", Streams: []string{lane, ">"}, Count: 1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	m := read[0].Messages[0]
	return stream.Entry{Stream: lane, ID: m.ID, Fields: fieldsOf(m), Shard: 0}
}

// TestCampaignHoldFollowsTheHash: a hold acts on the campaign's hash as it is now, not on the
// lane's view: a campaign cancelled meanwhile gives the job its CANCELED record; a job whose id
// names a recipient the campaign never numbered is dead-lettered; a job another attempt's
// accepted send recorded is only acked; a held job puts its campaign back on the active ones.
func TestCampaignHoldFollowsTheHash(t *testing.T) {
	e, s := newStore(t, "fcm")
	ops, ins := stream.CampaignsOf(s), inspectorOf(s)
	e.createCampaign(t, s, `{"create_campaign":{"id":"h1","payload":"p"}}`)
	e.addRecipients(t, s, "h1", fcmRecipients(3, "k")...)
	k := ops.Keys(0, "h1")
	hold := func(en stream.Entry, jobID string, n int64) {
		t.Helper()
		h := stream.HeldJob{Campaign: "h1", Provider: "fcm", JobID: jobID, Recipient: "k", Job: en.Fields["job"],
			Element: stream.RecipientElement(n, "k", testSubJSON()), At: time.Now()}
		if ok, err := ops.Hold(e.ctx, en, h); err != nil || !ok {
			t.Fatalf("Hold %s: %v, %v", jobID, ok, err)
		}
	}
	// Paused and settled off the active campaigns: the hold brings it back.
	en := e.readOne(t, s, "h1")
	if err := ins.SetCampaignState(e.ctx, "h1", stream.CampaignPaused); err != nil {
		t.Fatal(err)
	}
	e.c.SRem(e.ctx, k.Active, "h1")
	hold(en, "h1/1", 1)
	if ok, _ := e.c.SIsMember(e.ctx, k.Active, "h1").Result(); !ok {
		t.Error("a held job left its campaign off the active ones")
	}
	// A forged recipient number.
	if err := ins.SetCampaignState(e.ctx, "h1", stream.CampaignRunning); err != nil {
		t.Fatal(err)
	}
	en = e.readOne(t, s, "h1")
	hold(en, "h1/99", 99)
	dead := e.entries(t, s.Keys(0).Dead)
	if len(dead) != 1 || !strings.Contains(fieldsOf(dead[0])["reason"], "no such recipient") {
		t.Errorf("dead records %v, want the forged recipient's", dead)
	}
	// Accepted by another attempt meanwhile.
	en = e.readOne(t, s, "h1")
	jobID := job.RecipientJobID("h1", 1)
	e.c.HSet(e.ctx, s.Keys(0).Jobs, jobID, "accepted")
	listBefore, _ := e.c.LLen(e.ctx, k.ListOf("fcm")).Result()
	hold(en, jobID, 1)
	if n, _ := e.c.LLen(e.ctx, k.ListOf("fcm")).Result(); n != listBefore {
		t.Errorf("an accepted job went back to the list: %d, was %d", n, listBefore)
	}
	// Cancelled meanwhile.
	en = e.readOne(t, s, "h1")
	if err := ins.SetCampaignState(e.ctx, "h1", stream.CampaignCanceled); err != nil {
		t.Fatal(err)
	}
	id, _ := job.PeekID([]byte(en.Fields["job"]))
	hold(en, id, 2)
	var canceled int
	for _, m := range e.entries(t, s.Keys(0).Results) {
		if f := fieldsOf(m); f["code"] == "CANCELED" && f["campaign"] == "h1" && f["recipient"] == "k" {
			canceled++
		}
	}
	if canceled != 1 {
		t.Errorf("%d CANCELED records, want the held job's one", canceled)
	}
}
