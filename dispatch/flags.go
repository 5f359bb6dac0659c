package dispatch

import (
	"fmt"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// Bounds of the worker command's values that no zero or negative convention covers.
const (
	minRegistryCheck = 100 * time.Millisecond // a file read more often only burns CPU
	// maxLinger bounds --commit-linger and --lane-gather: each adds up to its value to the
	// enqueue-to-answer latency of a paced provider's jobs, and a wait that long already shares
	// its round trip with every job the provider's rate lets through meanwhile.
	maxLinger = time.Second
	// minRedisFresh is three of the prober's checks: a shorter bound flaps /readyz between
	// two checks, and 0 would never be ready.
	minRedisFresh = 3 * DefaultProbeEvery
	// MaxScheduleAheadLimit bounds --max-schedule-ahead: the ttl a job may give is about 68
	// years, but a scheduled job holds its memory in Redis until its send_at, and a year is
	// already further out than a push is planned.
	MaxScheduleAheadLimit = 366 * 24 * time.Hour
)

// CheckFlags refuses values of the worker command's flags (gateway-worker run), given in cfg and
// so as the command line has them, that the worker would otherwise take for "the default" (a
// zero or negative duration, in Config's convention) or run badly with, so that what an
// operator wrote is what runs or is refused with the flag named. registryEvery and redisFresh
// are --registry-check-every and --redis-check-fresh.
func CheckFlags(cfg *Config, so *stream.Options, registryEvery, redisFresh time.Duration) error {
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
	case cfg.MaxScheduleAhead > MaxScheduleAheadLimit:
		return fmt.Errorf("--max-schedule-ahead must be at most %s (a scheduled job holds its memory in Redis until its send_at), got %s", MaxScheduleAheadLimit, cfg.MaxScheduleAhead)
	case cfg.CampaignLaneDepth < 1:
		return fmt.Errorf("--campaign-lane-depth must be at least 1, got %d", cfg.CampaignLaneDepth)
	case cfg.MaxDeliveries < 1:
		return fmt.Errorf("--max-deliveries must be at least 1, got %d", cfg.MaxDeliveries)
	case cfg.Backoff.Cap < cfg.Backoff.Base:
		return fmt.Errorf("--retry-cap %s is shorter than --retry-base %s", cfg.Backoff.Cap, cfg.Backoff.Base)
	case cfg.Block >= cfg.Grace:
		return fmt.Errorf("--block %s must be shorter than --grace %s: shutdown waits up to --block for each reader", cfg.Block, cfg.Grace)
	case so.SentTTL < time.Second:
		return fmt.Errorf("--sent-ttl must be at least 1s (the window counts whole seconds), got %s", so.SentTTL)
	case cfg.RecordGrace <= so.CommitLinger:
		return fmt.Errorf("--record-grace %s must be longer than --commit-linger %s: a record may wait that long before it is written", cfg.RecordGrace, so.CommitLinger)
	case registryEvery < 0 || registryEvery > 0 && registryEvery < minRegistryCheck:
		return fmt.Errorf("--registry-check-every must be 0 (only SIGHUP) or at least %s, got %s", minRegistryCheck, registryEvery)
	case redisFresh < minRedisFresh:
		return fmt.Errorf("--redis-check-fresh must be at least %s (three background checks), got %s", minRedisFresh, redisFresh)
	}
	return nil
}

// FlagNones turns the worker command's 0 ("none") of the caps, the retries and the waits,
// checked by CheckFlags, into cfg's and so's explicit none: in Config 0 means "the default".
func FlagNones(cfg *Config, so *stream.Options) {
	for _, v := range []*int64{&cfg.MaxDelayed, &cfg.MaxPerRecipient} {
		if *v == 0 {
			*v = NoLimit
		}
	}
	for _, v := range []*int64{&so.ResultsMaxLen, &so.GoneMaxLen, &so.DeadMaxLen} {
		if *v == 0 {
			*v = stream.NoLimit
		}
	}
	if cfg.Backoff.MaxRetries == 0 {
		cfg.Backoff.MaxRetries = NoRetries
	}
	if so.CommitLinger == 0 {
		so.CommitLinger = stream.NoLinger
	}
	if cfg.LaneGather == 0 {
		cfg.LaneGather = NoLinger
	}
}
