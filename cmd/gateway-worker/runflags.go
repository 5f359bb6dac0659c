package main

import (
	"fmt"
	"time"

	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// Bounds of run's values beyond "0 is none" and "not negative".
const (
	minRegistryCheck = 100 * time.Millisecond // a file read more often only burns CPU
	// maxLinger bounds --commit-linger and --lane-gather: each adds up to its value to the
	// enqueue-to-answer latency of a paced provider's jobs, and a wait that long already shares
	// its round trip with every job the provider's rate lets through meanwhile.
	maxLinger = time.Second
	// minRedisFresh is three of the prober's checks: a shorter bound flaps /readyz between
	// two checks, and 0 would never be ready.
	minRedisFresh = 3 * dispatch.DefaultProbeEvery
	// maxScheduleAhead bounds --max-schedule-ahead: the ttl a job may give is about 68 years,
	// but a scheduled job holds its memory in Redis until its send_at, and a year is already
	// further out than a push is planned.
	maxScheduleAhead = 366 * 24 * time.Hour
)

// checkRunFlags refuses values of run's flags, given in cfg and so as the command line has
// them, that cannot run or would run badly: a duration that cannot be none at 0 or below, a
// negative cap, a linger past maxLinger, and settings at odds with each other, each with its
// flag named. registryEvery and redisFresh are --registry-check-every and --redis-check-fresh.
func checkRunFlags(cfg *dispatch.Config, so *stream.Options, registryEvery, redisFresh time.Duration) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--retry-base", cfg.Backoff.Base}, {"--retry-cap", cfg.Backoff.Cap}, {"--visibility-timeout", cfg.VisibilityTimeout},
		{"--sent-ttl", so.SentTTL}, {"--gone-ttl", so.GoneTTL}, {"--grace", cfg.Grace}, {"--record-grace", cfg.RecordGrace},
		{"--block", cfg.Block}, {"--reclaim-every", cfg.ReclaimEvery}, {"--promote-every", cfg.PromoteEvery},
		{"--startup-timeout", cfg.StartupTimeout}, {"--stats-every", cfg.StatsEvery},
		{"--max-schedule-ahead", cfg.MaxScheduleAhead},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s must be more than 0, got %s", d.flag, d.v)
		}
	}
	for _, n := range []struct {
		flag string
		v    int64
	}{
		{"--max-retries", int64(cfg.Backoff.MaxRetries)}, {"--max-delayed", cfg.MaxDelayed},
		{"--max-per-recipient", cfg.MaxPerRecipient}, {"--results-maxlen", so.ResultsMaxLen},
		{"--gone-maxlen", so.GoneMaxLen}, {"--dead-maxlen", so.DeadMaxLen},
	} {
		if n.v < 0 {
			return fmt.Errorf("%s must not be negative (0: none), got %d", n.flag, n.v)
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--commit-linger", so.CommitLinger}, {"--lane-gather", cfg.LaneGather}} {
		if d.v < 0 || d.v > maxLinger {
			return fmt.Errorf("%s must be 0 (none) to %s, got %s", d.flag, maxLinger, d.v)
		}
	}
	switch {
	case cfg.MaxScheduleAhead > maxScheduleAhead:
		return fmt.Errorf("--max-schedule-ahead must be at most %s (a scheduled job holds its memory in Redis until its send_at), got %s", maxScheduleAhead, cfg.MaxScheduleAhead)
	case cfg.CampaignLaneDepth < 1:
		return fmt.Errorf("--campaign-lane-depth must be at least 1, got %d", cfg.CampaignLaneDepth)
	case cfg.MaxDeliveries < 1:
		return fmt.Errorf("--max-deliveries must be at least 1, got %d", cfg.MaxDeliveries)
	case cfg.Backoff.Cap < cfg.Backoff.Base:
		return fmt.Errorf("--retry-cap %s is shorter than --retry-base %s", cfg.Backoff.Cap, cfg.Backoff.Base)
	case cfg.Block >= cfg.Grace:
		return fmt.Errorf("--block %s must be shorter than --grace %s: shutdown waits up to --block for each reader", cfg.Block, cfg.Grace)
	case so.SentTTL <= cfg.VisibilityTimeout:
		return fmt.Errorf("--sent-ttl %s must be longer than --visibility-timeout %s: the window must still hold a job when another replica takes over its entry", so.SentTTL, cfg.VisibilityTimeout)
	case cfg.RecordGrace <= so.CommitLinger:
		return fmt.Errorf("--record-grace %s must be longer than --commit-linger %s: a record may wait that long before it is written", cfg.RecordGrace, so.CommitLinger)
	case registryEvery < 0 || registryEvery > 0 && registryEvery < minRegistryCheck:
		return fmt.Errorf("--registry-check-every must be 0 (only SIGHUP) or at least %s, got %s", minRegistryCheck, registryEvery)
	case redisFresh < minRedisFresh:
		return fmt.Errorf("--redis-check-fresh must be at least %s (three background checks), got %s", minRedisFresh, redisFresh)
	}
	return nil
}
