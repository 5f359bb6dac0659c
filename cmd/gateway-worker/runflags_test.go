package main

import (
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// flagDefaults are the worker command's defaults, as its flags set them.
func flagDefaults() (dispatch.Config, stream.Options) {
	return dispatch.Config{
			Backoff:    dispatch.Backoff{Base: dispatch.DefaultRetryBase, Cap: dispatch.DefaultRetryCap, MaxRetries: dispatch.DefaultMaxRetries},
			MaxDelayed: dispatch.DefaultMaxDelayed, MaxPerRecipient: dispatch.DefaultMaxPerRecipient,
			VisibilityTimeout: dispatch.DefaultVisibilityTimeout, MaxDeliveries: dispatch.DefaultMaxDeliveries,
			Grace: dispatch.DefaultGrace, RecordGrace: dispatch.DefaultRecordGrace, Block: dispatch.DefaultBlock,
			ReclaimEvery: dispatch.DefaultReclaimEvery, PromoteEvery: dispatch.DefaultPromoteEvery,
			StartupTimeout: dispatch.DefaultStartupTimeout, StatsEvery: dispatch.DefaultStatsEvery,
			LaneGather:       dispatch.DefaultLaneGather,
			MaxScheduleAhead: dispatch.DefaultMaxScheduleAhead, CampaignLaneDepth: dispatch.DefaultCampaignLaneDepth,
		}, stream.Options{SentTTL: stream.DefaultSentTTL, GoneTTL: stream.DefaultGoneTTL,
			ResultsMaxLen: stream.DefaultResultsMaxLen, GoneMaxLen: stream.DefaultGoneMaxLen, DeadMaxLen: stream.DefaultDeadMaxLen,
			CommitLinger: stream.DefaultCommitLinger}
}

// TestCheckRunFlags: the defaults pass; a value that cannot run, or that the worker would run
// badly with, is refused with its flag named.
func TestCheckRunFlags(t *testing.T) {
	cfg, so := flagDefaults()
	if err := checkRunFlags(&cfg, &so, providers.DefaultWatchEvery, 3*dispatch.DefaultProbeEvery); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	cases := []struct {
		name string
		edit func(*dispatch.Config, *stream.Options)
		want string
	}{
		{"grace", func(c *dispatch.Config, _ *stream.Options) { c.Grace = 0 }, "--grace must be more than 0, got 0s"},
		{"retries", func(c *dispatch.Config, _ *stream.Options) { c.Backoff.MaxRetries = -1 }, "--max-retries must not be negative (0: none), got -1"},
		{"maxlen", func(_ *dispatch.Config, so *stream.Options) { so.DeadMaxLen = -1 }, "--dead-maxlen must not be negative (0: none), got -1"},
		{"linger", func(c *dispatch.Config, _ *stream.Options) { c.LaneGather = 2 * time.Second }, "--lane-gather must be 0 (none) to 1s, got 2s"},
		{"cap", func(c *dispatch.Config, _ *stream.Options) { c.Backoff.Cap = time.Second }, "--retry-cap 1s is shorter than --retry-base 5s"},
		{"sent-ttl", func(_ *dispatch.Config, so *stream.Options) { so.SentTTL = time.Minute },
			"--sent-ttl 1m0s must be longer than --visibility-timeout 1m0s: the window must still hold a job when another replica takes over its entry"},
		{"campaign lane depth", func(c *dispatch.Config, _ *stream.Options) { c.CampaignLaneDepth = 0 }, "--campaign-lane-depth must be at least 1, got 0"},
		{"schedule horizon none", func(c *dispatch.Config, _ *stream.Options) { c.MaxScheduleAhead = 0 }, "--max-schedule-ahead must be more than 0, got 0s"},
		{"schedule horizon too far", func(c *dispatch.Config, _ *stream.Options) { c.MaxScheduleAhead = 367 * 24 * time.Hour },
			"--max-schedule-ahead must be at most 8784h0m0s (a scheduled job holds its memory in Redis until its send_at), got 8808h0m0s"},
	}
	for _, c := range cases {
		cfg, so := flagDefaults()
		c.edit(&cfg, &so)
		if err := checkRunFlags(&cfg, &so, 0, 3*dispatch.DefaultProbeEvery); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	cfg, so = flagDefaults()
	if err := checkRunFlags(&cfg, &so, time.Millisecond, 3*dispatch.DefaultProbeEvery); err == nil {
		t.Error("--registry-check-every 1ms: no error")
	}
	if err := checkRunFlags(&cfg, &so, 0, dispatch.DefaultProbeEvery); err == nil {
		t.Error("--redis-check-fresh of one probe: no error")
	}
}
