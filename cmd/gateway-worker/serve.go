package main

import (
	"context"
	"log/slog"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/internal/product/buildinfo"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

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
		Providers: reg.IDs(), Keys: vapid.Names(keys),
		Version: buildinfo.Version(), GoVersion: runtime.Version(), Logger: log,
	})
	if err != nil {
		return nil, err
	}
	health := telemetry.NewHealth(time.Now)
	health.SetRedisFreshness(freshness)
	health.SetReady(dispatch.RegistryCheck, true, "")
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
