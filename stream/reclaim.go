package stream

import (
	_ "embed"

	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

var (
	//go:embed entry_check.lua
	entryCheckLua string

	//go:embed reclaim.lua
	reclaimLua    string
	reclaimScript = redis.NewScript(takeLua + campLua + entryCheckLib() + reclaimLua)
)

// entryCheckLib is entry_check.lua with the Lua constant it cuts an invalid entry's dead
// record to, so the scripts and Go's own dead records cut at the same size.
func entryCheckLib() string {
	return fmt.Sprintf("local MAX_INVALID_JOB = %d\n", MaxInvalidJobBytes) + entryCheckLua
}

// Reclaim claims for this consumer up to count entries of stream (on shard) that have been
// pending longer than minIdle with a consumer that is not alive (a crashed worker, or one that
// stopped), or with this consumer itself (an entry it read and lost track of). Entries of the
// consumers in alive — the replicas with a fresh heartbeat — are theirs however long they
// idle: a replica that was cut off from Redis, or whose send is slow, records its own
// outcomes, and taking its entries would send them twice.
//
// held are entries this consumer still holds in memory (waiting for a slot or a token, or
// sending): those still pending for it have their idle time reset first, without counting a
// delivery, so that an entry its live owner is working on is never claimed again and counted
// as a failed delivery. The caller passes those held long enough to near minIdle.
//
// Entries whose delivery count, this claim included, exceeds maxDeliveries go to the dead
// stream ("delivered N times without finishing", code CodeTooManyDeliveries) in the same script
// instead of being returned; maxDeliveries <= 0 means no limit. Intake entries that break the
// entry rules are dead-lettered as ReadIntake does, so claimed entries are bounded in size.
// Dead records carry at most job.MaxEntryBytes of a job. Claimed entries are handled like fresh
// ones.
func (s *Store) Reclaim(ctx context.Context, shard int, stream string, minIdle time.Duration, count int, maxDeliveries int64, held []string, alive ...string) (claimed []Entry, dead Dead, err error) {
	return s.reclaim(ctx, shard, stream, minIdle, count, maxDeliveries, s.o.Now(), held, alive)
}

// Dead counts the entries a Reclaim dead-lettered, by why.
type Dead struct {
	TooManyDeliveries int // delivered more than the limit without finishing (CodeTooManyDeliveries)
	Invalid           int // intake entries that broke the entry rules (INVALID_JOB)
}

// Total is every entry dead-lettered.
func (d Dead) Total() int { return d.TooManyDeliveries + d.Invalid }

func (s *Store) reclaim(ctx context.Context, shard int, stream string, minIdle time.Duration, count int, maxDeliveries int64, now time.Time, held, alive []string) ([]Entry, Dead, error) {
	if count <= 0 {
		return nil, Dead{}, nil
	}
	if maxDeliveries < 0 {
		maxDeliveries = 0
	}
	k := s.Keys(shard)
	intake := "0"
	if stream == k.Intake {
		intake = "1"
	}
	args := []any{Group, s.o.Consumer, minIdle.Milliseconds(), count, maxDeliveries, ms(now),
		CodeTooManyDeliveries, s.o.DeadMaxLen, intake, job.MaxEntryBytes, len(held)}
	for _, id := range held {
		args = append(args, id)
	}
	for _, c := range alive {
		if c != s.o.Consumer {
			args = append(args, c)
		}
	}
	v, err := reclaimScript.Run(ctx, s.c, []string{stream, k.Dead, k.Jobs}, args...).Slice()
	if err != nil {
		if strings.Contains(err.Error(), "NOGROUP") {
			return nil, Dead{}, nil // no group yet: nothing was ever read, nothing to claim
		}
		return nil, Dead{}, fmt.Errorf("stream: reclaim %s: %w", stream, err)
	}
	if len(v) < 2 {
		return nil, Dead{}, fmt.Errorf("stream: reclaim %s: short reply", stream)
	}
	tooMany, _ := v[0].(int64)
	invalid, _ := v[1].(int64)
	dead := Dead{TooManyDeliveries: int(tooMany), Invalid: int(invalid)}
	var out []Entry
	for _, x := range v[2:] {
		pair, ok := x.([]any)
		if !ok || len(pair) != 2 {
			return nil, Dead{}, fmt.Errorf("stream: reclaim %s: unexpected reply %T", stream, x)
		}
		id, _ := pair[0].(string)
		flat, _ := pair[1].([]any)
		f := make(map[string]string, len(flat)/2)
		for i := 0; i+1 < len(flat); i += 2 {
			k, _ := flat[i].(string)
			v, _ := flat[i+1].(string)
			f[k] = v
		}
		out = append(out, Entry{Stream: stream, ID: id, Fields: f, Shard: shard})
	}
	return out, dead, nil
}
