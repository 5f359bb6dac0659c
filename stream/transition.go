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
	//go:embed owned.lua
	ownedLua string

	//go:embed take.lua
	takeLua string

	//go:embed window.lua
	windowLua string

	//go:embed to_lane.lua
	toLaneLua    string
	toLaneScript = redis.NewScript(withLib(ownedLua+windowLua, toLaneLua))

	//go:embed to_dead.lua
	toDeadLua    string
	toDeadScript = redis.NewScript(withLib(takeLua+windowLua+campLua, toDeadLua))

	//go:embed finish.lua
	finishLua    string
	finishScript = redis.NewScript(withLib(ownedLua+windowLua+campLua, finishLua))

	//go:embed was_sent.lua
	wasSentLua    string
	wasSentScript = redis.NewScript(withLib(windowLua, wasSentLua))

	//go:embed ack.lua
	ackLua    string
	ackScript = redis.NewScript(withLib(takeLua, ackLua))
)

// allScripts are loaded by Setup. Script.Run uses EVALSHA and falls back to EVAL, so a Redis
// that restarted (and forgot its script cache) costs one extra round trip, not an error.
//
// The scripts that record outcomes (finish, to_dead, to_delayed, ack) and the heartbeat carry
// the allow-oom flag (Redis 7.0 and newer): when Redis is out of memory they still run, so an
// answered push is recorded and a live replica stays live, while the moves that take new work
// (to_lane, promote) are refused at their first write and wait (see MinRedisVersion).
var allScripts = []*redis.Script{
	toLaneScript, toDeadScript, finishScript, ackScript, readIntakeScript, readLaneScript, wasSentScript, trimRecordsScript,
	toDelayedScript, toScheduledScript, promoteScript, requeueScript, cleanConsumerScript, heartbeatScript, queueStatsScript,
}

// withLib is script src with lib's functions in front of it, after src's shebang line (which
// Redis reads only as the first line).
func withLib(lib, src string) string {
	if strings.HasPrefix(src, "#!") {
		line, rest, _ := strings.Cut(src, "\n")
		return line + "\n" + lib + rest
	}
	return lib + src
}

// MaxDetail bounds the provider detail kept in a ledger, gone or dead record.
const MaxDetail = 1024

// CodeTooManyDeliveries is the dead record code of an entry that was delivered more than the
// allowed number of times without any worker finishing it (a job that crashes workers).
const CodeTooManyDeliveries = "TOO_MANY_DELIVERIES"

// CodeRetryRefused is the dead record code of a refused retry whose RetryRecord has no Code.
const CodeRetryRefused = "RETRY_REFUSED"

// LaneVerdict is what ToLane did.
type LaneVerdict int

const (
	// LaneNotOwner: the entry is no longer pending for this consumer; nothing changed.
	LaneNotOwner LaneVerdict = iota
	// Moved: the job is in its provider's lane, attempt 0.
	Moved
	// Copy: a job with this id is already held by the gateway (in a lane, in flight or waiting
	// to retry) or was accepted within the window (the sent TTL); the entry was acknowledged with no
	// record of its own.
	Copy
)

// ToLane moves an intake entry holding job jobID to the lane of provider's class as attempt
// 0, or acknowledges it as a copy (see Copy): a bulk job waits in the provider's bulk lane,
// every other in its lane. The duplicate checks span both lanes: the jobs index holds every job
// of the shard, whatever its class.
func (s *Store) ToLane(ctx context.Context, e Entry, provider string, class job.Class, jobID, rawJob string, enqueuedAtMs int64) (LaneVerdict, error) {
	lane := s.Keys(e.Shard).LaneOf(provider, class)
	if err := s.ensureLane(ctx, lane); err != nil {
		return LaneNotOwner, err
	}
	n, err := s.groupFor(e.Stream).run(ctx, s.toLaneItem(e, lane, provider, jobID, rawJob, enqueuedAtMs))
	if err != nil {
		return LaneNotOwner, fmt.Errorf("stream: to lane: %w", err)
	}
	return LaneVerdict(n), nil
}

// toLaneItem is ToLane's part of a merged to_lane call.
func (s *Store) toLaneItem(e Entry, lane, provider, jobID, rawJob string, enqueuedAtMs int64) *batchItem {
	k := s.Keys(e.Shard)
	return &batchItem{script: toLaneScript,
		sharedKeys: []string{e.Stream, k.Jobs, k.Window}, sharedArgs: []any{Group, s.o.Consumer, s.windowTTL()},
		keys: []string{lane},
		args: []any{e.ID, rawJob, provider, enqueuedAtMs, jobID, windowField(jobID)}}
}

// DeadRecord is a dead-letter entry.
type DeadRecord struct {
	// ID is the job id when known (an entry that is not JSON has none).
	ID string
	// Code is INVALID_JOB, or the code of the last attempt.
	Code string
	// Reason says exactly why, naming the field or the limit.
	Reason   string
	Attempt  int
	Provider string
	// Job is the original entry; it is cut to job.MaxEntryBytes with a note when larger, or to
	// MaxInvalidJobBytes when JobInvalid.
	Job string
	// JobInvalid says the job itself is what is wrong (it is not a valid job: replaying it as
	// it is would fail the same way), so the record keeps only the first MaxInvalidJobBytes of
	// it, with its size and a note, and cannot be replayed. A valid job refused for the
	// gateway's configuration (its key, its endpoint's route) or for its outcomes is kept whole,
	// for replay.
	JobInvalid bool
	At         time.Time
	// Campaign and Recipient are the job's campaign and recipient key, for a campaign's
	// recipient ("" otherwise): the record carries them and counts in the campaign's status.
	Campaign, Recipient string
}

// MaxInvalidJobBytes is the most of an invalid job that its dead record keeps: enough to see
// what the upstream sent, and a bound on the dead stream's bytes however large the entries
// were (a record of a valid job keeps it whole, and a valid job is bounded by the entry limit).
const MaxInvalidJobBytes = 4 << 10

// deadFields are the dead stream fields of d, which left stream `from` (entry id `entry`).
func deadFields(d DeadRecord, from, entry string) []any {
	raw, id, keep := d.Job, d.ID, job.MaxEntryBytes
	if d.JobInvalid {
		keep = MaxInvalidJobBytes
		if len(id) > keep {
			// No valid id is that long (job.MaxIDLen), and keeping it would undo the cut: the
			// record is found by its entry id instead.
			id = ""
		}
	}
	f := []any{
		"id", id, "code", d.Code, "reason", d.Reason, "from", from, "entry", entry,
		"provider", d.Provider, "attempt", d.Attempt, "at", ms(d.At),
	}
	if d.Campaign != "" {
		f = append(f, "campaign", d.Campaign)
		if d.Recipient != "" {
			f = append(f, "recipient", d.Recipient)
		}
	}
	if len(raw) > keep {
		f = append(f, "note", fmt.Sprintf("job cut to its first %d of %d bytes", keep, len(raw)), "job_bytes", len(raw))
		raw = raw[:keep]
	}
	return append(f, "job", raw)
}

// ToDead moves an intake or lane entry to the dead stream. It returns false, and changes
// nothing, when the entry is no longer pending for this consumer.
func (s *Store) ToDead(ctx context.Context, e Entry, d DeadRecord) (bool, error) {
	k := s.Keys(e.Shard)
	unindex := ""
	if e.Stream != k.Intake {
		unindex = d.ID // only lane entries' jobs are indexed (ToLane)
	}
	args := append([]any{Group, e.ID, s.o.Consumer, s.o.DeadMaxLen, unindex, windowField(d.ID), s.windowTTL()},
		deadFields(d, e.Stream, e.ID)...)
	return s.runBool(ctx, toDeadScript, "to dead", []string{e.Stream, k.Dead, k.Jobs, k.Window}, args...)
}

// Result is the terminal outcome of a job.
type Result struct {
	ID, Provider, Code string
	Status             int
	Detail             string
	Attempt            int
	Latency            time.Duration
	At                 time.Time
	// Gone also writes the gone stream (with Endpoint): the upstream must delete (GONE) or
	// renew (KEY_MISMATCH) the subscription.
	Gone bool
	// MarkGone also sets the endpoint's gone mark (for GoneTTL), so retries queued for it are
	// dropped without a send (IsGone). Only for GONE: an endpoint that answered KEY_MISMATCH is
	// alive and takes a job signed with the key it was made with.
	MarkGone bool
	// Endpoint is the subscription's endpoint, for Gone and MarkGone.
	Endpoint string
	// Sent puts the job in the duplicate-suppression window (for SentTTL), so a copy enqueued
	// again is acknowledged without a send.
	Sent bool
	// Linger lets the record wait up to the commit linger for others to share its pipeline and
	// script call (Options.CommitLinger): for a record whose wait delays no send.
	Linger bool
	// Campaign and Recipient are the job's campaign and recipient key, for a campaign's
	// recipient ("" otherwise): the records carry them, and the outcome counts in the
	// campaign's status.
	Campaign, Recipient string
}

// Finish writes the ledger record of r (and, as r asks, the gone record, the endpoint's gone
// mark and the job's place in the duplicate-suppression window) and removes the entry, in one
// script. It returns false, and changes nothing, when the entry is no longer pending for this
// consumer, with one exception: an accepted send (r.Sent) whose entry was reclaimed meanwhile,
// while the job is still held (pending for the new owner, or waiting to retry), is still
// recorded and the job marked accepted, because the push is out and the new owner must not send
// it again (it finds the mark and acks). When the new owner has already ended the job, its
// record stands and Finish returns false. When the job was already accepted, the entry is acked
// with no second record.
func (s *Store) Finish(ctx context.Context, e Entry, r Result) (bool, error) {
	n, err := s.groupFor(e.Stream).run(ctx, s.finishItem(e, r))
	if err != nil {
		return false, fmt.Errorf("stream: finish: %w", err)
	}
	return n == 1, nil
}

// finishItem is Finish's part of a merged finish call.
func (s *Store) finishItem(e Entry, r Result) *batchItem {
	k := s.Keys(e.Shard)
	detail := r.Detail
	if len(detail) > MaxDetail {
		detail = detail[:MaxDetail] + "..."
	}
	// The ledger record's values, in the order of its fields (finish.lua names them), and the
	// endpoint for the gone record: the one record that carries one, since the upstream needs it
	// to prune the subscription.
	args := make([]any, 0, 16)
	args = append(args, e.ID, r.ID, boolArg(r.Sent), windowField(r.ID), boolArg(r.Gone), boolArg(r.MarkGone),
		r.Provider, r.Code, r.Status, detail, r.Attempt, r.Latency.Milliseconds(), ms(r.At), r.Campaign, r.Recipient)
	if r.Gone {
		args = append(args, r.Endpoint)
	}
	goneMark := k.Base + "gonemark:-" // unused by the script unless r.MarkGone
	if r.MarkGone {
		goneMark = k.GoneMark(r.Endpoint)
	}
	return &batchItem{script: finishScript,
		sharedKeys: []string{k.Results, k.Gone, k.Jobs, k.Window},
		sharedArgs: []any{Group, s.o.Consumer, durMs(s.o.SentTTL), durMs(s.o.GoneTTL)},
		keys:       []string{e.Stream, goneMark}, args: args, linger: r.Linger}
}

// AckSent acknowledges and deletes the lane entry of job jobID with no record: a redelivered
// job that was accepted already (WasSent). It returns false, and changes nothing, when the entry is not
// pending for this consumer.
func (s *Store) AckSent(ctx context.Context, e Entry, jobID string) (bool, error) {
	return s.runBool(ctx, ackScript, "ack", []string{e.Stream, s.Keys(e.Shard).Jobs}, Group, e.ID, s.o.Consumer, jobID)
}

func (s *Store) runBool(ctx context.Context, sc *redis.Script, what string, keys []string, args ...any) (bool, error) {
	n, err := s.eval(ctx, sc, keys, args...)
	if err != nil {
		return false, fmt.Errorf("stream: %s: %w", what, err)
	}
	return n == 1, nil
}

// eval runs sc in the group commit's next pipeline: EVALSHA, and EVAL on its own when Redis
// does not know the script (a restarted Redis forgets the scripts Setup loaded).
func (s *Store) eval(ctx context.Context, sc *redis.Script, keys []string, args ...any) (int64, error) {
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, "evalsha", sc.Hash(), len(keys))
	for _, k := range keys {
		argv = append(argv, k)
	}
	argv = append(argv, args...)
	cmd := redis.NewCmd(ctx, argv...)
	err := s.groupFor(keys[0]).do(ctx, cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return sc.Run(ctx, s.c, keys, args...).Int64()
	}
	if err != nil {
		return 0, err
	}
	return cmd.Int64()
}

// exists reports whether key exists, in the group commit's next pipeline.
func (s *Store) exists(ctx context.Context, key string) (bool, error) {
	cmd := redis.NewIntCmd(ctx, "exists", key)
	if err := s.groupFor(key).do(ctx, cmd); err != nil {
		return false, err
	}
	return cmd.Val() == 1, nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// WasSent reports whether job id was accepted on shard: within the sent TTL (the window), or
// while a reclaimed entry of it is still pending (the jobs index marks it).
func (s *Store) WasSent(ctx context.Context, shard int, id string) (bool, error) {
	keys, args := s.wasSentCall(shard, id)
	n, err := s.eval(ctx, wasSentScript, keys, args...)
	if err != nil {
		return false, fmt.Errorf("stream: sent mark: %w", err)
	}
	return n == 1, nil
}

// wasSentCall is the keys and arguments of was_sent.lua for job id on shard.
func (s *keyspace) wasSentCall(shard int, id string) ([]string, []any) {
	k := KeysFor(s.o.Prefix, shard)
	return []string{k.Jobs, k.Window}, []any{id, windowField(id), s.windowTTL()}
}

// windowTTL is how long the window counts an acceptance, in ms. The scripts count it by
// Redis's clock, not by o.Now: the replicas' clocks differ, and a window that each of them read
// by its own would hold a different span for each (window.lua).
func (s *keyspace) windowTTL() int64 {
	return durMs(s.o.SentTTL)
}

// IsGone reports whether endpoint was reported gone within GoneTTL (its mark on shard exists).
func (s *Store) IsGone(ctx context.Context, shard int, endpoint string) (bool, error) {
	ok, err := s.exists(ctx, s.Keys(shard).GoneMark(endpoint))
	if err != nil {
		return false, fmt.Errorf("stream: gone mark: %w", err)
	}
	return ok, nil
}
