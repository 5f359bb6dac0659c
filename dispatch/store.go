package dispatch

import (
	"context"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// Store is what a worker needs of Redis: the reads and state changes of its loops, each of
// which names the few methods it calls below. *stream.Store is one; the operators' queries are
// stream.Inspector's, which a worker never needs.
type Store interface {
	storeLayout
	startupStore
	intakeStore
	laneStore
	retryStore
	reclaimStore
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

// intakeStore is the intake reader's: new entries, and their move to a lane or the dead stream.
type intakeStore interface {
	ReadIntake(ctx context.Context, shard, count int, block time.Duration) ([]stream.Entry, []stream.Refusal, error)
	ToLane(ctx context.Context, e stream.Entry, provider string, class jobfmt.Class, jobID, rawJob string, enqueuedAtMs int64) (stream.LaneVerdict, error)
	ToScheduled(ctx context.Context, e stream.Entry, r stream.ScheduledRecord) (stream.LaneVerdict, error)
	ToDead(ctx context.Context, e stream.Entry, d stream.DeadRecord) (bool, error)
}

// retryStore is the promoter's: retries that are due go back to their lanes.
type retryStore interface {
	PromoteDue(ctx context.Context, shard int, now time.Time, limit int) (int, error)
}

// reclaimStore is the reclaimer's: entries a dead consumer left pending.
type reclaimStore interface {
	Reclaim(ctx context.Context, shard int, stream string, minIdle time.Duration, count int, maxDeliveries int64, held []string, alive ...string) ([]stream.Entry, stream.Dead, error)
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

var _ Store = (*stream.Store)(nil)
