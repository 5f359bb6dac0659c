package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// RegistryCheck is the readiness check that says the registry in force loaded.
const RegistryCheck = "registry"

// Reloader applies edits of the registry file to a running Worker: on every change its
// watcher sees, and on SIGHUP. Each reload builds a sender for the new table that takes over
// the old one's connections where it can, hands both to Worker.Reload, and retires the old
// sender once the sends it started have ended.
type Reloader struct {
	Watcher *providers.Watcher // nil: the built-in table, nothing to reload
	Worker  *Worker
	// Build makes the sender for a registry (its adapters' timeouts and hosts), sharing the
	// running one's signer and taking over prev's connections where it can.
	Build   func(reg *providers.Registry, prev *adapter.Sender) (*adapter.Sender, error)
	Metrics *telemetry.Metrics
	Health  *telemetry.Health
	Logger  *slog.Logger

	// Sender and Registry are those in force: the ones Worker started with, then each
	// reload's. Run's goroutine owns them until Run returns.
	Sender   *adapter.Sender
	Registry *providers.Registry

	stopped <-chan struct{} // Run's: closed once the worker's Run has returned
}

// Run reloads on every change of the file seen every period (0: only on SIGHUP) and on every
// signal from hup, until ctx (the worker's shutdown) ends or the worker stops of itself
// (stopped is closed); after ctx ends it tells each SIGHUP that it is ignored, until stopped
// is closed. The caller keeps hup subscribed to SIGHUP for its whole run: a SIGHUP whose
// default action (the end of the process) took over during the drain would cut the sends in
// flight, and another replica would send them again.
func (r *Reloader) Run(ctx context.Context, stopped <-chan struct{}, hup <-chan os.Signal, period time.Duration) {
	// The watcher ends with the worker, also when the worker stops without a signal (it refused
	// to start, or Redis failed it): nothing is left to reload then.
	r.stopped = stopped
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	kick := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopped:
				return
			case <-hup:
				switch {
				case ctx.Err() != nil:
					r.Logger.Warn("SIGHUP ignored: the worker is shutting down")
				case r.Watcher == nil:
					r.Logger.Warn("SIGHUP: nothing to reload: the worker runs the built-in registry (start it with --registry FILE)")
				default:
					r.Logger.Info("SIGHUP: reloading the registry", "file", r.Watcher.Path())
					select {
					case kick <- struct{}{}:
					case <-ctx.Done():
						r.Logger.Warn("SIGHUP ignored: the worker is shutting down")
					}
				}
			}
		}
	}()
	if r.Watcher != nil {
		if period <= 0 {
			period = time.Duration(1<<63 - 1) // the ticker never fires; only SIGHUP reloads
		}
		r.Watcher.Run(ctx, period, kick, func(reg *providers.Registry, err error) bool { return r.apply(ctx, reg, err) })
	}
	<-stopped
}

// workerStopped reports whether the worker's Run has returned: a Reload that failed then was
// refused for that alone, not for the table.
func (r *Reloader) workerStopped() bool {
	select {
	case <-r.stopped:
		return true
	default:
		return false
	}
}

// apply is one reload: a registry that fails to load or that the worker refuses leaves the
// running table in force, with each reason logged and the success gauge at 0. retry is true
// when the table itself was good and the failure may pass (Redis could not create a new
// lane's group): the watcher offers it again.
func (r *Reloader) apply(ctx context.Context, reg *providers.Registry, err error) (retry bool) {
	now := time.Now()
	if err != nil {
		r.refused(err)
		return false
	}
	sender, err := r.Build(reg, r.Sender)
	if err != nil {
		r.refused(err)
		return true
	}
	if err := r.Worker.Reload(ctx, reg, sender); err != nil {
		sender.Retire(r.Sender)
		if ctx.Err() != nil || r.workerStopped() {
			r.Logger.Warn("registry change not applied: the worker has stopped or is stopping")
			return false
		}
		r.refused(err)
		return !errors.Is(err, ErrReloadRefused)
	}
	old, oldReg := r.Sender, r.Registry
	r.Sender, r.Registry = sender, reg
	// Sends in flight finish on the old sender; once the longest of its timeouts has passed
	// none is left, and the connections the new sender did not take over are closed.
	time.AfterFunc(longestTimeout(oldReg)+time.Second, func() { old.Retire(sender) })
	r.Metrics.RegistryReload(true, now)
	r.Health.SetReady(RegistryCheck, true, "")
	r.Logger.Info("registry reloaded", "file", r.Watcher.Path(), "providers", len(reg.Providers()))
	return false
}

// refused logs why a reload did not happen, one line per problem so each carries its
// file:line, and sets the success gauge to 0. Readiness stays: the running table is good.
func (r *Reloader) refused(err error) {
	r.Metrics.RegistryReload(false, time.Now())
	var list providers.Errors
	if errors.As(err, &list) {
		for _, e := range list {
			r.Logger.Error("registry reload refused; the running table stays in force", "err", e.Error(),
				"file", e.File, "line", e.Line, "field", e.Field)
		}
		return
	}
	r.Logger.Error("registry reload refused; the running table stays in force", "err", err.Error())
}

// longestTimeout is the longest send timeout of any provider in reg.
func longestTimeout(reg *providers.Registry) time.Duration {
	var d time.Duration
	for _, p := range reg.Providers() {
		d = max(d, p.Timeout)
	}
	return d
}
