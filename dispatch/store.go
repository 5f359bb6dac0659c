package dispatch

import (
	"context"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// Store is what a worker needs of Redis: the reads and state changes of its loops, each of
// which names the few methods it calls below. *stream.Store is one; the operators' queries are
// stream/inspect's, which a worker never needs.
type Store interface {
	storeLayout
	startupStore
	intakeStore
	laneStore
	retryStore
	requeueStore
	upkeepStore
	heartbeatStore
}

// storeLayout is the shards and stream keys every loop runs over.
type storeLayout interface {
	Shards() int
	Consumer() string
	Keys(shard int) stream.Keys
}

// startupStore is what the start of a worker does: the groups and scripts, and the check of
// lanes no provider of the registry reads.
type startupStore interface {
	Setup(ctx context.Context, providers []string) error
	Lanes(ctx context.Context, shard int, skip ...string) ([]stream.LaneSize, error)
}

// intakeStore is the intake reader's: new entries of one intake, and their move to a lane, to
// the delayed set (scheduled) or to the dead stream.
type intakeStore interface {
	ReadIntake(ctx context.Context, shard int, class jobfmt.Class, count int, block time.Duration) ([]stream.Entry, []stream.Refusal, error)
	ToLane(ctx context.Context, e stream.Entry, provider string, class jobfmt.Class, jobID, rawJob string, enqueuedAtMs int64) (stream.LaneVerdict, error)
	ToScheduled(ctx context.Context, e stream.Entry, r stream.ScheduledRecord) (stream.LaneVerdict, error)
	ToDead(ctx context.Context, e stream.Entry, d stream.DeadRecord) (bool, error)
}

// laneStore is a lane's: its reads (as many entries as it has slots and tokens for, and the
// wait for more while it holds none) and the state changes that end an entry's turn.
type laneStore interface {
	ReadLanes(ctx context.Context, shard int, provider string, r stream.LaneRead) ([]stream.Entry, *stream.LaneMark, error)
	WaitLanes(ctx context.Context, shard int, provider string, mark stream.LaneMark, bulk bool, block time.Duration) (bool, error)
	WasSent(ctx context.Context, shard int, id string) (bool, error)
	Owns(ctx context.Context, e stream.Entry) (bool, error)
	IsGone(ctx context.Context, shard int, endpoint string) (bool, error)
	Finish(ctx context.Context, e stream.Entry, r stream.Result) (bool, error)
	ToDead(ctx context.Context, e stream.Entry, d stream.DeadRecord) (bool, error)
	ToDelayed(ctx context.Context, e stream.Entry, r stream.RetryRecord) (stream.RetryVerdict, error)
	AckSent(ctx context.Context, e stream.Entry, jobID string) (bool, error)
	Recorded(ctx context.Context, shard int, r stream.Result, since time.Time, limit int) (found, cut bool, err error)
}

// retryStore is the promoter's: retries that are due go back to their lanes.
type retryStore interface {
	PromoteDue(ctx context.Context, shard int, now time.Time, limit int) (int, error)
}

// requeueStore is the reclaimer's, and the start's: entries a consumer that is gone left
// pending go back to their streams.
type requeueStore interface {
	Requeue(ctx context.Context, shard int, stream string, r stream.Requeue) (stream.Requeued, error)
}

// upkeepStore is the janitor's, the stats loop's and the write prober's.
type upkeepStore interface {
	CleanConsumers(ctx context.Context, shard int, stream string, idle time.Duration) ([]string, error)
	TrimRecords(ctx context.Context, shard int) (map[string]int64, error)
	QueueStats(ctx context.Context, shard int, providers []string, now time.Time) ([]stream.QueueStat, error)
	ProbeWrite(ctx context.Context, shard int) error
}

// heartbeatStore is the heartbeat's: this replica's beat (with the senders it parked), and its
// leave at shutdown.
type heartbeatStore interface {
	Heartbeat(ctx context.Context, now time.Time, staleAfter time.Duration, state string, parks ...stream.KeyPark) (stream.Beat, error)
	Leave(ctx context.Context) error
}

// CampaignStore is what the worker does with campaigns: take their intake entries, expand
// recipients into the lanes, read a campaign's message and state for its recipients' turns,
// hold back a paused campaign's recipient, drain a cancelled one. *stream.Campaigns is one
// (stream.CampaignsOf the worker's Store).
type CampaignStore interface {
	Create(ctx context.Context, e stream.Entry, c *jobfmt.Campaign, raw string, now time.Time) (stream.CreateVerdict, error)
	Add(ctx context.Context, e stream.Entry, id, batch string, rs []stream.RoutedRecipient, now time.Time) (int64, error)
	Active(ctx context.Context, shard int) ([]stream.ActiveCampaign, error)
	Expand(ctx context.Context, shard int, id, provider string, class jobfmt.Class, most, depth int, waiting bool) (stream.Expansion, error)
	Drain(ctx context.Context, shard int, id string, providers []string, now time.Time) (drained, left int64, ok bool, err error)
	Settle(ctx context.Context, shard int, id string, providers []string) (bool, error)
	Look(ctx context.Context, shard int, id string) (stream.CampaignLook, error)
	Hold(ctx context.Context, e stream.Entry, h stream.HeldJob) (bool, error)
}

var (
	_ Store         = (*stream.Store)(nil)
	_ CampaignStore = (*stream.Campaigns)(nil)
)
