package dispatch

import (
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// flagDefaults are the worker command's defaults, as its flags set them.
func flagDefaults() (Config, stream.Options) {
	return Config{
			Backoff:    Backoff{Base: DefaultRetryBase, Cap: DefaultRetryCap, MaxRetries: DefaultMaxRetries},
			MaxDelayed: DefaultMaxDelayed, MaxPerRecipient: DefaultMaxPerRecipient,
			VisibilityTimeout: DefaultVisibilityTimeout, MaxDeliveries: DefaultMaxDeliveries,
			Grace: DefaultGrace, RecordGrace: DefaultRecordGrace, Block: DefaultBlock,
			ReclaimEvery: DefaultReclaimEvery, PromoteEvery: DefaultPromoteEvery,
			StartupTimeout: DefaultStartupTimeout, StatsEvery: DefaultStatsEvery,
			LaneGather:       DefaultLaneGather,
			MaxScheduleAhead: DefaultMaxScheduleAhead, CampaignLaneDepth: DefaultCampaignLaneDepth,
		}, stream.Options{SentTTL: stream.DefaultSentTTL, GoneTTL: stream.DefaultGoneTTL,
			ResultsMaxLen: stream.DefaultResultsMaxLen, GoneMaxLen: stream.DefaultGoneMaxLen, DeadMaxLen: stream.DefaultDeadMaxLen,
			CommitLinger: stream.DefaultCommitLinger}
}

// TestCheckFlags: the defaults pass; a value Config would take for "the default", or that the
// worker would run badly with, is refused with its flag named.
func TestCheckFlags(t *testing.T) {
	cfg, so := flagDefaults()
	if err := CheckFlags(&cfg, &so, providers.DefaultWatchEvery, 3*DefaultProbeEvery); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	cases := []struct {
		name string
		edit func(*Config, *stream.Options)
		want string
	}{
		{"grace", func(c *Config, _ *stream.Options) { c.Grace = 0 }, "--grace must be more than 0, got 0s"},
		{"retries", func(c *Config, _ *stream.Options) { c.Backoff.MaxRetries = -1 }, "--max-retries must not be negative (0: none), got -1"},
		{"maxlen", func(_ *Config, so *stream.Options) { so.DeadMaxLen = -1 }, "--dead-maxlen must not be negative (0: none), got -1"},
		{"linger", func(c *Config, _ *stream.Options) { c.LaneGather = 2 * time.Second }, "--lane-gather must be 0 (none) to 1s, got 2s"},
		{"cap", func(c *Config, _ *stream.Options) { c.Backoff.Cap = time.Second }, "--retry-cap 1s is shorter than --retry-base 5s"},
		{"sent-ttl", func(_ *Config, so *stream.Options) { so.SentTTL = time.Millisecond }, "--sent-ttl must be at least 1s (the window counts whole seconds), got 1ms"},
		{"campaign lane depth", func(c *Config, _ *stream.Options) { c.CampaignLaneDepth = 0 }, "--campaign-lane-depth must be at least 1, got 0"},
		{"schedule horizon none", func(c *Config, _ *stream.Options) { c.MaxScheduleAhead = 0 }, "--max-schedule-ahead must be more than 0, got 0s"},
		{"schedule horizon too far", func(c *Config, _ *stream.Options) { c.MaxScheduleAhead = 367 * 24 * time.Hour },
			"--max-schedule-ahead must be at most 8784h0m0s (a scheduled job holds its memory in Redis until its send_at), got 8808h0m0s"},
	}
	for _, c := range cases {
		cfg, so := flagDefaults()
		c.edit(&cfg, &so)
		if err := CheckFlags(&cfg, &so, 0, 3*DefaultProbeEvery); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	cfg, so = flagDefaults()
	if err := CheckFlags(&cfg, &so, time.Millisecond, 3*DefaultProbeEvery); err == nil {
		t.Error("--registry-check-every 1ms: no error")
	}
	if err := CheckFlags(&cfg, &so, 0, DefaultProbeEvery); err == nil {
		t.Error("--redis-check-fresh of one probe: no error")
	}
}

// TestFlagNones: the command line's 0 becomes Config's explicit none; other values stay.
func TestFlagNones(t *testing.T) {
	cfg, so := flagDefaults()
	cfg.MaxDelayed, cfg.Backoff.MaxRetries, so.CommitLinger, so.GoneMaxLen = 0, 0, 0, 0
	FlagNones(&cfg, &so)
	if cfg.MaxDelayed != NoLimit || cfg.Backoff.MaxRetries != NoRetries || so.CommitLinger != stream.NoLinger || so.GoneMaxLen != stream.NoLimit {
		t.Errorf("after FlagNones: %d %d %v %d; want every one none", cfg.MaxDelayed, cfg.Backoff.MaxRetries, so.CommitLinger, so.GoneMaxLen)
	}
	if cfg.MaxPerRecipient != DefaultMaxPerRecipient || so.DeadMaxLen != stream.DefaultDeadMaxLen || cfg.LaneGather != DefaultLaneGather {
		t.Error("FlagNones changed a value that was not 0")
	}
}
