package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// The lane's decisions, tested without Redis, pushsim or timing: a stepped clock, a store that
// records what it is asked to write, and a sender that answers what the case says. The
// Redis-backed tests of this package, and test/isolation and test/crash, are the proof that the
// pieces hold together; these make each decision readable on its own.

// unitKey is the VAPID key of the unit tests; signing never happens (the sender is a stub).
var unitKey = func() *vapid.Key {
	k, err := vapid.GenerateKey("default")
	if err != nil {
		panic(err)
	}
	return k
}()

// unitSub is a subscription at host (a listed provider's, or an unknown one) with real keys.
func unitSub(host string) jobfmt.Subscription {
	var s jobfmt.Subscription
	s.Endpoint = "https://" + host + "/push/" + host
	s.Keys.P256dh = "BGzLTRY9U16I_7a11ZuHYDtF7tAdU_A7HRfV1tjzUyZjbILmmPk59LS0S0FRSol5EibUgFciCBQH8sYJdKJlJmg"
	s.Keys.Auth = "HTY_t6ek0_3cY_YQLrdc_g"
	return s
}

// fakeStore answers a lane's checks from its fields and records its writes. failWrites makes
// the next writes fail, as a Redis that is gone would. Safe for concurrent use.
type fakeStore struct {
	mu         sync.Mutex
	sent, gone map[string]bool // by job id, by endpoint
	notOwned   map[string]bool // entry ids no longer ours
	failWrites int
	writes     []string // "finish:<code>", "dead:<code>", "retry:<attempt>@<due offset>", "ack"
	results    []stream.Result
	retries    []stream.RetryRecord
	dead       []stream.DeadRecord
	checks     []string // "sent", "gone", "owns"
	laneReads  []stream.LaneRead
}

func newFakeStore() *fakeStore {
	return &fakeStore{sent: map[string]bool{}, gone: map[string]bool{}, notOwned: map[string]bool{}}
}

func (f *fakeStore) ReadLanes(_ context.Context, _ int, _ string, r stream.LaneRead) ([]stream.Entry, *stream.LaneMark, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.laneReads = append(f.laneReads, r)
	return nil, &stream.LaneMark{}, nil
}

func (f *fakeStore) WaitLanes(context.Context, int, string, stream.LaneMark, bool, time.Duration) (bool, error) {
	return false, nil
}

func (f *fakeStore) Recorded(context.Context, int, stream.Result, time.Time, int) (bool, bool, error) {
	return false, false, nil
}

func (f *fakeStore) WasSent(_ context.Context, _ int, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks = append(f.checks, "sent")
	return f.sent[id], nil
}

func (f *fakeStore) IsGone(_ context.Context, _ int, endpoint string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks = append(f.checks, "gone")
	return f.gone[endpoint], nil
}

func (f *fakeStore) Owns(_ context.Context, e stream.Entry) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks = append(f.checks, "owns")
	return !f.notOwned[e.ID], nil
}

// write records what a write would do, or fails it while failWrites lasts.
func (f *fakeStore) write(what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWrites > 0 {
		f.failWrites--
		return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	f.writes = append(f.writes, what)
	return nil
}

func (f *fakeStore) Finish(_ context.Context, _ stream.Entry, r stream.Result) (bool, error) {
	if err := f.write("finish:" + r.Code); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results = append(f.results, r)
	return true, nil
}

func (f *fakeStore) ToDead(_ context.Context, _ stream.Entry, d stream.DeadRecord) (bool, error) {
	if err := f.write("dead:" + d.Code); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead = append(f.dead, d)
	return true, nil
}

func (f *fakeStore) ToDelayed(_ context.Context, _ stream.Entry, r stream.RetryRecord) (stream.RetryVerdict, error) {
	if err := f.write("retry:" + strconv.Itoa(r.Attempt)); err != nil {
		return stream.NotOwner, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retries = append(f.retries, r)
	return stream.Queued, nil
}

func (f *fakeStore) AckSent(context.Context, stream.Entry, string) (bool, error) {
	return true, f.write("ack")
}

func (f *fakeStore) state() (writes, checks []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...), append([]string(nil), f.checks...)
}

// fakeSender answers every send with answer's outcome and counts the sends.
type fakeSender struct {
	mu     sync.Mutex
	answer func(ctx context.Context, m *adapter.Message) taxonomy.Outcome
	sent   []string // job ids, in order
}

func (s *fakeSender) Send(ctx context.Context, m *adapter.Message) taxonomy.Outcome {
	s.mu.Lock()
	s.sent = append(s.sent, m.ID)
	answer := s.answer
	s.mu.Unlock()
	return answer(ctx, m)
}

func (s *fakeSender) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// unitRegistry has every limit out of the way except what a case sets: a large bucket, a
// breaker that opens on 2 failures of 2, a 1 s cooldown.
const unitRegistry = `version: 1
defaults:
  rate: 100000
  burst: 100000
  max_in_flight: 16
  breaker: {failure_ratio: 0.5, window: 10s, min_samples: 2, cooldown: 1s, probes: 1}
providers:
  - id: apple
    hosts: [web.push.apple.com]
  - id: fallback
    kind: generic
`

// unitLane is one lane of provider built as Run builds it, over a fakeStore and a fakeSender,
// on a stepped clock, with nothing started.
type unitLane struct {
	*lane
	store  *fakeStore
	sender *fakeSender
	clock  *clock
}

func newUnitLane(t *testing.T, provider string) *unitLane {
	t.Helper()
	reg, err := providers.Parse("registry.yaml", []byte(unitRegistry))
	if err != nil {
		t.Fatal(err)
	}
	u := &unitLane{store: newFakeStore(), clock: &clock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)},
		sender: &fakeSender{answer: func(context.Context, *adapter.Message) taxonomy.Outcome {
			return taxonomy.Outcome{Code: taxonomy.Accepted, Status: 201, Provider: provider}
		}}}
	cfg, err := Config{Store: stream.New(nil, nil, stream.Options{Consumer: "unit"}), Sender: u.sender, Registry: reg,
		Keys: map[string]*vapid.Key{"default": unitKey}, Now: u.clock.Now, Rand: func() float64 { return 0.5 },
		Backoff: Backoff{MaxRetries: DefaultMaxRetries}, MaxDelayed: DefaultMaxDelayed, MaxPerRecipient: DefaultMaxPerRecipient,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	lim := newFleetLimits(&cfg)
	u.lane = newLane(laneParams{cfg: &cfg, store: u.store, shard: 0, provider: provider, lim: lim.get(provider),
		hosts: lim.hosts, health: newRedisHealth(1, cfg.Logger, cfg.Now(), nil), abort: make(chan struct{}), inHand: newInHand()})
	t.Cleanup(func() {
		u.shutdown()
		u.workers.wait()
	})
	return u
}

// entry is a lane entry of job id at attempt, enqueued at the clock's now minus age, with the
// job's extra fields.
func (u *unitLane) entry(id string, attempt int, age time.Duration, host string, extra ...any) stream.Entry {
	raw := job(id, unitSub(host), "hello", extra...)
	return stream.Entry{Stream: "wp:{0}:lane:" + u.provider, ID: "1-" + id, Shard: 0, Fields: map[string]string{
		"job": string(raw), "provider": u.provider, "attempt": strconv.Itoa(attempt),
		"enqueued_at": strconv.FormatInt(u.clock.Now().Add(-age).UnixMilli(), 10),
	}}
}

// deliver runs e through the lane as its reader would (a slot and a token taken, then the
// turn's steps) and waits for it to finish; redelivered marks it read before.
func (u *unitLane) deliver(t *testing.T, e stream.Entry, redelivered bool) {
	t.Helper()
	u.deliverWith(t, context.Background(), e, redelivered)
}

// deliverWith is deliver with the sends' context sendCtx.
func (u *unitLane) deliverWith(t *testing.T, sendCtx context.Context, e stream.Entry, redelivered bool) {
	t.Helper()
	if redelivered {
		e.Fields["deliveries"] = "1"
	}
	if u.lim.slots.Take(1) != 1 || u.lim.tokens.Take(time.Now(), 1, 0) != 1 {
		t.Fatal("no free slot or token for the entry")
	}
	u.begin(context.Background(), sendCtx, e)
	u.inflight.Wait()
}

func TestBeforeSendDecides(t *testing.T) {
	u := newUnitLane(t, "apple")
	now := u.clock.Now()
	cases := []struct {
		name    string
		entry   stream.Entry
		marks   marks
		want    nextKind // 0: go on to admission
		code    string
		detail  string
		reasons string
	}{
		{"a first delivery goes on", u.entry("a", 0, time.Second, "web.push.apple.com"), marks{}, 0, "", "", ""},
		{"a copy another attempt sent is acknowledged", u.entry("b", 1, time.Second, "web.push.apple.com"), marks{sent: true}, ackCopy, "", "", ""},
		{"a retry to an endpoint gone meanwhile ends GONE", u.entry("c", 2, time.Second, "web.push.apple.com"), marks{gone: true}, toLedger, "GONE", goneMeanwhile, ""},
		{"a TTL that ran out in the queue ends EXPIRED", u.entry("d", 0, 2*time.Minute, "web.push.apple.com", "ttl", 60), marks{}, toLedger, "EXPIRED",
			"ttl of 60s ran out in the queue before attempt 1; not sent", ""},
		{"TTL 0 goes out on its first attempt however long it queued", u.entry("e", 0, time.Hour, "web.push.apple.com", "ttl", 0), marks{}, 0, "", "", ""},
		{"TTL 0 is never retried", u.entry("f", 1, time.Second, "web.push.apple.com", "ttl", 0), marks{}, toLedger, "EXPIRED",
			"ttl of 0s ran out in the queue before attempt 2; not sent", ""},
		{"a key this replica does not have is dead", u.entry("g", 0, time.Second, "web.push.apple.com", "vapid_key", "other"), marks{}, toDead, "INVALID_JOB", "",
			`vapid_key: no key named "other" is configured`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lj, err := parseLaneEntry(c.entry, now)
			if err != nil {
				t.Fatal(err)
			}
			w := u.beforeSend(lj, err, c.marks, now)
			switch {
			case c.want == 0 && w != nil:
				t.Fatalf("beforeSend = %+v; want the entry to go on", *w)
			case c.want == 0:
				return
			case w == nil || w.kind != c.want:
				t.Fatalf("beforeSend = %+v; want kind %d", w, c.want)
			}
			if c.want == toLedger && (w.result.Code != c.code || w.result.Detail != c.detail || !w.result.At.Equal(now)) {
				t.Errorf("result %+v; want code %s, detail %q at now", w.result, c.code, c.detail)
			}
			if c.want == toDead && (w.dead.Code != c.code || w.dead.Reason != c.reasons) {
				t.Errorf("dead %+v; want %s %q", w.dead, c.code, c.reasons)
			}
		})
	}
	// An entry the gateway did not write is dead, with the id it may carry.
	bad := stream.Entry{Stream: "wp:{0}:lane:apple", ID: "1-x", Fields: map[string]string{"job": `{"id":"odd","x":1}`, "attempt": "zero"}}
	lj, err := parseLaneEntry(bad, now)
	if w := u.beforeSend(lj, err, marks{}, now); w == nil || w.kind != toDead || w.dead.ID != "odd" || w.dead.Reason != err.Error() {
		t.Errorf("beforeSend of a foreign entry = %+v; want dead with id odd and reason %q", w, err)
	}
}

func TestAfterSendDecides(t *testing.T) {
	u := newUnitLane(t, "apple")
	now := u.clock.Now()
	lj, _ := parseLaneEntry(u.entry("j", 0, time.Minute, "web.push.apple.com", "ttl", 3600, "recipient", "r1"), now)
	last, _ := parseLaneEntry(u.entry("j", 8, time.Minute, "web.push.apple.com", "ttl", 3600), now)
	short, _ := parseLaneEntry(u.entry("j", 0, time.Minute, "web.push.apple.com", "ttl", 62), now)
	be := u.entry("j", 0, time.Minute, "web.push.apple.com", "ttl", 3600, "recipient", "r1")
	be.Stream += ":bulk" // read from the provider's bulk lane
	bulk, _ := parseLaneEntry(be, now)
	out := func(code taxonomy.Code, status int, retryAfter time.Duration) taxonomy.Outcome {
		return taxonomy.Outcome{Code: code, Status: status, Provider: "apple", Detail: "said so", RetryAfter: retryAfter}
	}
	cases := []struct {
		name string
		lj   *laneJob
		out  taxonomy.Outcome
		want nextState
	}{
		{"accepted: the ledger and the sent mark", lj, out(taxonomy.Accepted, 201, 0),
			nextState{kind: toLedger, result: stream.Result{Code: "ACCEPTED", Status: 201, Sent: true}}},
		{"gone: the gone stream and the endpoint's mark", lj, out(taxonomy.Gone, 410, 0),
			nextState{kind: toLedger, result: stream.Result{Code: "GONE", Status: 410, Gone: true, MarkGone: true, Endpoint: unitSub("web.push.apple.com").Endpoint}}},
		{"key mismatch: the gone stream, no mark", lj, out(taxonomy.KeyMismatch, 403, 0),
			nextState{kind: toLedger, result: stream.Result{Code: "KEY_MISMATCH", Status: 403, Gone: true, Endpoint: unitSub("web.push.apple.com").Endpoint}}},
		{"a terminal refusal: the ledger", lj, out(taxonomy.InvalidRequest, 400, 0),
			nextState{kind: toLedger, result: stream.Result{Code: "INVALID_REQUEST", Status: 400}}},
		{"rate limited: a retry no sooner than Retry-After", lj, out(taxonomy.RateLimited, 429, 30*time.Second),
			nextState{kind: toDelayed, retry: stream.RetryRecord{Provider: "apple", Recipient: "r1", Due: now.Add(30 * time.Second), Attempt: 1,
				MaxDelayed: 1_000_000, MaxPerRecipient: 1_000, Code: "RATE_LIMITED", Detail: "said so", At: now, Class: jobfmt.ClassTransactional}}},
		{"a bulk job's retry: back to the bulk lane when due", bulk, out(taxonomy.RateLimited, 429, 30*time.Second),
			nextState{kind: toDelayed, retry: stream.RetryRecord{Provider: "apple", Recipient: "r1", Due: now.Add(30 * time.Second), Attempt: 1,
				MaxDelayed: 1_000_000, MaxPerRecipient: 1_000, Code: "RATE_LIMITED", Detail: "said so", At: now, Class: jobfmt.ClassBulk}}},
		{"provider down: a retry after half the first backoff ceiling (Rand 0.5)", lj, out(taxonomy.ProviderDown, 503, 0),
			nextState{kind: toDelayed, retry: stream.RetryRecord{Provider: "apple", Recipient: "r1", Due: now.Add(2500 * time.Millisecond), Attempt: 1,
				MaxDelayed: 1_000_000, MaxPerRecipient: 1_000, Code: "PROVIDER_DOWN", Detail: "said so", At: now, Class: jobfmt.ClassTransactional}}},
		{"the last retry used: dead", last, out(taxonomy.ProviderDown, 503, 0),
			nextState{kind: toDead, result: stream.Result{Code: "PROVIDER_DOWN", Status: 503, Detail: "said so"},
				dead: stream.DeadRecord{Code: "PROVIDER_DOWN", Reason: "gave up after 9 attempts: PROVIDER_DOWN 503: said so",
					Attempt: 8, Provider: "apple", At: now}}},
		{"a retry due after the TTL: EXPIRED now", short, out(taxonomy.RateLimited, 429, 10*time.Second),
			nextState{kind: toLedger, result: stream.Result{Code: "EXPIRED", Status: 429,
				Detail: "ttl ends before attempt 2 could be made; last attempt: RATE_LIMITED 429: said so"}}},
	}
	ignore := cmpopts.IgnoreFields(stream.Result{}, "ID", "Provider", "Attempt", "At", "Latency")
	ignoreRetry := cmpopts.IgnoreFields(stream.RetryRecord{}, "ID", "Job", "EnqueuedAtMs")
	ignoreDead := cmpopts.IgnoreFields(stream.DeadRecord{}, "ID", "Job")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := stream.Result{ID: "j", Provider: "apple", Attempt: c.lj.attempt, Code: string(c.out.Code), Status: c.out.Status, Detail: c.out.Detail, At: now}
			if c.want.kind == toLedger && c.want.result.Detail == "" {
				c.want.result.Detail = c.out.Detail
			}
			got := u.afterSend(c.lj, c.out, r)
			if d := cmp.Diff(c.want, got, cmp.AllowUnexported(nextState{}), ignore, ignoreRetry, ignoreDead); d != "" {
				t.Errorf("afterSend (-want +got):\n%s", d)
			}
		})
	}
}

func TestEntryStepsOnAFakeStore(t *testing.T) {
	t.Parallel()
	t.Run("a first delivery asks Redis nothing before its send", func(t *testing.T) {
		u := newUnitLane(t, "apple")
		u.deliver(t, u.entry("first", 0, time.Second, "web.push.apple.com"), false)
		writes, checks := u.store.state()
		if d := cmp.Diff([]string{"finish:ACCEPTED"}, writes); d != "" || len(checks) != 0 {
			t.Errorf("writes (-want +got):\n%s\nchecks %v; want none", d, checks)
		}
	})
	t.Run("an entry that waited long and is no longer ours is not sent", func(t *testing.T) {
		u := newUnitLane(t, "apple")
		u.cfg.VisibilityTimeout = time.Nanosecond // every wait is past half of it
		e := u.entry("taken", 0, time.Second, "web.push.apple.com")
		u.store.notOwned[e.ID] = true
		u.deliver(t, e, true)
		if writes, _ := u.store.state(); len(writes) != 0 || u.sender.count() != 0 {
			t.Errorf("writes %v, %d sends; want none", writes, u.sender.count())
		}
	})
	t.Run("an open breaker puts the entry back until its cooldown ends, with the same attempt", func(t *testing.T) {
		u := newUnitLane(t, "apple")
		u.sender.answer = func(context.Context, *adapter.Message) taxonomy.Outcome {
			return taxonomy.Outcome{Code: taxonomy.ProviderDown, Status: 503, Provider: "apple"}
		}
		u.deliver(t, u.entry("down-1", 0, time.Second, "web.push.apple.com"), false)
		u.deliver(t, u.entry("down-2", 0, time.Second, "web.push.apple.com"), false)
		if u.lim.breaker().State() != limits.Open {
			t.Fatalf("breaker %v after two failures of two; want open", u.lim.breaker().State())
		}
		u.deliver(t, u.entry("waits", 3, time.Second, "web.push.apple.com"), false)
		if n := u.sender.count(); n != 2 {
			t.Errorf("%d sends; the open breaker must let none through", n)
		}
		u.store.mu.Lock()
		defer u.store.mu.Unlock()
		back := u.store.retries[len(u.store.retries)-1]
		if back.ID != "waits" || back.Attempt != 3 || back.Due.Before(u.clock.Now().Add(500*time.Millisecond)) || back.MaxPerRecipient != 0 {
			t.Errorf("put back %+v; want attempt 3 again, due after the cooldown, no caps", back)
		}
	})
	t.Run("429 pauses its key on the provider, not the provider's rate", func(t *testing.T) {
		u := newUnitLane(t, "apple")
		before := u.lim.tokens.Rate()
		u.sender.answer = func(context.Context, *adapter.Message) taxonomy.Outcome {
			return taxonomy.Outcome{Code: taxonomy.RateLimited, Status: 429, Provider: "apple", RetryAfter: 5 * time.Second}
		}
		u.deliver(t, u.entry("slow-down", 0, time.Second, "web.push.apple.com"), false)
		if got := u.lim.tokens.Rate(); got != before {
			t.Errorf("rate %g after a 429, want %g: a 429 is its key's", got, before)
		}
		if w := u.lim.keys.Wait("default", u.clock.Now()); w != 5*time.Second {
			t.Errorf("key paused for %v, want the Retry-After's 5s", w)
		}
		// The key's next job waits in the delayed set until the pause ends, unsent, same
		// attempt; one whose TTL ends first is EXPIRED at once, unsent.
		u.deliver(t, u.entry("same-key", 0, time.Second, "web.push.apple.com"), false)
		u.deliver(t, u.entry("short-ttl", 0, time.Second, "web.push.apple.com", "ttl", 3), false)
		writes, _ := u.store.state()
		if d := cmp.Diff([]string{"retry:1", "retry:0", "finish:EXPIRED"}, writes); d != "" {
			t.Errorf("writes (-want +got):\n%s", d)
		}
		if n := u.sender.count(); n != 1 {
			t.Errorf("%d sends; want only the first", n)
		}
		u.store.mu.Lock()
		defer u.store.mu.Unlock()
		if back := u.store.retries[len(u.store.retries)-1]; back.ID != "same-key" || back.Due.Before(u.clock.Now().Add(5*time.Second)) {
			t.Errorf("put back %+v; want same-key due after the pause", back)
		}
	})
	t.Run("a throttled unknown host waits in the delayed set while another host is sent", func(t *testing.T) {
		u := newUnitLane(t, "fallback")
		u.lim.hostLimits().Configure(u.clock.Now(), 1, 1) // the lane's per-replica rate: 1/s
		u.sender.answer = func(_ context.Context, m *adapter.Message) taxonomy.Outcome {
			if m.ID == "bad-1" {
				return taxonomy.Outcome{Code: taxonomy.RateLimited, Status: 429, Provider: "fallback"}
			}
			return taxonomy.Outcome{Code: taxonomy.Accepted, Status: 201, Provider: "fallback"}
		}
		u.deliver(t, u.entry("bad-1", 0, time.Second, "push.bad.example"), false)
		u.deliver(t, u.entry("bad-2", 0, time.Second, "push.bad.example"), false)
		u.deliver(t, u.entry("good-1", 0, time.Second, "push.good.example"), false)
		writes, _ := u.store.state()
		// bad-1's 429 is retried (attempt 1); bad-2 waits for the host's own token, which is
		// seconds away at half a token a second: put back, same attempt; good-1 goes.
		if d := cmp.Diff([]string{"retry:1", "retry:0", "finish:ACCEPTED"}, writes); d != "" {
			t.Errorf("writes (-want +got):\n%s", d)
		}
		if n := u.sender.count(); n != 2 {
			t.Errorf("%d sends; want bad-1 and good-1", n)
		}
	})
	t.Run("an outcome Redis refuses is retried until it takes it, with the shard taking no new work meanwhile", func(t *testing.T) {
		u := newUnitLane(t, "apple")
		u.store.failWrites = 2
		var closedWhileFailing bool
		u.sender.answer = func(context.Context, *adapter.Message) taxonomy.Outcome {
			return taxonomy.Outcome{Code: taxonomy.Accepted, Status: 201, Provider: "apple"}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			u.deliver(t, u.entry("kept", 0, time.Second, "web.push.apple.com"), false)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for !closedWhileFailing && time.Now().Before(deadline) {
			closedWhileFailing = !u.health.open(0)
			time.Sleep(time.Millisecond) // polling the gate while the retries run
		}
		<-done
		writes, _ := u.store.state()
		if d := cmp.Diff([]string{"finish:ACCEPTED"}, writes); d != "" {
			t.Errorf("writes (-want +got):\n%s", d)
		}
		if !closedWhileFailing {
			t.Error("the shard's gate stayed open while the outcome could not be written")
		}
		if !u.health.open(0) {
			t.Error("the gate is still closed after the write went through")
		}
		if n := u.sender.count(); n != 1 {
			t.Errorf("%d sends; the outcome's retries must not send again", n)
		}
	})
	t.Run("a send cut short by the grace period before any answer writes nothing", func(t *testing.T) {
		u := newUnitLane(t, "apple")
		ctx, cancel := context.WithCancel(context.Background())
		u.sender.answer = func(ctx context.Context, _ *adapter.Message) taxonomy.Outcome {
			cancel()
			return taxonomy.Outcome{Code: taxonomy.TransportError, Provider: "apple", Detail: "context canceled"}
		}
		u.deliverWith(t, ctx, u.entry("cut", 0, time.Second, "web.push.apple.com"), false)
		if writes, _ := u.store.state(); len(writes) != 0 {
			t.Errorf("writes %v; an attempt the grace period cut short leaves the entry pending", writes)
		}
	})
	t.Run("a retry looks at the sent and gone marks first", func(t *testing.T) {
		u := newUnitLane(t, "apple")
		e := u.entry("again", 2, time.Second, "web.push.apple.com")
		u.store.gone[unitSub("web.push.apple.com").Endpoint] = true
		u.deliver(t, e, false)
		writes, checks := u.store.state()
		if d := cmp.Diff([]string{"finish:GONE"}, writes); d != "" || fmt.Sprint(checks) != "[sent gone]" || u.sender.count() != 0 {
			t.Errorf("writes (-want +got):\n%s\nchecks %v, %d sends; want [sent gone] and none", d, checks, u.sender.count())
		}
	})
}
