package stream

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

var (
	//go:embed entry_check.lua
	entryCheckLua string

	//go:embed requeue.lua
	requeueLua    string
	requeueScript = redis.NewScript(takeLua + campLua + entryCheckLib() + requeueLua)
)

// entryCheckLib is entry_check.lua with the Lua constant it cuts an invalid entry's dead
// record to, so the scripts and Go's own dead records cut at the same size.
func entryCheckLib() string {
	return fmt.Sprintf("local MAX_INVALID_JOB = %d\n", MaxInvalidJobBytes) + entryCheckLua
}

// Requeue is which pending entries a Requeue call hands back.
type Requeue struct {
	// MinIdle is how long an entry must have been pending without a read or a claim.
	MinIdle time.Duration
	// Count bounds the entries of one call.
	Count int
	// MaxDeliveries is how often an entry may be delivered without finishing: one delivered
	// that often already goes to the dead stream (code CodeTooManyDeliveries) instead. 0 means
	// no limit.
	MaxDeliveries int64
	// Only, when set, names the one consumer whose entries to hand back: a worker's own name,
	// at its start (what an earlier process of that name left) and in its reclaimer (entries
	// read by a call whose reply never reached it), Except the entries it is working on.
	// Otherwise the entries of every consumer but Alive's are.
	Only   string
	Except []string
	// Alive are the consumers that are alive (fresh heartbeats): their entries are theirs
	// however long they idle (a slow send, or a replica that was cut off from Redis and is
	// writing its outcomes now), and taking them would send their jobs twice.
	Alive []string
}

// Requeued counts what a Requeue call did.
type Requeued struct {
	// Entries were written again at the end of their stream, for the next read of any consumer.
	Entries int
	// TooManyDeliveries went to the dead stream instead, and so did Invalid, intake entries
	// that break the entry rules (ReadIntake's).
	TooManyDeliveries, Invalid int
}

// Requeue hands pending entries of stream (an intake or a lane of shard) back to it: each is
// written again at the stream's end, with its fields and a "deliveries" field counting its
// deliveries so far, and the old entry acknowledged and deleted, in one script. The next read of
// any consumer takes it, with a free slot and a token like any other, and a lane looks again
// whether an entry read more than once was sent (its "deliveries" says so). Entries delivered
// MaxDeliveries times go to the dead stream ("delivered N times without finishing") instead, so
// a job that kills every worker that reads it cannot go round forever; intake entries that
// break the entry rules are dead-lettered as ReadIntake does.
func (s *Store) Requeue(ctx context.Context, shard int, stream string, r Requeue) (Requeued, error) {
	if r.Count <= 0 {
		return Requeued{}, nil
	}
	k := s.Keys(shard)
	intake := "0"
	if k.IsIntake(stream) {
		intake = "1"
	}
	args := []any{Group, r.MinIdle.Milliseconds(), r.Count, max(r.MaxDeliveries, 0), ms(s.o.Now()),
		CodeTooManyDeliveries, s.o.DeadMaxLen, intake, job.MaxEntryBytes, r.Only, len(r.Alive)}
	for _, c := range r.Alive {
		args = append(args, c)
	}
	for _, id := range r.Except {
		args = append(args, id)
	}
	v, err := requeueScript.Run(ctx, s.c, []string{stream, k.Dead, k.Jobs}, args...).Int64Slice()
	if err != nil {
		if strings.Contains(err.Error(), "NOGROUP") {
			return Requeued{}, nil // no group yet: nothing was ever read
		}
		return Requeued{}, fmt.Errorf("stream: requeue %s: %w", stream, err)
	}
	if len(v) != 3 {
		return Requeued{}, fmt.Errorf("stream: requeue %s: reply %v", stream, v)
	}
	return Requeued{Entries: int(v[0]), TooManyDeliveries: int(v[1]), Invalid: int(v[2])}, nil
}

// Redelivered says whether lane entry e was read before (Requeue handed it back): a consumer
// may then have sent its job without recording it, and the lane looks whether it was.
func (e Entry) Redelivered() bool { return e.Fields["deliveries"] != "" }
