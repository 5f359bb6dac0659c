package dispatch

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// runToEnd runs Run until it returns by itself and returns its error; it fails the test when
// Run is still running after waitLimit (and then cancels it).
func runToEnd(t *testing.T, ctx context.Context, cfg Config) error {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(waitLimit):
		cancel()
		<-errc
		t.Fatalf("Run still running after %v", waitLimit)
		return nil
	}
}

// clientStore is a Store for consumer w1 on its own client with options o.
func clientStore(t *testing.T, o redis.Options) *stream.Store {
	t.Helper()
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return stream.New(c, c, stream.Options{Prefix: prefix, Consumer: "w1"})
}

// TestRunFailsWhenRedisRefusesTheWorker: a wrong password, a missing one or an ACL that does
// not allow what the worker needs cannot be cured by retrying: Run returns the error at once,
// so the process exits non-zero.
func TestRunFailsWhenRedisRefusesTheWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for _, cmd := range [][]any{
		{"ACL", "SETUSER", "pinger", "on", ">pw", "~*", "+ping"},
		{"CONFIG", "SET", "requirepass", "s3cret"}, // last: admin's connection stays authenticated
	} {
		if err := admin.Do(context.Background(), cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	cases := []struct {
		name string
		o    redis.Options
		want string
	}{
		{"wrong password", redis.Options{Password: "wrong"}, "WRONGPASS"},
		{"no password", redis.Options{}, "NOAUTH"},
		{"not allowed by the ACL", redis.Options{Username: "pinger", Password: "pw"}, "NOPERM"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.Addr = srv.Addr()
			cfg := e.config(clientStore(t, o)) // StartupTimeout: the default 2 min
			began := time.Now()
			err := runToEnd(t, context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Run returned %v, want an error carrying %s", err, c.want)
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("Run took %v to give up; a refusal is not worth a retry", took)
			}
		})
	}
}

// TestRunGivesUpWhenRedisStaysAway: Redis that cannot be reached is waited for (it may be
// starting along with the pod), for StartupTimeout; then Run returns an error. A stop while
// waiting is not an error.
func TestRunGivesUpWhenRedisStaysAway(t *testing.T) {
	e := newEnv(t, envOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	// Dials that fail start a go-redis redial goroutine, which ends once its pool is closed.
	t.Cleanup(func() { waitFor(t, "go-redis's redials to end", redialsEnded) })
	o := redis.Options{Addr: nowhere, DialTimeout: 100 * time.Millisecond}

	t.Run("startup timeout", func(t *testing.T) {
		cfg := e.config(clientStore(t, o))
		cfg.StartupTimeout = 500 * time.Millisecond
		began := time.Now()
		err := runToEnd(t, context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "startup timeout") {
			t.Errorf("Run returned %v, want the startup timeout", err)
		}
		if took := time.Since(began); took < cfg.StartupTimeout || took > cfg.StartupTimeout+3*time.Second {
			t.Errorf("Run gave up after %v, want about %v", took, cfg.StartupTimeout)
		}
	})
	t.Run("stopped while waiting", func(t *testing.T) {
		cfg := e.config(clientStore(t, o))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { // owned by the subtest: it returns once the first retry is logged or ctx ends
			for ctx.Err() == nil && !strings.Contains(e.logs.String(), "op=setup") {
				sleep(ctx, 5*time.Millisecond)
			}
			cancel()
		}()
		if err := runToEnd(t, ctx, cfg); err != nil {
			t.Errorf("Run returned %v, want nil for a stop", err)
		}
	})
}

// TestOrphanLanesAreReportedAtStart: a lane whose provider is no longer in the registry is
// served by nothing; each replica says so at start, once per lane, with its length. An empty
// one is reported too: the provider's retries still come due into it from the delayed set.
func TestOrphanLanesAreReportedAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{shards: 2})
	// A worker whose registry had "retired" set up its lanes on both shards, and read one of
	// the three jobs of shard 1 before it went away.
	old := e.newStore("old")
	if err := old.Setup(context.Background(), []string{"retired"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.xadd(old.Keys(1).Lane("retired"), "job", `{"id":"x"}`, "provider", "retired", "attempt", "0", "enqueued_at", "1")
	}
	if got, _, err := old.ReadLanes(context.Background(), 1, "retired", stream.LaneRead{Total: 1}); err != nil || len(got) != 1 {
		t.Fatalf("ReadLane: %d entries, %v", len(got), err)
	}
	e.start(e.config(e.store))
	waitFor(t, "the worker running", func() bool { return strings.Contains(e.logs.String(), "dispatch: running") })

	var warnings []string
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "orphan lane") {
			warnings = append(warnings, line)
		}
	}
	want := [][]string{
		{"level=WARN", "shard=0", "provider=retired", "length=0", "pending=0"},
		{"level=WARN", "shard=1", "provider=retired", "length=3", "pending=1"},
	}
	if len(warnings) != len(want) {
		t.Fatalf("%d orphan lane warnings, want %d (the retired provider's lane on each shard): %q", len(warnings), len(want), warnings)
	}
	for i, fields := range want {
		for _, f := range fields {
			if !strings.Contains(warnings[i], f) {
				t.Errorf("warning %q does not say %s", warnings[i], f)
			}
		}
	}
}
