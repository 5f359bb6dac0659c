package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// The operators' queries are tested against what a real worker's Store wrote to a real Redis:
// these helpers drive a Store as the worker does, through its exported operations.

// A real P-256 point and auth secret, as a browser's PushSubscription.toJSON gives them.
const (
	testP256dh = "BGzLTRY9U16I_7a11ZuHYDtF7tAdU_A7HRfV1tjzUyZjbILmmPk59LS0S0FRSol5EibUgFciCBQH8sYJdKJlJmg"
	testAuth   = "HTY_t6ek0_3cY_YQLrdc_g"
	// testEndpoint's path stands for the bearer credential no error may contain.
	testEndpoint = "https://fcm.googleapis.com/fcm/send/SECRET-PATH-abc123"
)

// validJob is a minimal valid job with id, its subscription marshalled as a producer written
// in Go marshals one.
func validJob(id string) string {
	sub := job.Subscription{Endpoint: testEndpoint, Keys: job.Keys{P256dh: testP256dh, Auth: testAuth}}
	b, err := json.Marshal(map[string]any{"id": id, "subscription": sub, "payload": "hello"})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func testSubJSON() string {
	return `{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}`
}

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	srv *redistest.Server
	c   *redis.Client
	ctx context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := redistest.Start(t)
	return &env{srv: srv, c: srv.Client(t), ctx: context.Background()}
}

// store returns a Store for consumer, set up for providers.
func (e *env) store(t *testing.T, consumer string, o stream.Options, providers ...string) *stream.Store {
	t.Helper()
	o.Consumer = consumer
	s := stream.New(e.c, e.c, o)
	if err := s.Setup(e.ctx, providers); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	return s
}

// newStore starts a Redis and returns it with the Store of consumer "w1", set up for
// providers.
func newStore(t *testing.T, providers ...string) (*env, *stream.Store) {
	t.Helper()
	e := newEnv(t)
	return e, e.store(t, "w1", stream.Options{}, providers...)
}

// inspectorOf is an Inspector on s's client and options.
func inspectorOf(s *stream.Store) *Inspector {
	k := stream.KeyspaceOf(s)
	return New(k.Client(), k.Options())
}

// enqueue XADDs raw jobs to the intake of shard 0 as an upstream would.
func (e *env) enqueue(t *testing.T, s *stream.Store, jobs ...string) {
	t.Helper()
	for _, j := range jobs {
		if err := e.c.XAdd(e.ctx, redisXAdd(s.Keys(0).Intake, j)).Err(); err != nil {
			t.Fatalf("XADD: %v", err)
		}
	}
}

// readIntake reads exactly n intake entries of shard 0 for s.
func (e *env) readIntake(t *testing.T, s *stream.Store, n int) []stream.Entry {
	t.Helper()
	got, _, err := s.ReadIntake(e.ctx, 0, job.ClassTransactional, n, 0)
	if err != nil {
		t.Fatalf("ReadIntake: %v", err)
	}
	if len(got) != n {
		t.Fatalf("ReadIntake: got %d entries, want %d", len(got), n)
	}
	return got
}

// readLane reads exactly n lane entries of provider on shard 0 for s.
func (e *env) readLane(t *testing.T, s *stream.Store, provider string, n int) []stream.Entry {
	t.Helper()
	got, _, err := s.ReadLanes(e.ctx, 0, provider, stream.LaneRead{Total: n})
	if err != nil {
		t.Fatalf("ReadLane: %v", err)
	}
	if len(got) != n {
		t.Fatalf("ReadLane %s: got %d entries, want %d", provider, len(got), n)
	}
	return got
}

// laneEntry puts job id through intake into provider's lane and returns the lane entry, read
// (and so owned) by s.
func (e *env) laneEntry(t *testing.T, s *stream.Store, provider, id string) stream.Entry {
	t.Helper()
	e.enqueue(t, s, validJob(id))
	in := e.readIntake(t, s, 1)[0]
	ok, err := moveToLane(e.ctx, s, in, provider, in.Fields["job"], ms(t0))
	if err != nil || !ok {
		t.Fatalf("ToLane = %v, %v", ok, err)
	}
	return e.readLane(t, s, provider, 1)[0]
}

// moveToLane is ToLane with the job id read from raw, true when the entry was moved.
func moveToLane(ctx context.Context, s *stream.Store, e stream.Entry, provider, raw string, enqueuedAtMs int64) (bool, error) {
	v, err := s.ToLane(ctx, e, provider, job.ClassTransactional, jobID(raw), raw, enqueuedAtMs)
	return v == stream.Moved, err
}

// mustOK fails the test unless a state change returned true and no error.
func mustOK(t *testing.T) func(bool, error) {
	return func(ok bool, err error) {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("transition = %v, %v", ok, err)
		}
	}
}

// entries returns every entry of a stream, in order.
func (e *env) entries(t *testing.T, key string) []redis.XMessage {
	t.Helper()
	m, err := e.c.XRange(e.ctx, key, "-", "+").Result()
	if err != nil {
		t.Fatalf("XRANGE %s: %v", key, err)
	}
	return m
}

// xlen is XLEN of a stream.
func (e *env) xlen(t *testing.T, key string) int64 {
	t.Helper()
	n, err := e.c.XLen(e.ctx, key).Result()
	if err != nil {
		t.Fatalf("XLEN %s: %v", key, err)
	}
	return n
}

// snapshot is every key and its type and size, to prove a reader wrote nothing.
func (e *env) snapshot(t *testing.T) map[string]string {
	t.Helper()
	keys, err := e.c.Keys(e.ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		typ := e.c.Type(e.ctx, k).Val()
		var desc string
		switch typ {
		case "stream":
			p, _ := e.c.XPending(e.ctx, k, stream.Group).Result()
			var pc int64
			if p != nil {
				pc = p.Count
			}
			desc = fmt.Sprintf("stream len=%d pending=%d", e.c.XLen(e.ctx, k).Val(), pc)
		case "zset":
			desc = fmt.Sprintf("zset %v", e.c.ZRangeWithScores(e.ctx, k, 0, -1).Val())
		case "hash":
			desc = fmt.Sprintf("hash %v", e.c.HGetAll(e.ctx, k).Val())
		default:
			desc = typ + " " + e.c.Get(e.ctx, k).Val()
		}
		out[k] = desc
	}
	return out
}

// fieldsOf is an entry's fields as strings.
func fieldsOf(m redis.XMessage) map[string]string {
	out := make(map[string]string, len(m.Values))
	for k, x := range m.Values {
		out[k] = fmt.Sprint(x)
	}
	return out
}

// redisXAdd builds XAddArgs for a one-field job entry.
func redisXAdd(key, job string) *redis.XAddArgs {
	return &redis.XAddArgs{Stream: key, Values: []any{"job", job}}
}

// redisPendingArgs lists the whole pending list of a stream's group.
func redisPendingArgs(key string) *redis.XPendingExtArgs {
	return &redis.XPendingExtArgs{Stream: key, Group: stream.Group, Start: "-", End: "+", Count: 1000}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// ms is t in unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// The worker's side of campaigns, as the intake reader drives it.

// campaignEntry writes raw to shard 0's intake and reads it back for s, as intake does.
func (e *env) campaignEntry(t *testing.T, s *stream.Store, raw string) stream.Entry {
	t.Helper()
	e.enqueue(t, s, raw)
	return e.readIntake(t, s, 1)[0]
}

func (e *env) createCampaign(t *testing.T, s *stream.Store, raw string) (*job.Campaign, stream.CreateVerdict) {
	t.Helper()
	c, err := job.DecodeCampaign(raw, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := stream.CampaignsOf(s).Create(e.ctx, e.campaignEntry(t, s, raw), c, raw, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c, v
}

func (e *env) addRecipients(t *testing.T, s *stream.Store, id string, rs ...stream.RoutedRecipient) int64 {
	t.Helper()
	return e.addBatch(t, s, id, "", rs...)
}

func (e *env) addBatch(t *testing.T, s *stream.Store, id, batch string, rs ...stream.RoutedRecipient) int64 {
	t.Helper()
	first, err := stream.CampaignsOf(s).Add(e.ctx, e.campaignEntry(t, s, `{"add_recipients":{}}`), id, batch, rs, time.Now())
	if err != nil || first == 0 {
		t.Fatalf("Add: %d, %v", first, err)
	}
	return first
}

func fcmRecipients(n int, key string) []stream.RoutedRecipient {
	rs := make([]stream.RoutedRecipient, n)
	for i := range rs {
		rs[i] = stream.RoutedRecipient{Provider: "fcm", Key: key, Compact: testSubJSON()}
	}
	return rs
}
