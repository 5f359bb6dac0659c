package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/internal/scan"
)

// JobReport is where Inspect found a job. A job is in one place at a time, but a copy enqueued
// again (a replay, an upstream's retry) may sit in the intake while an older copy's terminal
// record is in the ledger: every place found is reported.
type JobReport struct {
	ID    string
	Shard int
	// Held is the provider the shard's jobs index names: the job is in that lane, in flight or
	// waiting to retry. "" when it is not held (not routed yet, or ended).
	Held string
	// Sent is true while the job is in the duplicate-suppression window (it was accepted within
	// the sent TTL).
	Sent bool
	// Intake holds the intake entries of the job (not routed yet); Lane its lane entry, when
	// found.
	Intake []StreamPlace
	Lane   *StreamPlace
	// Delayed is the job's retry, when it waits in the delayed set.
	Delayed *DelayedJob
	// Results and Dead are the job's terminal records, newest first.
	Results []LedgerEntry
	Dead    []DeadEntry
	// Cut lists the streams (keys) whose scan stopped at the limit before their end: the job
	// may have entries there that were not read.
	Cut []string
}

// Found reports whether the job was found anywhere.
func (r JobReport) Found() bool {
	return r.Held != "" || r.Sent || len(r.Intake) > 0 || r.Lane != nil || r.Delayed != nil ||
		len(r.Results) > 0 || len(r.Dead) > 0
}

// StreamPlace is an entry of a grouped stream (the intake or a lane) holding the job.
type StreamPlace struct {
	Key, EntryID string
	// Attempt is the lane entry's attempt (0 for the first; always 0 in the intake).
	Attempt int
	// Pending is set when a consumer has read the entry and not finished it.
	Pending *PendingEntry
}

// PendingEntry is a read, unfinished entry: who read it, how long ago it was last delivered,
// and how many times it was.
type PendingEntry struct {
	Consumer   string
	Idle       time.Duration
	Deliveries int64
}

// DelayedJob is a job waiting in the delayed set.
type DelayedJob struct {
	Due       time.Time
	Provider  string
	Attempt   int // the attempt it will be
	Recipient string
	// LastCode and LastDetail are the outcome of the attempt that sent it there; empty for a
	// put-back (admission refused it before any attempt) and for retries written before the
	// worker kept them.
	LastCode, LastDetail string
	// QueuedAt is when it was put there (zero when not recorded).
	QueuedAt time.Time
	// EnqueuedAt is the job's enqueued_at: the time its TTL counts from, unless Scheduled.
	EnqueuedAt time.Time
	// Scheduled says the job waits for its send_at (Due), not to retry: it was never sent, and
	// its TTL counts from Due.
	Scheduled bool
}

// LedgerEntry is a ledger record where it lies.
type LedgerEntry struct {
	EntryID string
	stream.Result
}

// acceptedMark is the jobs index's value for a job an attempt delivered while its entry was
// reclaimed, until that entry is done (finish.lua).
const acceptedMark = "accepted"

// Inspect finds job id on its shard (CRC-32 of the id): the jobs index, the window, the
// delayed set, the intake and the job's lane (with the consumer of a pending entry), and its
// terminal records in the ledger and the dead stream. Streams are read a thousand entries a
// round trip, the intake and the lane oldest first, the ledger and the dead stream newest
// first, each at most scanLimit entries (0: all); JobReport.Cut names those cut short.
func (s *Inspector) Inspect(ctx context.Context, id string, scanLimit int) (JobReport, error) {
	shard := stream.ShardOf(id, s.o.Shards)
	k := s.Keys(shard)
	rep := JobReport{ID: id, Shard: shard}

	pipe := s.c.Pipeline()
	held := pipe.HGet(ctx, k.Jobs, id)
	due := pipe.ZScore(ctx, k.Delayed, id)
	data := pipe.HGet(ctx, k.DelayedData, id)
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	for _, c := range []redis.Cmder{held, due, data} {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return rep, fmt.Errorf("inspect: inspect %s: %w", id, err)
		}
	}
	rep.Held = held.Val()
	if rep.Held == acceptedMark {
		// Another attempt was accepted while this entry was reclaimed: it names no lane, and
		// the entry's new owner acknowledges it unsent.
		rep.Held = ""
	}
	sent, err := s.ks.WasSent(ctx, shard, id)
	if err != nil {
		return rep, fmt.Errorf("inspect: inspect %s: %w", id, err)
	}
	rep.Sent = sent
	if due.Err() == nil {
		rep.Delayed = delayedJob(due.Val(), data.Val())
	}

	if rep.Intake, err = s.findIntakeEntries(ctx, &rep, k, id, scanLimit); err != nil {
		return rep, err
	}
	if rep.Held != "" && rep.Delayed == nil {
		for _, c := range job.Classes {
			lane, err := s.findEntries(ctx, &rep, k.LaneOf(rep.Held, c), id, scanLimit, false)
			if err != nil {
				return rep, err
			}
			if len(lane) > 0 {
				rep.Lane = &lane[0]
				break
			}
		}
	}
	cut, err := scan.Range(ctx, s.c, k.Results, "-", "+", true, scanLimit, func(m redis.XMessage) bool {
		f := m.Values
		if str(f["id"]) == id {
			rep.Results = append(rep.Results, LedgerEntry{EntryID: m.ID, Result: stream.Result{
				ID: id, Provider: str(f["provider"]), Code: str(f["code"]), Status: atoi(f["status"]),
				Detail: str(f["detail"]), Attempt: atoi(f["attempt"]),
				Latency: time.Duration(atoi(f["latency_ms"])) * time.Millisecond,
				At:      time.UnixMilli(int64(atoi(f["at"]))),
			}})
		}
		return true
	})
	if err != nil {
		return rep, err
	}
	if cut {
		rep.Cut = append(rep.Cut, k.Results)
	}
	if rep.Dead, cut, err = s.DeadOfJob(ctx, id, scanLimit); err != nil {
		return rep, err
	}
	if cut {
		rep.Cut = append(rep.Cut, k.Dead)
	}
	return rep, nil
}

// findIntakeEntries is findEntries of both intakes of shard k, transactional first.
func (s *Inspector) findIntakeEntries(ctx context.Context, rep *JobReport, k stream.Keys, id string, scanLimit int) ([]StreamPlace, error) {
	var out []StreamPlace
	for _, st := range k.Intakes() {
		found, err := s.findEntries(ctx, rep, st, id, scanLimit, true)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// findEntries reads the stream at key (the intake, or a lane) oldest first for entries whose
// job is id, with the pending state of each; all of them, or the first when !all.
func (s *Inspector) findEntries(ctx context.Context, rep *JobReport, key, id string, scanLimit int, all bool) ([]StreamPlace, error) {
	var found []StreamPlace
	cut, err := scan.Range(ctx, s.c, key, "-", "+", false, scanLimit, func(m redis.XMessage) bool {
		if jobID(str(m.Values["job"])) != id {
			return true
		}
		found = append(found, StreamPlace{Key: key, EntryID: m.ID, Attempt: atoi(m.Values["attempt"])})
		return all
	})
	if err != nil {
		return nil, err
	}
	if cut {
		rep.Cut = append(rep.Cut, key)
	}
	for i := range found {
		p, err := s.c.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: key, Group: stream.Group, Start: found[i].EntryID, End: found[i].EntryID, Count: 1,
		}).Result()
		if err != nil && !scan.NoGroup(err) {
			return nil, fmt.Errorf("inspect: pending of %s %s: %w", key, found[i].EntryID, err)
		}
		if len(p) == 1 {
			found[i].Pending = &PendingEntry{Consumer: p[0].Consumer, Idle: p[0].Idle, Deliveries: p[0].RetryCount}
		}
	}
	return found, nil
}

// delayedJob reads a delayed member's score and data (the JSON to_delayed.lua or
// to_scheduled.lua writes).
func delayedJob(score float64, raw string) *DelayedJob {
	d := &DelayedJob{Due: time.UnixMilli(int64(score))}
	var v struct {
		Provider   string `json:"provider"`
		Attempt    any    `json:"attempt"`
		Recipient  string `json:"recipient"`
		EnqueuedAt any    `json:"enqueued_at"`
		QueuedAt   any    `json:"queued_at"`
		LastCode   string `json:"last_code"`
		LastDetail string `json:"last_detail"`
		Scheduled  bool   `json:"scheduled"`
	}
	_ = json.Unmarshal([]byte(raw), &v) // data a script could not read is reported as empty
	d.Provider, d.Recipient, d.LastCode, d.LastDetail = v.Provider, v.Recipient, v.LastCode, v.LastDetail
	d.Attempt, d.Scheduled = int(number(v.Attempt)), v.Scheduled
	if n := number(v.EnqueuedAt); n > 0 {
		d.EnqueuedAt = time.UnixMilli(n)
	}
	if n := number(v.QueuedAt); n > 0 {
		d.QueuedAt = time.UnixMilli(n)
	}
	return d
}

// number reads a JSON number or a string of digits (the scripts store numbers as ARGV
// strings); 0 when it is neither.
func number(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}
