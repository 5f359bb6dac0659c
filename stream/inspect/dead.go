package inspect

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/internal/scan"
)

var (
	//go:embed replay_dead.lua
	replayDeadLua    string
	replayDeadScript = redis.NewScript(replayDeadLua)
)

// DeadEntry is one record of a shard's dead stream, where it lies.
type DeadEntry struct {
	Shard   int
	EntryID string // its id in the dead stream
	stream.DeadRecord
	// From and Entry are the stream the job left and its entry id there.
	From, Entry string
	// Note is set when Job was cut ("job cut to its first ..."): an invalid job, whose record
	// keeps only its first stream.MaxInvalidJobBytes, or an entry over the entry limit. Such a
	// record cannot be replayed.
	Note string
	// JobBytes is the size of the job before the cut, when Note is set.
	JobBytes int
}

// Written is when the record was written: the time of its entry id.
func (d DeadEntry) Written() time.Time { return scan.EntryTime(d.EntryID) }

func deadEntry(shard int, m redis.XMessage) DeadEntry {
	f := m.Values
	return DeadEntry{
		Shard: shard, EntryID: m.ID,
		DeadRecord: stream.DeadRecord{
			ID: str(f["id"]), Code: str(f["code"]), Reason: str(f["reason"]), Attempt: atoi(f["attempt"]),
			Provider: str(f["provider"]), Job: str(f["job"]), At: time.UnixMilli(int64(atoi(f["at"]))),
			Campaign: str(f["campaign"]), Recipient: str(f["recipient"]),
		},
		From: str(f["from"]), Entry: str(f["entry"]), Note: str(f["note"]), JobBytes: atoi(f["job_bytes"]),
	}
}

// DeadFilter chooses dead records; its zero value chooses every one.
type DeadFilter struct {
	// Reason is a substring of the reason; Code and Provider must equal the record's.
	Reason, Code, Provider string
	// Since and Until bound when the record was written (its entry id's time), inclusive; zero
	// means unbounded.
	Since, Until time.Time
}

func (f DeadFilter) match(d DeadEntry) bool {
	return strings.Contains(d.Reason, f.Reason) &&
		(f.Code == "" || d.Code == f.Code) && (f.Provider == "" || d.Provider == f.Provider)
}

// idRange is the range of entry ids the filter's times allow, for XRANGE.
func (f DeadFilter) idRange() (lo, hi string) {
	lo, hi = "-", "+"
	if !f.Since.IsZero() {
		lo = strconv.FormatInt(max(f.Since.UnixMilli(), 0), 10) + "-0"
	}
	if !f.Until.IsZero() {
		hi = strconv.FormatInt(max(f.Until.UnixMilli(), 0), 10) + "-18446744073709551615"
	}
	return lo, hi
}

// DeadList returns the dead records that f chooses, newest first over every shard, at most
// limit of them (limit <= 0: all). Each shard's stream is read newest first, a thousand
// records a round trip, until limit records matched or its start (or f.Since) is reached:
// with a filter that matches little, that is the whole stream.
func (s *Inspector) DeadList(ctx context.Context, f DeadFilter, limit int) ([]DeadEntry, error) {
	var out []DeadEntry
	lo, hi := f.idRange()
	for shard := range s.o.Shards {
		found := 0
		_, err := scan.Range(ctx, s.c, s.Keys(shard).Dead, lo, hi, true, 0, func(m redis.XMessage) bool {
			d := deadEntry(shard, m)
			if f.match(d) {
				out = append(out, d)
				found++
			}
			return limit <= 0 || found < limit
		})
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return scan.CompareIDs(out[i].EntryID, out[j].EntryID) > 0
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DeadEach calls fn with each dead record that f chooses, shard by shard and newest first
// within a shard, reading a thousand records a round trip, so that acting on every record of a
// long dead stream holds one page of them in memory at a time. It stops at fn's first error and
// returns it. fn may delete the records it was given.
func (s *Inspector) DeadEach(ctx context.Context, f DeadFilter, fn func(DeadEntry) error) error {
	lo, hi := f.idRange()
	for shard := range s.o.Shards {
		var ferr error
		_, err := scan.Range(ctx, s.c, s.Keys(shard).Dead, lo, hi, true, 0, func(m redis.XMessage) bool {
			if d := deadEntry(shard, m); f.match(d) {
				ferr = fn(d)
			}
			return ferr == nil
		})
		if ferr != nil {
			return ferr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// DeadEntries returns the record entryID of the dead stream of every shard that has one: an
// entry id is unique within a stream, not across shards.
func (s *Inspector) DeadEntries(ctx context.Context, entryID string) ([]DeadEntry, error) {
	var out []DeadEntry
	for shard := range s.o.Shards {
		d, ok, err := s.DeadEntry(ctx, shard, entryID)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// DeadEntry returns the record entryID of shard's dead stream; false when there is none.
func (s *Inspector) DeadEntry(ctx context.Context, shard int, entryID string) (DeadEntry, bool, error) {
	key := s.Keys(shard).Dead
	msgs, err := s.c.XRange(ctx, key, entryID, entryID).Result()
	if err != nil {
		return DeadEntry{}, false, fmt.Errorf("inspect: read %s %s: %w", key, entryID, err)
	}
	if len(msgs) == 0 {
		return DeadEntry{}, false, nil
	}
	return deadEntry(shard, msgs[0]), true, nil
}

// DeadOfJob returns the dead records of job id, newest first, from its shard's dead stream,
// reading at most scanLimit records (0: all); cut says the scan stopped there.
func (s *Inspector) DeadOfJob(ctx context.Context, id string, scanLimit int) (found []DeadEntry, cut bool, err error) {
	shard := stream.ShardOf(id, s.o.Shards)
	cut, err = scan.Range(ctx, s.c, s.Keys(shard).Dead, "-", "+", true, scanLimit, func(m redis.XMessage) bool {
		if str(m.Values["id"]) == id {
			found = append(found, deadEntry(shard, m))
		}
		return true
	})
	return found, cut, err
}

// ReplayVerdict is what ReplayDead did with one record.
type ReplayVerdict int

const (
	// ReplayGone: no such record (replayed or purged already); nothing changed.
	ReplayGone ReplayVerdict = iota
	// Replayed: the job is a new entry of the shard's intake, and the record is deleted.
	Replayed
	// ReplayCut: the record keeps only the first bytes of its job (it has a note); the record
	// stays.
	ReplayCut
	// ReplayNoJob: the record holds no job; the record stays.
	ReplayNoJob
	// ReplayFailsAgain: the record's code says its job would fail the same way again
	// (FailsAgain); ReplaySelection left the record as it is. The script never answers it.
	ReplayFailsAgain
)

func (v ReplayVerdict) String() string {
	switch v {
	case ReplayGone:
		return "gone (replayed or purged before)"
	case Replayed:
		return "replayed"
	case ReplayCut:
		return "not replayed: its record keeps only the first bytes of the job"
	case ReplayNoJob:
		return "not replayed: it holds no job"
	case ReplayFailsAgain:
		return "not replayed: its job would fail the same way again"
	}
	return fmt.Sprintf("ReplayVerdict(%d)", int(v))
}

// ReplayDead puts the job of dead record entryID of shard back on that shard's intake of its
// class (the bulk intake for a record from the bulk intake or a bulk lane) as a new job (attempt 0: the intake validates and routes it again) and deletes the record, in one
// script: a record is replayed once however often it is asked. intakeID is the new intake
// entry's id. The job's TTL counts from its own enqueued_at when it has one.
func (s *Inspector) ReplayDead(ctx context.Context, shard int, entryID string) (v ReplayVerdict, intakeID string, err error) {
	k := s.Keys(shard)
	res, err := replayDeadScript.Run(ctx, s.c, []string{k.Dead, k.Intake, k.BulkIntake}, entryID).Slice()
	if err != nil {
		return ReplayGone, "", fmt.Errorf("inspect: replay %s %s: %w", k.Dead, entryID, err)
	}
	if len(res) != 2 {
		return ReplayGone, "", fmt.Errorf("inspect: replay %s %s: unexpected reply %v", k.Dead, entryID, res)
	}
	n, _ := res[0].(int64)
	intakeID, _ = res[1].(string)
	return ReplayVerdict(n), intakeID, nil
}

// PurgeDead deletes records of shard's dead stream by entry id and returns how many there
// were.
func (s *Inspector) PurgeDead(ctx context.Context, shard int, entryIDs ...string) (int64, error) {
	if len(entryIDs) == 0 {
		return 0, nil
	}
	key := s.Keys(shard).Dead
	n, err := s.c.XDel(ctx, key, entryIDs...).Result()
	if err != nil {
		return 0, fmt.Errorf("inspect: purge %s: %w", key, err)
	}
	return n, nil
}
