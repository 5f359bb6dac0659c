package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

var (
	errUnreachable = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	//lint:ignore ST1005 Redis's own words
	errOOM = fmt.Errorf("stream: finish: %w", errors.New("OOM command not allowed when used memory > 'maxmemory'."))
)

// TestHealthGate: a shard takes no new work while Redis is unreachable, while it refuses
// writes (until a write probe succeeds: an outcome script that runs despite the refusal proves
// nothing) and while an outcome waits to be written; and the time Redis has answered without a
// break starts again after an outage.
func TestHealthGate(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := newRedisHealth(2, slog.New(slog.NewTextHandler(io.Discard, nil)), t0, nil)
	steps := []struct {
		name         string
		do           func()
		open0, open1 bool
		upFor        time.Duration // at t0+10s
	}{
		{"fresh", func() {}, true, true, 10 * time.Second},
		{"unreachable closes every shard", func() { h.observe(0, telemetry.OpRead, errUnreachable, t0.Add(time.Second)) }, false, false, 0},
		{"any answer reopens them and restarts the clock", func() { h.observe(1, telemetry.OpRead, nil, t0.Add(4*time.Second)) }, true, true, 6 * time.Second},
		{"a write refusal closes its shard only", func() { h.observe(1, telemetry.OpRead, errOOM, t0.Add(5*time.Second)) }, true, false, 6 * time.Second},
		{"a successful outcome write does not reopen it", func() { h.observe(1, telemetry.OpRead, nil, t0.Add(6*time.Second)) }, true, false, 6 * time.Second},
		{"a failed probe keeps it closed", func() { h.probed(1, errOOM, t0.Add(7*time.Second)) }, true, false, 6 * time.Second},
		{"a successful probe reopens it", func() { h.probed(1, nil, t0.Add(8*time.Second)) }, true, true, 6 * time.Second},
		{"an outcome waiting to be written closes its shard", func() { h.unwritten(0, +1) }, false, true, 6 * time.Second},
		{"and written, reopens it", func() { h.unwritten(0, -1) }, true, true, 6 * time.Second},
	}
	for _, s := range steps {
		s.do()
		if got0, got1 := h.open(0), h.open(1); got0 != s.open0 || got1 != s.open1 {
			t.Errorf("%s: open = %v, %v; want %v, %v", s.name, got0, got1, s.open0, s.open1)
		}
		if got := h.upFor(t0.Add(10 * time.Second)); got != s.upFor {
			t.Errorf("%s: upFor = %v; want %v", s.name, got, s.upFor)
		}
	}
}

// TestHealthLogsAnOutageOnce: an outage is one warning and one recovery line; calls that fail
// again within relapseWindow of the recovery (connections the restart cut) close the gates but
// log nothing at info or above, unless the relapse lasts relapseWindow, which is then warned.
func TestHealthLogsAnOutageOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var buf proctest.Buffer
	h := newRedisHealth(1, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), t0, nil)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		name  string
		err   error
		at    time.Duration
		open  bool
		lines []string // the info and warn lines this step adds
	}{
		{"the outage", errUnreachable, time.Second, false, []string{"redis is unreachable"}},
		{"still down", errUnreachable, 2 * time.Second, false, nil},
		{"back", nil, 5 * time.Second, true, []string{"redis is reachable again"}},
		{"a cut connection fails just after", errUnreachable, 5*time.Second + 100*time.Millisecond, false, nil},
		{"answers again", nil, 5*time.Second + 200*time.Millisecond, true, nil},
		{"another relapse", errUnreachable, 6 * time.Second, false, nil},
		{"that lasts", errUnreachable, 7 * time.Second, false, nil},
		{"long enough to warn", errUnreachable, 8 * time.Second, false, []string{"redis is unreachable"}},
		{"back from it", nil, 9 * time.Second, true, []string{"redis is reachable again"}},
		{"a new outage long after", errUnreachable, time.Minute, false, []string{"redis is unreachable"}},
	}
	seen := 0
	for _, s := range steps {
		h.observe(0, telemetry.OpRead, s.err, at(s.at))
		if got := h.open(0); got != s.open {
			t.Errorf("%s: open = %v; want %v", s.name, got, s.open)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if buf.String() == "" {
			lines = nil
		}
		added := lines[seen:]
		seen = len(lines)
		if len(added) != len(s.lines) {
			t.Errorf("%s: logged %q; want %d lines like %q", s.name, added, len(s.lines), s.lines)
			continue
		}
		for i, want := range s.lines {
			if !strings.Contains(added[i], want) {
				t.Errorf("%s: logged %q; want %q", s.name, added[i], want)
			}
		}
	}
}

// TestReclaimerWaitsOutAReconnect: the reclaimer takes over nothing until Redis has answered
// for stale_after plus one heartbeat period, nor with a heartbeat view older than stale_after;
// then it spares the replicas the view lists.
func TestReclaimerWaitsOutAReconnect(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	hb := providers.HeartbeatConfig{Every: time.Second, StaleAfter: 5 * time.Second}
	h := newRedisHealth(1, slog.New(slog.NewTextHandler(io.Discard, nil)), t0, nil)
	beat := &heartbeat{}
	r := &reclaimer{reclaimerParams: reclaimerParams{health: h, heartbeat: beat, hb: hb}}
	check := func(name string, now time.Time, want bool) {
		t.Helper()
		if _, ok := r.allowed(now); ok != want {
			t.Errorf("%s: allowed at +%v = %v; want %v", name, now.Sub(t0), ok, want)
		}
	}
	check("no heartbeat yet", t0.Add(time.Minute), false)
	beat.view.Store(&aliveView{names: []string{"w1", "w2"}, at: t0.Add(5 * time.Second)})
	check("up for 5 s of the 6 needed", t0.Add(5*time.Second), false)
	check("up for 6 s, a fresh view", t0.Add(6*time.Second), true)
	if alive, _ := r.allowed(t0.Add(6 * time.Second)); len(alive) != 2 {
		t.Errorf("alive = %v; want the view's two replicas", alive)
	}
	check("the view is older than stale_after", t0.Add(11*time.Second), false)
	h.observe(-1, telemetry.OpRead, errUnreachable, t0.Add(12*time.Second))
	h.observe(-1, telemetry.OpRead, nil, t0.Add(20*time.Second))
	beat.view.Store(&aliveView{names: []string{"w1"}, at: t0.Add(20 * time.Second)})
	check("back 1 s after an outage, a fresh view", t0.Add(21*time.Second), false)
	beat.view.Store(&aliveView{names: []string{"w1"}, at: t0.Add(25 * time.Second)})
	check("back 6 s after it, a fresh view", t0.Add(26*time.Second), true)
}

// TestWatchedRoundsEndBeforeTheirWatchdog: every round of a ticking loop runs under a deadline
// well inside the loop's /livez bound, so a Redis that never answers makes rounds fail, not
// the loop stop ticking.
func TestWatchedRoundsEndBeforeTheirWatchdog(t *testing.T) {
	cfg := &Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	const period = time.Hour
	done := make(chan struct{})
	left := make(chan time.Duration, 1)
	start := time.Now()
	go ticking(done, period, true, cfg, "test", func(ctx context.Context) error {
		dl, ok := ctx.Deadline()
		if !ok {
			left <- -1
		} else {
			left <- dl.Sub(start)
		}
		close(done)
		return nil
	})
	d := <-left
	if d <= 0 || d > watchdogBound(period)/2+time.Second {
		t.Fatalf("a round's deadline is %v after its start; want one within half the watchdog's %v", d, watchdogBound(period))
	}
}
