package dispatch

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

func TestShutdownLetsInFlightSendsFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{fcmInFlight: 2})
	sub := e.subscribe(pushsim.FCM, e.key)
	const delay = 1500 * time.Millisecond
	setFault(t, e, pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: delay})
	var ids []string
	for i := range 6 {
		id := "slow-" + strconv.Itoa(i)
		ids = append(ids, id)
		e.enqueue(job(id, sub, "x"))
	}
	w := e.start(e.config(e.store)) // Grace 10 s
	lane := e.store.Keys(0).Lane("fcm")
	waitFor(t, "every job in the lane, two sends in flight", func() bool {
		return e.xlen(lane) == int64(len(ids)) && e.sim.Stats().InFlight == 2
	})

	began := time.Now()
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if took := time.Since(began); took > delay+3*time.Second {
		t.Errorf("shutdown took %v; the sends in flight needed at most %v", took, delay)
	}
	ledger := e.all("results")
	if len(ledger) != 2 {
		t.Fatalf("%d ledger records after shutdown, want the 2 sends that were in flight: %v", len(ledger), ledger)
	}
	for _, r := range ledger {
		if r["code"] != "ACCEPTED" {
			t.Errorf("in-flight send recorded %v, want ACCEPTED", r)
		}
	}
	if n, p := e.xlen(lane), e.pending(lane); n != 4 || p != 0 {
		t.Errorf("lane holds %d entries, %d pending; want the 4 never started, unread", n, p)
	}
	if n := len(e.sim.Deliveries()); n != 2 {
		t.Errorf("pushsim saw %d requests, want 2", n)
	}

	// Another replica takes the rest.
	setFault(t, e, pushsim.FCM, pushsim.Fault{})
	e.start(e.config(e.newStore("w2")))
	waitFor(t, "every job recorded", func() bool { return len(e.all("results")) == len(ids) })
	for _, id := range ids {
		if r := e.one("results", id); r["code"] != "ACCEPTED" {
			t.Errorf("%s: %v", id, r)
		}
		if n := len(e.deliveriesOf(id)); n != 1 {
			t.Errorf("%s: pushsim saw %d requests, want 1", id, n)
		}
	}
}

func TestShutdownCancelsSendsWhenGraceEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{fcmInFlight: 2})
	sub := e.subscribe(pushsim.FCM, e.key)
	setFault(t, e, pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: 8 * time.Second})
	e.enqueue(job("cut-0", sub, "x"), job("cut-1", sub, "y"))
	cfg := e.config(e.store)
	cfg.Grace = 200 * time.Millisecond
	w := e.start(cfg)
	waitFor(t, "two sends in flight", func() bool { return e.sim.Stats().InFlight == 2 })

	began := time.Now()
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if took := time.Since(began); took > cfg.Grace+3*time.Second {
		t.Errorf("shutdown took %v with a grace of %v", took, cfg.Grace)
	}
	if ledger := e.all("results"); len(ledger) != 0 {
		t.Errorf("cancelled sends were recorded: %v", ledger)
	}
	lane := e.store.Keys(0).Lane("fcm")
	if p := e.pending(lane); p != 2 {
		t.Errorf("%d lane entries pending, want the 2 cut short", p)
	}

	// They stay pending for another replica, which reclaims and delivers them.
	setFault(t, e, pushsim.FCM, pushsim.Fault{})
	cfg = e.config(e.newStore("w2"))
	cfg.VisibilityTimeout = 100 * time.Millisecond
	e.passReclaimGrace(e.start(cfg))
	for _, id := range []string{"cut-0", "cut-1"} {
		if r := e.waitRecord("results", id); r["code"] != "ACCEPTED" || r["attempt"] != "0" {
			t.Errorf("%s: %v", id, r)
		}
	}
	waitFor(t, "lane drained", func() bool { return e.queuesEmpty() && e.pending(lane) == 0 })
}

func TestIdleShutdownWaitsAtMostOneBlock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{shards: 2})
	cfg := e.config(e.store)
	cfg.Block = time.Second
	// Long periods: a loop that waited for its next tick instead of the stop would show.
	cfg.PromoteEvery, cfg.ReclaimEvery, cfg.JanitorEvery = time.Hour, time.Hour, time.Hour
	w := e.start(cfg)
	waitFor(t, "the worker running", func() bool { return e.logs.String() != "" })
	began := time.Now()
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if took := time.Since(began); took > cfg.Block+time.Second {
		t.Errorf("idle shutdown took %v; reads block at most %v", took, cfg.Block)
	}
}

// senderFunc is a Sender made of a function.
type senderFunc func(ctx context.Context, m *adapter.Message) taxonomy.Outcome

func (f senderFunc) Send(ctx context.Context, m *adapter.Message) taxonomy.Outcome { return f(ctx, m) }

// shutdownRecordGrace is Config.RecordGrace in TestOutcomeOfASendIsWrittenWhenGraceEnds.
const shutdownRecordGrace = 3 * time.Second

// TestOutcomeOfASendIsWrittenWhenGraceEnds: once a push went out (or the provider answered),
// its outcome is written even when the grace period ends before or during the write, as long
// as Redis is back within RecordGrace; an accepted push keeps its sent mark, so the replica
// that reclaims nothing sends it twice. An outcome Redis never takes is logged, job by job. Only an attempt the grace period cut short
// before any answer stays pending. The sender is a stub that controls when it returns
// relative to the grace period; Redis is killed to make the write fail until it is restarted.
func TestOutcomeOfASendIsWrittenWhenGraceEnds(t *testing.T) {
	accepted := taxonomy.Outcome{Code: taxonomy.Accepted, Status: 201, Provider: "fcm"}
	cases := []struct {
		name string
		// send runs in the worker's send goroutine; ctx is cancelled when the grace ends.
		send func(ctx context.Context, e *env) taxonomy.Outcome
		// then runs in the test once the send began, with the worker still running; it
		// cancels the worker (and restarts Redis when send killed it).
		then func(t *testing.T, e *env, w *worker)
		// code is the ledger record wanted; "" for none, the entry left pending.
		code string
	}{
		{"accepted, grace ends during the write", func(_ context.Context, e *env) taxonomy.Outcome {
			e.redis.Kill()
			return accepted
		}, func(t *testing.T, e *env, w *worker) {
			waitFor(t, "the write failing", func() bool { return strings.Contains(e.logs.String(), "op=finish") })
			w.cancel()
			waitFor(t, "the grace period over", func() bool { return strings.Contains(e.logs.String(), "grace period over") })
			e.redis.Restart()
		}, "ACCEPTED"},
		{"accepted as the grace ends, redis back 1.5 s later", func(ctx context.Context, e *env) taxonomy.Outcome {
			<-ctx.Done()
			e.redis.Kill()
			return accepted
		}, func(t *testing.T, e *env, w *worker) {
			w.cancel()
			waitFor(t, "the grace period over", func() bool { return strings.Contains(e.logs.String(), "grace period over") })
			outage := time.Now() // send kills Redis as the grace ends
			waitFor(t, "1.5 s of outage", func() bool { return time.Since(outage) > 1500*time.Millisecond })
			e.redis.Restart()
		}, "ACCEPTED"},
		{"answered as the grace ends", func(ctx context.Context, e *env) taxonomy.Outcome {
			<-ctx.Done()
			return taxonomy.Outcome{Code: taxonomy.Gone, Status: 410, Provider: "fcm", Detail: "unsubscribed"}
		}, func(t *testing.T, e *env, w *worker) { w.cancel() }, "GONE"},
		{"cut short before any answer", func(ctx context.Context, e *env) taxonomy.Outcome {
			<-ctx.Done()
			return taxonomy.Outcome{Code: taxonomy.TransportError, Provider: "fcm", Detail: "context canceled"}
		}, func(t *testing.T, e *env, w *worker) { w.cancel() }, ""},
		{"accepted, redis gone for good", func(_ context.Context, e *env) taxonomy.Outcome {
			e.redis.Kill()
			return accepted
		}, func(t *testing.T, e *env, w *worker) {
			waitFor(t, "the write failing", func() bool { return strings.Contains(e.logs.String(), "op=finish") })
			began := time.Now()
			if err := w.stop(); err != nil {
				t.Errorf("Run returned %v, want nil", err)
			}
			if took := time.Since(began); took > shutdownRecordGrace+3*time.Second {
				t.Errorf("shutdown took %v with Redis gone; the write may take %v after the grace", took, shutdownRecordGrace)
			}
			// The job that could not be recorded is named in an error line.
			if !strings.Contains(e.logs.String(), `level=ERROR msg="dispatch: outcome not recorded before shutdown`) ||
				!strings.Contains(e.logs.String(), "id=last code=ACCEPTED") {
				t.Errorf("no error line names the unrecorded job:\n%s", e.logs.String())
			}
			e.redis.Restart()
		}, ""},
	}
	// Runs after every case: their clients are closed by then.
	t.Cleanup(func() { waitFor(t, "go-redis's redials to end", redialsEnded) })
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{})
			sub := e.subscribe(pushsim.FCM, e.key)
			sending := make(chan struct{}, 1)
			cfg := e.config(e.store)
			cfg.Grace = time.Millisecond
			cfg.RecordGrace = shutdownRecordGrace
			cfg.Sender = senderFunc(func(ctx context.Context, _ *adapter.Message) taxonomy.Outcome {
				sending <- struct{}{}
				return c.send(ctx, e)
			})
			e.enqueue(job("last", sub, "x"))
			w := e.start(cfg)
			select {
			case <-sending:
			case <-time.After(waitLimit):
				t.Fatal("the job was never sent")
			}
			c.then(t, e, w)
			if err := w.stop(); err != nil {
				t.Fatalf("Run returned %v, want nil", err)
			}
			lane := e.store.Keys(0).Lane("fcm")
			if c.code == "" {
				if n := len(e.all("results")); n != 0 {
					t.Errorf("%d ledger records, want none", n)
				}
				if p := e.pending(lane); p != 1 {
					t.Errorf("%d lane entries pending, want the 1 left for another replica", p)
				}
				return
			}
			if r := e.one("results", "last"); r["code"] != c.code {
				t.Errorf("ledger %v, want %s", r, c.code)
			}
			if p := e.pending(lane); p != 0 {
				t.Errorf("%d lane entries pending, want 0", p)
			}
			sent, err := e.store.WasSent(context.Background(), 0, "last")
			if err != nil || sent != (c.code == "ACCEPTED") {
				t.Errorf("WasSent = %v, %v; want %v", sent, err, c.code == "ACCEPTED")
			}
		})
	}
}

// redialsEnded reports whether no go-redis redial goroutine runs. A pool whose dials all
// failed probes the server from a goroutine of its own, once a second, until a dial succeeds
// or the pool is closed: after a test that killed Redis it outlives the test by up to a
// second, which the leak check would report.
func redialsEnded() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return !bytes.Contains(buf[:n], []byte("pool.(*ConnPool).tryDial"))
		}
		buf = make([]byte, 2*len(buf))
	}
}
