package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream/internal/scan"
)

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
func (e *env) store(t *testing.T, consumer string, o Options, providers ...string) *Store {
	t.Helper()
	o.Consumer = consumer
	s := New(e.c, e.c, o)
	if err := s.Setup(e.ctx, providers); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	return s
}

// newStore starts a Redis and returns it with the Store of consumer "w1", set up for
// providers: the one-worker setup most tests start from. A test that wants more consumers
// asks env.store for them.
func newStore(t *testing.T, providers ...string) (*env, *Store) {
	t.Helper()
	e := newEnv(t)
	return e, e.store(t, "w1", Options{}, providers...)
}

// benchStore starts a Redis with AOF off, so that a benchmark measures the commands and not the
// disk, and returns its client with the Store of consumer "w1", set up for fcm.
func benchStore(b *testing.B) (*redis.Client, *Store) {
	b.Helper()
	c := redistest.Start(b, redistest.WithConfig("appendonly", "no")).Client(b)
	s := New(c, c, Options{Consumer: "w1"})
	if err := s.Setup(context.Background(), []string{"fcm"}); err != nil {
		b.Fatal(err)
	}
	return c, s
}

// all runs op for every entry at once, each on its own goroutine, as a worker does, and fails
// with every error op returned.
func all(tb testing.TB, es []Entry, op func(Entry) error) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(es))
	for _, e := range es {
		wg.Go(func() {
			if err := op(e); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := false
	for err := range errs {
		tb.Error(err)
		failed = true
	}
	if failed {
		tb.FailNow()
	}
}

// enqueue XADDs raw jobs to the intake of shard 0 as an upstream would.
func (e *env) enqueue(t *testing.T, s *Store, jobs ...string) {
	t.Helper()
	for _, j := range jobs {
		if err := e.c.XAdd(e.ctx, &redis.XAddArgs{Stream: s.Keys(0).Intake, Values: []any{"job", j}}).Err(); err != nil {
			t.Fatalf("XADD: %v", err)
		}
	}
}

// readIntake reads exactly n intake entries of shard 0 for s.
func (e *env) readIntake(t *testing.T, s *Store, n int) []Entry {
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
func (e *env) readLane(t *testing.T, s *Store, provider string, n int) []Entry {
	t.Helper()
	got, err := s.readLane(e.ctx, 0, provider, job.ClassTransactional, n, 0)
	if err != nil {
		t.Fatalf("ReadLane: %v", err)
	}
	if len(got) != n {
		t.Fatalf("ReadLane %s: got %d entries, want %d", provider, len(got), n)
	}
	return got
}

// entries returns every entry of a stream, in order.
func (e *env) entries(t *testing.T, stream string) []redis.XMessage {
	t.Helper()
	m, err := e.c.XRange(e.ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatalf("XRANGE %s: %v", stream, err)
	}
	return m
}

// xlen is XLEN of a stream.
func (e *env) xlen(t *testing.T, stream string) int64 {
	t.Helper()
	n, err := e.c.XLen(e.ctx, stream).Result()
	if err != nil {
		t.Fatalf("XLEN %s: %v", stream, err)
	}
	return n
}

// pending is the number of entries pending in the group of stream.
func (e *env) pending(t *testing.T, stream string) int64 {
	t.Helper()
	p, err := e.c.XPending(e.ctx, stream, Group).Result()
	if err != nil {
		t.Fatalf("XPENDING %s: %v", stream, err)
	}
	return p.Count
}

// snapshot is every key and its type and size, to prove a refused call wrote nothing.
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
			p, _ := e.c.XPending(e.ctx, k, Group).Result()
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

func fieldsOf(m redis.XMessage) map[string]string { return stringFields(m.Values) }

// redisXAdd builds XAddArgs for a one-field job entry.
func redisXAdd(stream, job string) *redis.XAddArgs {
	return &redis.XAddArgs{Stream: stream, Values: []any{"job", job}}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// idLess orders stream entry ids ("ms-seq").
func idLess(a, b string) bool {
	var am, as, bm, bs uint64
	fmt.Sscanf(a, "%d-%d", &am, &as)
	fmt.Sscanf(b, "%d-%d", &bm, &bs)
	return am < bm || am == bm && as < bs
}

// age makes entry id of stream look idle for idle and delivered deliveries times, owned by
// consumer, without waiting: XCLAIM with IDLE and RETRYCOUNT.
func (e *env) age(t *testing.T, stream, consumer, id string, idle time.Duration, deliveries int64) {
	t.Helper()
	err := e.c.Do(e.ctx, "XCLAIM", stream, Group, consumer, 0, id, "IDLE", idle.Milliseconds(), "RETRYCOUNT", deliveries, "JUSTID").Err()
	if err != nil {
		t.Fatalf("XCLAIM: %v", err)
	}
}

// redisPendingArgs lists the whole pending list of a stream's group.
func redisPendingArgs(stream string) *redis.XPendingExtArgs {
	return &redis.XPendingExtArgs{Stream: stream, Group: Group, Start: "-", End: "+", Count: 1000}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// moveToLane is ToLane with the job id read from raw, true when the entry was moved.
func (s *Store) moveToLane(ctx context.Context, e Entry, provider, raw string, enqueuedAtMs int64) (bool, error) {
	v, err := s.ToLane(ctx, e, provider, job.ClassTransactional, jobID(raw), raw, enqueuedAtMs)
	return v == Moved, err
}

// copyInLane writes a second copy of job id straight into provider's lane, past the jobs index
// that keeps intake from doing so, and reads it for s: what a defence in depth must handle.
func (e *env) copyInLane(t *testing.T, s *Store, provider, id string) Entry {
	t.Helper()
	err := e.c.XAdd(e.ctx, &redis.XAddArgs{Stream: s.Keys(0).Lane(provider),
		Values: []any{"job", validJob(id), "provider", provider, "attempt", "0", "enqueued_at", "1"}}).Err()
	if err != nil {
		t.Fatalf("XADD: %v", err)
	}
	return e.readLane(t, s, provider, 1)[0]
}

// jobID is the id of a raw job, "" when it has none.
func jobID(raw string) string {
	id, _ := job.PeekID([]byte(raw))
	return id
}

// compareIDs orders stream entry ids as Redis does (scan.CompareIDs).
func compareIDs(a, b string) int { return scan.CompareIDs(a, b) }

// takeOver is what another replica does with the idle entries of stream (on shard 0) whose
// consumers are not in alive: its reclaimer hands them back (Requeue, minIdle, at most
// maxDeliveries), and its lane or intake reads them. It returns what w read.
func (e *env) takeOver(t *testing.T, w *Store, stream string, minIdle time.Duration, maxDeliveries int64, alive ...string) []Entry {
	t.Helper()
	if _, err := w.Requeue(e.ctx, 0, stream, Requeue{MinIdle: minIdle, Count: 100, MaxDeliveries: maxDeliveries, Alive: alive}); err != nil {
		t.Fatalf("Requeue: %v", err)
	}
	got, err := w.read(e.ctx, 0, stream, 100, 0)
	if err != nil {
		t.Fatalf("read %s: %v", stream, err)
	}
	return got
}
