package dispatch

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/providers"
)

// TestReloaderAppliesTheFileOnSIGHUP: a SIGHUP applies the edited file with a sender built for
// it, a file with a mistake leaves the table in force, and once the worker shuts down a SIGHUP
// is ignored, said so; the sender in force is the last applied one's.
func TestReloaderAppliesTheFileOnSIGHUP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{registry: testRegistry(nil)})
	path := filepath.Join(t.TempDir(), "registry.yaml")
	write := func(content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(testRegistry(nil))
	watcher := providers.NewWatcher(path)
	reg, err := watcher.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config(e.store)
	cfg.Registry, cfg.Sender = reg, e.senderFor(reg)
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()
	waitFor(t, "the worker running", func() bool { return strings.Contains(e.logs.String(), "dispatch: running") })

	var built []*adapter.Sender // only Run's goroutine appends, until Run returns
	rl := &Reloader{Watcher: watcher, Worker: w, Logger: cfg.Logger, Sender: cfg.Sender.(*adapter.Sender), Registry: reg,
		Build: func(reg *providers.Registry, prev *adapter.Sender) (*adapter.Sender, error) {
			s := e.senderFor(reg)
			built = append(built, s)
			return s, nil
		}}
	hup, stopped, reloads := make(chan os.Signal, 1), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(reloads)
		rl.Run(ctx, stopped, hup, 0)
	}()

	write(testRegistry(map[string]string{"apple": "rate: 7"}))
	hup <- syscall.SIGHUP
	waitFor(t, "the reload", func() bool { return strings.Contains(e.logs.String(), "msg=\"registry reloaded\"") })
	if got := w.limits.get("apple").tokens.Rate(); got != 7 {
		t.Errorf("apple's rate after the reload = %g, want 7", got)
	}

	write("version: 1\nproviders: [")
	hup <- syscall.SIGHUP
	waitFor(t, "the refusal", func() bool {
		return strings.Contains(e.logs.String(), "registry reload refused; the running table stays in force")
	})
	if got := w.limits.get("apple").tokens.Rate(); got != 7 {
		t.Errorf("apple's rate after a refused reload = %g, want 7 still", got)
	}

	cancel()
	hup <- syscall.SIGHUP
	waitFor(t, "the SIGHUP ignored", func() bool {
		return strings.Contains(e.logs.String(), "SIGHUP ignored: the worker is shutting down")
	})
	if err := <-runDone; err != nil {
		t.Errorf("Run: %v", err)
	}
	close(stopped)
	<-reloads
	if len(built) != 1 || rl.Sender != built[0] || rl.Registry == reg {
		t.Errorf("%d senders built; the one in force is the reload's: %v", len(built), rl.Sender == built[len(built)-1])
	}
}

// TestReloaderWithoutAFile: with the built-in table a SIGHUP says there is nothing to reload.
func TestReloaderWithoutAFile(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	rl := &Reloader{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	hup, stopped, done := make(chan os.Signal, 1), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		rl.Run(context.Background(), stopped, hup, 0)
	}()
	hup <- syscall.SIGHUP
	waitFor(t, "the warning", func() bool { return strings.Contains(logs.String(), "SIGHUP: nothing to reload") })
	close(stopped)
	<-done
}
