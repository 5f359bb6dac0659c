package dispatch

import (
	"context"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// laneStore is what a lane needs of Redis: its reads and the state changes of its entries.
// *stream.Store is one; the lane's unit tests use one of their own.
type laneStore interface {
	ReadLane(ctx context.Context, shard int, provider string, class jobfmt.Class, count int, block time.Duration) ([]stream.Entry, error)
	WaitLanes(ctx context.Context, shard int, provider string, block time.Duration) ([]stream.Entry, error)
	WasSent(ctx context.Context, shard int, id string) (bool, error)
	IsGone(ctx context.Context, shard int, endpoint string) (bool, error)
	Owns(ctx context.Context, e stream.Entry) (bool, error)
	Finish(ctx context.Context, e stream.Entry, r stream.Result) (bool, error)
	ToDead(ctx context.Context, e stream.Entry, d stream.DeadRecord) (bool, error)
	ToDelayed(ctx context.Context, e stream.Entry, r stream.RetryRecord) (stream.RetryVerdict, error)
	AckSent(ctx context.Context, e stream.Entry, jobID string) (bool, error)
}
