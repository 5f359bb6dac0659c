package providers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/timetest"
)

const (
	watchGood = "version: 1\nproviders:\n  - id: fallback\n    kind: generic\n    rate: 10\n    burst: 5\n    max_in_flight: 4\n"
	watchFast = "version: 1\nproviders:\n  - id: fallback\n    kind: generic\n    rate: 20\n    burst: 5\n    max_in_flight: 4\n"
	watchBad  = "version: 1\nproviders:\n  - id: fallback\n    kind: generic\n    rate: fast\n"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fallbackRate(t *testing.T, reg *Registry) float64 {
	t.Helper()
	if reg == nil || reg.Fallback() == nil {
		t.Fatalf("registry %v has no fallback", reg)
	}
	return reg.Fallback().Rate
}

// goodFile writes watchGood to a registry file of the test's own and returns its path.
func goodFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "registry.yaml")
	writeFile(t, path, watchGood)
	return path
}

// loadedWatcher is a Watcher of path after its first Load, which must read watchGood.
func loadedWatcher(t *testing.T, path string) *Watcher {
	t.Helper()
	w := NewWatcher(path)
	// These tests step the two-reads rule by hand; TestWatcherWaitsForTheContentToSettle
	// tests Settle.
	w.Settle = 0
	if reg, err := w.Load(); err != nil || fallbackRate(t, reg) != 10 {
		t.Fatalf("Load = %v, %v; want watchGood's table", reg, err)
	}
	return w
}

// TestWatcherWaitsForTheContentToSettle: a file written in two steps with a pause between them
// shorter than Settle is not loaded half (here cut at "max_in_flight: 6" of 64, which parses),
// however many ticks read the half; the whole is loaded once it has read the same for Settle.
func TestWatcherWaitsForTheContentToSettle(t *testing.T) {
	path := goodFile(t)
	w := NewWatcher(path)
	clock := timetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w.Now = clock.Now
	if _, err := w.Load(); err != nil {
		t.Fatal(err)
	}
	whole := strings.Replace(watchFast, "max_in_flight: 4", "max_in_flight: 64", 1)
	half := whole[:strings.Index(whole, "max_in_flight: 6")+len("max_in_flight: 6")]
	if reg, err := Parse(path, []byte(half)); err != nil || reg.Fallback().MaxInFlight != 6 {
		t.Fatalf("the half parses to %v, %v; the test needs a half that parses", reg, err)
	}
	writeFile(t, path, half)
	for range 9 { // a tick every 100 ms for 900 ms: the half never settles
		if reg, err, ok := w.poll(); ok {
			t.Fatalf("the half-written file was loaded at %s: %v, %v", clock.Now().Format(time.StampMilli), reg, err)
		}
		clock.Add(100 * time.Millisecond)
	}
	writeFile(t, path, whole)
	for range 10 { // read from now on: not settled before a second has passed
		if reg, err, ok := w.poll(); ok {
			t.Fatalf("the whole file was loaded before it settled: %v, %v", reg, err)
		}
		clock.Add(100 * time.Millisecond)
	}
	reg, err, ok := w.poll()
	if !ok || err != nil || reg.Fallback().MaxInFlight != 64 || fallbackRate(t, reg) != 20 {
		t.Fatalf("the whole file after a second: %v, %v, %v; want max_in_flight 64 and rate 20", reg, err, ok)
	}
}

// The ticks are stepped by hand: a change is loaded on the second tick that reads it, a
// content that changes between ticks waits for the last one, and each content is reported once.
func TestWatcherDebouncesAndReportsOnce(t *testing.T) {
	path := goodFile(t)
	w := loadedWatcher(t, path)
	quiet := func(step string) {
		t.Helper()
		if reg, err, ok := w.poll(); ok {
			t.Fatalf("%s: poll reported %v, %v; want nothing", step, reg, err)
		}
	}
	quiet("unchanged file")

	writeFile(t, path, watchFast[:40]) // half written
	quiet("first read of a partial write")
	writeFile(t, path, watchFast)
	quiet("first read of the finished write")
	reg, err, ok := w.poll()
	if !ok || err != nil || fallbackRate(t, reg) != 20 {
		t.Fatalf("second read of the finished write: %v, %v, %v; want rate 20", reg, err, ok)
	}
	quiet("after the reload")

	writeFile(t, path, watchBad)
	quiet("first read of a bad edit")
	_, err, ok = w.poll()
	var list Errors
	if !ok || !errors.As(err, &list) || !strings.Contains(err.Error(), path+":5: providers[0].rate:") {
		t.Fatalf("bad edit: %v, %v; want a Errors naming %s:5 providers[0].rate", err, ok, path)
	}
	quiet("the bad edit again")
	quiet("the bad edit a third time")

	// Putting back the content that was running is a change from the bad one: reported good.
	writeFile(t, path, watchFast)
	quiet("first read of the fix")
	if reg, err, ok := w.poll(); !ok || err != nil || fallbackRate(t, reg) != 20 {
		t.Fatalf("fix: %v, %v, %v; want rate 20", reg, err, ok)
	}
}

func TestWatcherTellsAMissingFileOnceAndItsReturn(t *testing.T) {
	path := goodFile(t)
	w := loadedWatcher(t, path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err, ok := w.poll(); !ok || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("removed file: %v, %v; want ErrNotExist reported", err, ok)
	}
	if reg, err, ok := w.poll(); ok {
		t.Fatalf("still missing: reported %v, %v again", reg, err)
	}
	// The same content as before comes back: the caller heard of the failure, so it hears of
	// the recovery too.
	writeFile(t, path, watchGood)
	w.poll()
	if reg, err, ok := w.poll(); !ok || err != nil || fallbackRate(t, reg) != 10 {
		t.Fatalf("file back: %v, %v, %v; want rate 10", reg, err, ok)
	}
}

// configMap lays a directory out the way the kubelet mounts a ConfigMap: the file is a symlink
// into ..data, itself a symlink to a timestamped directory; an update writes a new directory
// and renames a new ..data over the old one.
type configMap struct {
	t   *testing.T
	dir string
	gen int
}

func newConfigMap(t *testing.T, content string) *configMap {
	c := &configMap{t: t, dir: t.TempDir()}
	c.update(content)
	if err := os.Symlink(filepath.Join("..data", "registry.yaml"), filepath.Join(c.dir, "registry.yaml")); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *configMap) update(content string) {
	c.gen++
	ts := filepath.Join(c.dir, "..2026_12_01_00_00_0"+string(rune('0'+c.gen)))
	if err := os.Mkdir(ts, 0o755); err != nil {
		c.t.Fatal(err)
	}
	writeFile(c.t, filepath.Join(ts, "registry.yaml"), content)
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
}

type report struct {
	reg *Registry
	err error
}

func TestWatcherRunFollowsAConfigMapSwapAndKicks(t *testing.T) {
	cm := newConfigMap(t, watchGood)
	w := loadedWatcher(t, filepath.Join(cm.dir, "registry.yaml"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports, kick, done := make(chan report, 8), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, 5*time.Millisecond, kick, func(reg *Registry, err error) bool { reports <- report{reg, err}; return false })
	}()
	next := func(what string) report {
		t.Helper()
		return timetest.Receive(t, reports, 10*time.Second, what)
	}

	cm.update(watchFast)
	if r := next("after the ..data swap"); r.err != nil || fallbackRate(t, r.reg) != 20 {
		t.Fatalf("after the ..data swap: %v, %v; want rate 20", r.reg, r.err)
	}
	kick <- struct{}{}
	if r := next("after a kick"); r.err != nil || fallbackRate(t, r.reg) != 20 {
		t.Fatalf("a kick reloads the unchanged file: %v, %v", r.reg, r.err)
	}
	cm.update(watchBad)
	if r := next("after a bad swap"); r.err == nil || r.reg != nil {
		t.Fatalf("a bad swap: %v, %v; want only an error", r.reg, r.err)
	}
	cancel()
	<-done
	select {
	case r := <-reports:
		t.Fatalf("a report after the bad one: %v, %v", r.reg, r.err)
	default:
	}
}

// A table that could not be applied yet (the caller says retry) is offered again once its
// content settles again, without any edit.
func TestWatcherOffersAgainWhatCouldNotBeApplied(t *testing.T) {
	path := goodFile(t)
	w := loadedWatcher(t, path)
	writeFile(t, path, watchFast)
	w.poll()
	reg, err, ok := w.poll()
	if !ok || err != nil || fallbackRate(t, reg) != 20 {
		t.Fatalf("edit: %v, %v, %v", reg, err, ok)
	}
	w.offered(true)
	w.poll()
	if reg, err, ok := w.poll(); !ok || err != nil || fallbackRate(t, reg) != 20 {
		t.Fatalf("after a retry: %v, %v, %v; want the same table offered again", reg, err, ok)
	}
	w.offered(false)
	w.poll()
	if reg, err, ok := w.poll(); ok {
		t.Fatalf("after it was applied: offered %v, %v again", reg, err)
	}
}
