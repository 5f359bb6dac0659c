package stream

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// How an operator names dead records: by entry, ENTRY_ID or SHARD/ENTRY_ID (the shard needed
// when the prefix has more than one, since an entry id is unique within a stream only), or by
// the filters of a DeadFilter, whose times are RFC 3339 or a duration ago (ParseWhen).

// Ref is how an operator names the record: its entry id, with "SHARD/" in front when the
// prefix has more than one shard.
func (d DeadEntry) Ref(shards int) string {
	if shards > 1 {
		return fmt.Sprintf("%d/%s", d.Shard, d.EntryID)
	}
	return d.EntryID
}

// BadRefError is a reference that names no record a dead stream can hold.
type BadRefError struct{ msg string }

func (e *BadRefError) Error() string { return e.msg }

var deadRefPattern = regexp.MustCompile(`^(?:(\d+)/)?(\d+-\d+)$`)

// ParseDeadRef reads ENTRY_ID or SHARD/ENTRY_ID; shard is -1 without one. ok is false when ref
// is neither form; err, a *BadRefError, when its shard is not one of shards.
func ParseDeadRef(ref string, shards int) (shard int, id string, ok bool, err error) {
	m := deadRefPattern.FindStringSubmatch(ref)
	if m == nil {
		return 0, "", false, nil
	}
	if m[1] == "" {
		return -1, m[2], true, nil
	}
	shard, err = strconv.Atoi(m[1])
	if err != nil || shard >= shards {
		return 0, "", true, &BadRefError{fmt.Sprintf("%s: shard %s is not one of the %d shards", ref, m[1], shards)}
	}
	return shard, m[2], true, nil
}

// FindDead finds the record ref names (ENTRY_ID or SHARD/ENTRY_ID): none, one, or, for an
// entry id without a shard, one per shard that has it. A ref of neither form is a
// *BadRefError.
func (s *Inspector) FindDead(ctx context.Context, ref string) ([]DeadEntry, error) {
	shard, id, ok, err := ParseDeadRef(ref, s.Shards())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &BadRefError{fmt.Sprintf("%q is not an entry id (1717171717171-0, or SHARD/1717171717171-0)", ref)}
	}
	if shard >= 0 {
		d, found, err := s.DeadEntry(ctx, shard, id)
		if err != nil || !found {
			return nil, err
		}
		return []DeadEntry{d}, nil
	}
	return s.DeadEntries(ctx, id)
}

// ShowDead finds the record an operator asks for with ref: the record it names as an entry
// (FindDead: one per shard that has it), else the newest dead record of ref as a job id, of the
// newest scanLimit records of its shard (0: all). ofJob is how many records of the job were
// found; cut says the scan stopped at the limit.
func (s *Inspector) ShowDead(ctx context.Context, ref string, scanLimit int) (found []DeadEntry, ofJob int, cut bool, err error) {
	if _, _, isEntry, _ := ParseDeadRef(ref, s.Shards()); isEntry {
		if found, err = s.FindDead(ctx, ref); err != nil || len(found) > 0 {
			return found, 0, false, err
		}
	}
	byJob, cut, err := s.DeadOfJob(ctx, ref, scanLimit)
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
	// Missing are the refs that named no record (acted on before, or mistyped);
	// Problems the refs that cannot be acted on (an entry id on several shards).
	Missing, Problems []string
}

// CheckDeadChoice refuses a replay or purge that does not choose its records exactly one way:
// refs (each ENTRY_ID or SHARD/ENTRY_ID), or a filter (filtered: the operator gave one), or
// all. An operator who mixes them would act on more, or other, records than meant.
func CheckDeadChoice(refs []string, filtered, all bool) error {
	ways := 0
	for _, on := range []bool{len(refs) > 0, filtered, all} {
		if on {
			ways++
		}
	}
	switch {
	case ways == 0:
		return errors.New("choose the records: ENTRY_ID..., a filter (--reason, --code, --provider, --since, --until) or --all")
	case ways > 1:
		return errors.New("choose the records one way: ENTRY_ID..., filters, or --all")
	}
	for _, ref := range refs {
		if _, _, ok, _ := ParseDeadRef(ref, MaxShards); !ok {
			return fmt.Errorf("%q is not an entry id (1717171717171-0, or SHARD/1717171717171-0)", ref)
		}
	}
	return nil
}

// SelectDead resolves what refs name, or without refs the newest limit records f chooses;
// without refs and limit, the selection walks every record f chooses (EachDead).
func (s *Inspector) SelectDead(ctx context.Context, refs []string, f DeadFilter, limit int) (*DeadSelection, error) {
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
	for _, ref := range refs {
		found, err := s.FindDead(ctx, ref)
		if err != nil {
			return nil, err
		}
		switch len(found) {
		case 0:
			sel.Missing = append(sel.Missing, ref)
		case 1:
			sel.Chosen = append(sel.Chosen, found[0])
		default:
			var names []string
			for _, d := range found {
				names = append(names, d.Ref(s.Shards()))
			}
			sel.Problems = append(sel.Problems, fmt.Sprintf("%s: on several shards (%s); give SHARD/ENTRY_ID", ref, strings.Join(names, ", ")))
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

// DeadView is a dead record as the operators' dead commands print it (snake_case JSON); Job
// only when asked for (`dead show`), since it carries the subscription.
type DeadView struct {
	Shard    int       `json:"shard"`
	EntryID  string    `json:"entry_id"`
	ID       string    `json:"id"`
	Code     string    `json:"code"`
	Reason   string    `json:"reason"`
	Provider string    `json:"provider"`
	Attempt  int       `json:"attempt"`
	From     string    `json:"from"`
	Entry    string    `json:"entry"`
	At       time.Time `json:"at"`
	Note     string    `json:"note,omitempty"`
	Job      *string   `json:"job,omitempty"`
}

// View is d as DeadView, with its job when withJob.
func (d DeadEntry) View(withJob bool) DeadView {
	out := DeadView{Shard: d.Shard, EntryID: d.EntryID, ID: d.ID, Code: d.Code, Reason: d.Reason, Provider: d.Provider,
		Attempt: d.Attempt, From: d.From, Entry: d.Entry, At: d.At.UTC(), Note: d.Note}
	if withJob {
		job := d.Job
		out.Job = &job
	}
	return out
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

// NewDeadFilter is the filter an operator gives (the flags of `gateway-worker dead`): reason,
// code and provider as DeadFilter has them, code one of the outcome codes, and since and until
// as ParseWhen reads them at now ("" for none).
func NewDeadFilter(reason, code, provider, since, until string, now time.Time) (DeadFilter, error) {
	if code != "" && !taxonomy.Code(code).Valid() {
		return DeadFilter{}, fmt.Errorf("--code %q is not an outcome code (one of %v)", code, taxonomy.Codes())
	}
	f := DeadFilter{Reason: reason, Code: code, Provider: provider}
	var err error
	if since != "" {
		if f.Since, err = ParseWhen(since, now); err != nil {
			return f, fmt.Errorf("--since: %w", err)
		}
	}
	if until != "" {
		if f.Until, err = ParseWhen(until, now); err != nil {
			return f, fmt.Errorf("--until: %w", err)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		return f, fmt.Errorf("--until %s is before --since %s", until, since)
	}
	return f, nil
}

// ParseWhen reads a time an operator gives (--since, --until): an RFC 3339 time, or a duration
// before now (Go's units, and d for days).
func ParseWhen(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := parseAgo(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2025-06-01T12:00:00Z) nor a duration ago (90s, 30m, 2h, 7d)", s)
	}
	return now.Add(-d), nil
}

// parseAgo is time.ParseDuration that also takes whole days ("7d", "1d12h") and refuses a
// negative duration.
func parseAgo(s string) (time.Duration, error) {
	var days int64
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n < 0 || n > 100_000 {
			return 0, errors.New("bad days")
		}
		days, s = n, s[i+1:]
		if s == "" {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New("bad duration")
	}
	return time.Duration(days)*24*time.Hour + d, nil
}
