package inspect

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

var (
	//go:embed cancel_entry.lua
	cancelEntryLua    string
	cancelEntryScript = redis.NewScript(stream.WithCampaignLib(cancelEntryLua))

	//go:embed cancel_delayed.lua
	cancelDelayedLua    string
	cancelDelayedScript = redis.NewScript(stream.WithCampaignLib(cancelDelayedLua))
)

// CodeCanceled is the ledger code of a job an operator cancelled before it was sent
// (taxonomy.Canceled).
const CodeCanceled = "CANCELED"

// CancelDetail is the detail of a CANCELED record.
const CancelDetail = "cancelled by an operator before it was sent"

// CancelState is what Cancel did with one job.
type CancelState int

const (
	// CancelUnknown: the job is nowhere the gateway holds jobs (never enqueued on this prefix,
	// already ended with its record, or cancelled before). Nothing changed.
	CancelUnknown CancelState = iota
	// Canceled: the job was waiting (intake, a lane, the delayed set) and no worker had read
	// it: it is removed and its one ledger record, CANCELED, is written.
	Canceled
	// CancelInFlight: a worker has read the job (its entry is pending): it finishes as it
	// would have, with its own record. Nothing changed.
	CancelInFlight
	// CancelSent: the job was accepted by its push service already. Nothing changed.
	CancelSent
)

func (c CancelState) String() string {
	switch c {
	case Canceled:
		return "cancelled"
	case CancelInFlight:
		return "in flight"
	case CancelSent:
		return "sent"
	}
	return "unknown"
}

// CancelResult is the outcome of cancelling one job id.
type CancelResult struct {
	ID    string
	State CancelState
	// Where names the place the job was found: "intake", "delayed", or the lane
	// ("lane:fcm", "lane:fcm:bulk"); "" when it was found nowhere.
	Where string
}

// Cancel cancels the jobs ids, each on its shard (stream.ShardOf), and says what became of
// each (in the order given). A job that waits where no worker has read it (an intake entry, a lane
// entry after the group's last delivered one, a delayed-set member, which a scheduled job is
// too) is removed in one script that writes its one ledger record, CANCELED; intake copies of
// it are removed with no record of their own. A job a worker has read is left to finish: the
// worker's outcome is its record, and taking the entry from under the worker would give the
// job two records or none. A copy enqueued after Cancel returns is a new request and is
// delivered.
func (s *Inspector) Cancel(ctx context.Context, ids ...string) ([]CancelResult, error) {
	out := make([]CancelResult, 0, len(ids))
	for _, id := range ids {
		r, err := s.cancelOne(ctx, id, 3)
		if err != nil {
			return out, fmt.Errorf("inspect: cancel %s: %w", id, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// cancelOne cancels id; tries bounds how many times it looks again when the job moved between
// its reads and its script (promoted, routed, read).
func (s *Inspector) cancelOne(ctx context.Context, id string, tries int) (CancelResult, error) {
	res := CancelResult{ID: id}
	if tries == 0 {
		// Moving as fast as it is looked at: a worker has it.
		res.State = CancelInFlight
		return res, nil
	}
	shard := stream.ShardOf(id, s.o.Shards)
	k := s.Keys(shard)
	var scratch JobReport
	// An intake copy a worker has read may be routed at any moment: the job is in its hands.
	intake, err := s.findIntakeEntries(ctx, &scratch, k, id, 0)
	if err != nil {
		return res, err
	}
	for _, e := range intake {
		if e.Pending != nil {
			res.State, res.Where = CancelInFlight, "intake"
			return res, nil
		}
	}

	pipe := s.c.Pipeline()
	held := pipe.HGet(ctx, k.Jobs, id)
	due := pipe.ZScore(ctx, k.Delayed, id)
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	for _, c := range []redis.Cmder{held, due} {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return res, err
		}
	}
	sent, err := s.ks.WasSent(ctx, shard, id)
	if err != nil {
		return res, err
	}
	now := time.Now().UnixMilli()

	// The place that writes the record: the delayed member, or an unread lane entry.
	var lane *StreamPlace
	laneName := ""
	delayed := due.Err() == nil
	if !delayed && held.Val() != "" && held.Val() != acceptedMark {
		for _, c := range job.Classes {
			found, err := s.findEntries(ctx, &scratch, k.LaneOf(held.Val(), c), id, 0, false)
			if err != nil {
				return res, err
			}
			if len(found) > 0 {
				lane, laneName = &found[0], stream.LaneName(held.Val(), c)
				break
			}
		}
		if lane == nil || lane.Pending != nil {
			// Pending with a worker, or between places in a worker's script: in its hands.
			res.State, res.Where = CancelInFlight, laneName
			return res, nil
		}
	}
	if !delayed && lane == nil {
		switch {
		case sent || held.Val() == acceptedMark:
			res.State = CancelSent
			return res, nil
		case held.Val() != "" || len(intake) == 0:
			return res, nil
		}
	}

	// Intake copies go first, with no record, unless they are all there is: then the last
	// writes the record. A copy a worker read meanwhile stops the cancel, with nothing
	// recorded, and the job keeps its course.
	for i, e := range intake {
		record := !delayed && lane == nil && i == len(intake)-1
		n, err := s.cancelEntry(ctx, e.Key, k, e.EntryID, id, false, record, now)
		if err != nil {
			return res, err
		}
		switch n {
		case 2:
			res.State, res.Where = CancelInFlight, "intake"
			return res, nil
		case 1:
			if record {
				res.State, res.Where = Canceled, "intake"
			}
		default:
			if record {
				// Routed since the scan: look where it went.
				return s.cancelOne(ctx, id, tries-1)
			}
		}
	}
	switch {
	case delayed:
		n, err := cancelDelayedScript.Run(ctx, s.c, []string{k.Delayed, k.DelayedData, k.Rcpt, k.DelayedCount, k.Jobs, k.Results, k.Scheduled},
			id, CancelDetail, now).Int64()
		if err != nil {
			return res, err
		}
		if n == 1 {
			res.State, res.Where = Canceled, "delayed"
		} else {
			// Promoted meanwhile: the job is in its lane now, or further.
			return s.cancelOne(ctx, id, tries-1)
		}
	case lane != nil:
		n, err := s.cancelEntry(ctx, lane.Key, k, lane.EntryID, id, true, true, now)
		if err != nil {
			return res, err
		}
		res.Where = laneName
		switch n {
		case 1:
			res.State = Canceled
		case 2:
			res.State = CancelInFlight
		case 3:
			res.State = CancelSent
		default:
			// Gone from the lane since the scan: it has moved on.
			return s.cancelOne(ctx, id, tries-1)
		}
	}
	return res, nil
}

// cancelEntry runs cancel_entry.lua on one entry of the stream at key.
func (s *Inspector) cancelEntry(ctx context.Context, key string, k stream.Keys, entry, id string, isLane, record bool, now int64) (int64, error) {
	return cancelEntryScript.Run(ctx, s.c, []string{key, k.Jobs, k.Results},
		stream.Group, entry, id, boolArg(isLane), CancelDetail, now, boolArg(record)).Int64()
}

// boolArg is b as the scripts read a flag: "1" or "0".
func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
