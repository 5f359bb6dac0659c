package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/internal/product/buildinfo"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// registryCheck is the readiness check that says the registry in force loaded.
const registryCheck = "registry"

// observe is what run sets up for operators to watch it: the metrics, the health state behind
// /livez and /readyz, and the listener that serves them.
type observe struct {
	metrics *telemetry.Metrics
	health  *telemetry.Health
	server  *telemetry.Server // nil with --http ""
}

// newObserve builds the metrics for reg and keys and binds the listener at addr ("" for none),
// so that a busy or bad address fails the start with the flag named.
func newObserve(addr string, pprof bool, freshness time.Duration, reg *providers.Registry, keys map[string]*vapid.Key, log *slog.Logger) (*observe, error) {
	// go-redis logs through its own global logger; route it through slog like every other line.
	redis.SetLogger(telemetry.RedisLogger(log))
	promReg := telemetry.NewRegistry()
	metrics, err := telemetry.NewMetrics(promReg, telemetry.MetricsOptions{
		Providers: reg.IDs(), Keys: keyNames(keys),
		Version: buildinfo.Version(), GoVersion: runtime.Version(), Logger: log,
	})
	if err != nil {
		return nil, err
	}
	health := telemetry.NewHealth(time.Now)
	health.SetRedisFreshness(freshness)
	health.SetReady(registryCheck, true, "")
	server, err := telemetry.NewServer(telemetry.ServerOptions{Addr: addr, Gatherer: promReg, Health: health, Pprof: pprof, Logger: log})
	if err != nil {
		return nil, err
	}
	return &observe{metrics: metrics, health: health, server: server}, nil
}

// serve runs the listener until stop, which shuts it down; run calls stop after the worker
// has stopped, so that /readyz says "draining" for the whole shutdown.
func (o *observe) serve(log *slog.Logger) (stop func()) {
	if o.server == nil {
		return func() {}
	}
	log.Info("http listener", "addr", o.server.Addr(), "paths", []string{telemetry.MetricsPath, telemetry.LivezPath, telemetry.ReadyzPath})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := o.server.Serve(); err != nil {
			log.Error("http listener stopped", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := o.server.Shutdown(ctx); err != nil {
			log.Warn("http listener shutdown", "err", err)
		}
		<-done
	}
}

func keyNames(keys map[string]*vapid.Key) []string {
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// endpointHashKey is the key of the endpoint hash in log lines. It is derived from the VAPID
// key that sorts first by name, which every replica holds and no log line reveals, so that
// every replica hashes an endpoint alike with nothing more to configure, and a reader of the
// logs cannot test a guessed endpoint against a hash.
func endpointHashKey(keys map[string]*vapid.Key) ([]byte, error) {
	names := keyNames(keys)
	if len(names) == 0 {
		return nil, errors.New("no VAPID key")
	}
	pem, err := keys[names[0]].MarshalPEM()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("webpush-gateway endpoint hash\x00"), pem...))
	return sum[:], nil
}

// reloader applies edits of the registry file to the running worker: on every change the
// watcher sees, and on SIGHUP.
type reloader struct {
	watcher *providers.Watcher // nil: the built-in table, nothing to reload
	worker  *dispatch.Worker
	// build makes the sender for a registry (its adapters' timeouts and hosts), sharing the
	// running one's signer and taking over prev's connections where it can.
	build   func(reg *providers.Registry, prev *adapter.Sender) (*adapter.Sender, error)
	metrics *telemetry.Metrics
	health  *telemetry.Health
	log     *slog.Logger

	sender  *adapter.Sender // in force; owned by the watcher's goroutine until run returns
	reg     *providers.Registry
	stopped <-chan struct{} // run's: closed once the worker's Run has returned
}

// run reloads on every change of the file seen every period (0: only on SIGHUP) and on every
// signal from hup, until ctx (the worker's shutdown) ends or the worker stops of itself
// (stopped is closed); after ctx ends it tells each SIGHUP that it is ignored, until stopped is
// closed. hup stays subscribed to SIGHUP for the caller's whole
// run: a SIGHUP whose default action (the end of the process) took over during the drain
// would cut the sends in flight, and another replica would send them again.
func (r *reloader) run(ctx context.Context, stopped <-chan struct{}, hup <-chan os.Signal, period time.Duration) {
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
					r.log.Warn("SIGHUP ignored: the worker is shutting down")
				case r.watcher == nil:
					r.log.Warn("SIGHUP: nothing to reload: the worker runs the built-in registry (start it with --registry FILE)")
				default:
					r.log.Info("SIGHUP: reloading the registry", "file", r.watcher.Path())
					select {
					case kick <- struct{}{}:
					case <-ctx.Done():
						r.log.Warn("SIGHUP ignored: the worker is shutting down")
					}
				}
			}
		}
	}()
	if r.watcher != nil {
		if period <= 0 {
			period = time.Duration(1<<63 - 1) // the ticker never fires; only SIGHUP reloads
		}
		r.watcher.Run(ctx, period, kick, func(reg *providers.Registry, err error) bool { return r.apply(ctx, reg, err) })
	}
	<-stopped
}

// workerStopped reports whether the worker's Run has returned: a Reload that failed then was
// refused for that alone, not for the table.
func (r *reloader) workerStopped() bool {
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
func (r *reloader) apply(ctx context.Context, reg *providers.Registry, err error) (retry bool) {
	now := time.Now()
	if err != nil {
		r.refused(err)
		return false
	}
	sender, err := r.build(reg, r.sender)
	if err != nil {
		r.refused(err)
		return true
	}
	if err := r.worker.Reload(ctx, reg, sender); err != nil {
		sender.Retire(r.sender)
		if ctx.Err() != nil || r.workerStopped() {
			r.log.Warn("registry change not applied: the worker has stopped or is stopping")
			return false
		}
		r.refused(err)
		return !errors.Is(err, dispatch.ErrReloadRefused)
	}
	old, oldReg := r.sender, r.reg
	r.sender, r.reg = sender, reg
	// Sends in flight finish on the old sender; once the longest of its timeouts has passed
	// none is left, and the connections the new sender did not take over are closed.
	time.AfterFunc(longestTimeout(oldReg)+time.Second, func() { old.Retire(sender) })
	r.metrics.RegistryReload(true, now)
	r.health.SetReady(registryCheck, true, "")
	r.log.Info("registry reloaded", "file", r.watcher.Path(), "providers", len(reg.Providers()))
	return false
}

// refused logs why a reload did not happen, one line per problem so each carries its
// file:line, and sets the success gauge to 0. Readiness stays: the running table is good.
func (r *reloader) refused(err error) {
	r.metrics.RegistryReload(false, time.Now())
	var list providers.Errors
	if errors.As(err, &list) {
		for _, e := range list {
			r.log.Error("registry reload refused; the running table stays in force", "err", e.Error(),
				"file", e.File, "line", e.Line, "field", e.Field)
		}
		return
	}
	r.log.Error("registry reload refused; the running table stays in force", "err", err.Error())
}

// longestTimeout is the longest send timeout of any provider in reg.
func longestTimeout(reg *providers.Registry) time.Duration {
	var d time.Duration
	for _, p := range reg.Providers() {
		d = max(d, p.Timeout)
	}
	return d
}
