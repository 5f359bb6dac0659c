package inspect

import (
	"context"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// DeadRef names a dead record: its entry id in the dead stream of Shard, or, with Shard
// negative, of whichever shards have one (an entry id is unique within a stream, not across
// shards).
type DeadRef struct {
	Shard   int
	EntryID string
}

// FindDead finds the record r names: none, one, or, for a ref without a shard, one per shard
// that has it.
func (s *Inspector) FindDead(ctx context.Context, r DeadRef) ([]DeadEntry, error) {
	if r.Shard >= 0 {
		d, found, err := s.DeadEntry(ctx, r.Shard, r.EntryID)
		if err != nil || !found {
			return nil, err
		}
		return []DeadEntry{d}, nil
	}
	return s.DeadEntries(ctx, r.EntryID)
}

// ShowDead finds the record an operator asks for: the one entry names, when it is not nil
// (FindDead: one per shard that has it), else the newest dead record of jobID, of the newest
// scanLimit records of its shard (0: all). ofJob is how many records of the job were found;
// cut says the scan stopped at the limit.
func (s *Inspector) ShowDead(ctx context.Context, entry *DeadRef, jobID string, scanLimit int) (found []DeadEntry, ofJob int, cut bool, err error) {
	if entry != nil {
		if found, err = s.FindDead(ctx, *entry); err != nil || len(found) > 0 {
			return found, 0, false, err
		}
	}
	byJob, cut, err := s.DeadOfJob(ctx, jobID, scanLimit)
	if err != nil {
		return nil, 0, false, err
	}
	if len(byJob) > 0 {
		found = byJob[:1]
	}
	return found, len(byJob), cut, nil
}

// DeadSelection is the dead records an operator's replay or purge acts on: those refs named,
// the newest of those a filter chooses, or every record the filter chooses, read as each goes.
type DeadSelection struct {
	// Chosen are the records the refs named, or the newest the filter chose; unless Walk.
	Chosen []DeadEntry
	Walk   bool
	Filter DeadFilter
	// Missing are the refs that named no record (acted on before, or mistyped).
	Missing []DeadRef
	// Several are, for each ref without a shard whose entry id more than one shard has, the
	// records it named: none of them is acted on.
	Several [][]DeadEntry
}

// SelectDead resolves what refs name, or without refs the newest limit records f chooses;
// without refs and limit, the selection walks every record f chooses (EachDead).
func (s *Inspector) SelectDead(ctx context.Context, refs []DeadRef, f DeadFilter, limit int) (*DeadSelection, error) {
	sel := &DeadSelection{Filter: f}
	if len(refs) == 0 {
		if limit == 0 {
			sel.Walk = true
			return sel, nil
		}
		var err error
		sel.Chosen, err = s.DeadList(ctx, f, limit)
		return sel, err
	}
	for _, r := range refs {
		found, err := s.FindDead(ctx, r)
		if err != nil {
			return nil, err
		}
		switch len(found) {
		case 0:
			sel.Missing = append(sel.Missing, r)
		case 1:
			sel.Chosen = append(sel.Chosen, found[0])
		default:
			sel.Several = append(sel.Several, found)
		}
	}
	return sel, nil
}

// EachDead calls fn with every record of sel until fn fails. Walking every record the filter
// chooses holds one page of the dead stream at a time, however long it is.
func (s *Inspector) EachDead(ctx context.Context, sel *DeadSelection, fn func(DeadEntry) error) error {
	if sel.Walk {
		return s.DeadEach(ctx, sel.Filter, fn)
	}
	for _, d := range sel.Chosen {
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

// FailsAgain says why the job of a dead record of code would fail the same way if it were
// replayed unchanged: the code is one the job earned itself (taxonomy's codes that are final
// for the job and not the service's or the path's state), and the job is replayed as it is,
// with its own enqueued_at, so an expired one expires again. ok is false for every other code:
// the retryable ones (the service or the path was in trouble), UNAUTHORIZED (the gateway's own
// key, fixed by the operator) and any code this release does not know.
func FailsAgain(code string) (why string, ok bool) {
	switch taxonomy.Code(code) {
	case taxonomy.InvalidJob:
		return "an invalid job is refused again", true
	case taxonomy.PayloadTooLarge:
		return "its payload is over the service's limit again", true
	case taxonomy.InvalidRequest:
		return "the service refuses the same request again", true
	case taxonomy.InvalidTTL:
		return "the service refuses its TTL again", true
	case taxonomy.Blocked:
		return "its endpoint is refused again", true
	case taxonomy.Expired:
		return "its TTL counts from its enqueued_at, so it expires again", true
	}
	return "", false
}

// ReplayOptions are how ReplaySelection acts.
type ReplayOptions struct {
	// DryRun replays nothing and tells what would become of each record.
	DryRun bool
	// IncludeInvalid replays the records FailsAgain names too (after the cause was fixed: a
	// vapid_key configured, a limit raised); without it they are ReplayFailsAgain.
	IncludeInvalid bool
}

// ReplaySelection replays every record of sel (ReplayDead) and calls fn with each and what
// became of it, until Redis fails. A record FailsAgain names is left as it is and is
// ReplayFailsAgain, unless o.IncludeInvalid. A dry run tells what would become of each:
// ReplayCut for a record whose job was cut, else Replayed.
func (s *Inspector) ReplaySelection(ctx context.Context, sel *DeadSelection, o ReplayOptions, fn func(d DeadEntry, v ReplayVerdict, intakeID string)) error {
	return s.EachDead(ctx, sel, func(d DeadEntry) error {
		// A cut record cannot be replayed at all, which says more than that it would fail.
		if _, again := FailsAgain(d.Code); again && !o.IncludeInvalid && d.Note == "" {
			fn(d, ReplayFailsAgain, "")
			return nil
		}
		if o.DryRun {
			v := Replayed
			if d.Note != "" {
				v = ReplayCut
			}
			fn(d, v, "")
			return nil
		}
		v, intakeID, err := s.ReplayDead(ctx, d.Shard, d.EntryID)
		if err != nil {
			return err
		}
		fn(d, v, intakeID)
		return nil
	})
}

// purgeBatch is how many records PurgeSelection deletes with one XDEL.
const purgeBatch = 500

// PurgeSelection deletes the records of sel, calling each with every one first (dry: deletes
// nothing), and returns how many were chosen and how many deleted. The walk goes shard by
// shard: a batch holds one shard's ids and is deleted when full or when the walk moves on, so
// what was purged before a failure is every shard walked.
func (s *Inspector) PurgeSelection(ctx context.Context, sel *DeadSelection, dry bool, each func(DeadEntry)) (chosen, purged int64, err error) {
	batch, shard := make([]string, 0, purgeBatch), -1
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := s.PurgeDead(ctx, shard, batch...)
		purged += n
		batch = batch[:0]
		return err
	}
	err = s.EachDead(ctx, sel, func(d DeadEntry) error {
		chosen++
		each(d)
		if dry {
			return nil
		}
		if d.Shard != shard || len(batch) == purgeBatch {
			if err := flush(); err != nil {
				return err
			}
			shard = d.Shard
		}
		batch = append(batch, d.EntryID)
		return nil
	})
	if err == nil {
		err = flush()
	}
	return chosen, purged, err
}
