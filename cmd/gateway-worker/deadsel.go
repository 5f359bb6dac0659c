package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// How an operator names dead records: by entry, ENTRY_ID or SHARD/ENTRY_ID (the shard needed
// when the prefix has more than one, since an entry id is unique within a stream only), or by
// the filters of a inspect.DeadFilter, whose times are RFC 3339 or a duration ago (parseWhen).

// entryRef is how an operator names record d: its entry id, with "SHARD/" in front when the
// prefix has more than one shard.
func entryRef(d inspect.DeadEntry, shards int) string {
	if shards > 1 {
		return fmt.Sprintf("%d/%s", d.Shard, d.EntryID)
	}
	return d.EntryID
}

// refText is r as an operator gives it: ENTRY_ID, or SHARD/ENTRY_ID when it names a shard.
func refText(r inspect.DeadRef) string {
	if r.Shard >= 0 {
		return fmt.Sprintf("%d/%s", r.Shard, r.EntryID)
	}
	return r.EntryID
}

var deadRefPattern = regexp.MustCompile(`^(?:(\d+)/)?(\d+-\d+)$`)

// parseDeadRef reads ENTRY_ID or SHARD/ENTRY_ID; the ref's shard is -1 without one. ok is false
// when ref is neither form; err says its shard is not one of shards.
func parseDeadRef(ref string, shards int) (r inspect.DeadRef, ok bool, err error) {
	m := deadRefPattern.FindStringSubmatch(ref)
	if m == nil {
		return inspect.DeadRef{}, false, nil
	}
	if m[1] == "" {
		return inspect.DeadRef{Shard: -1, EntryID: m[2]}, true, nil
	}
	shard, err := strconv.Atoi(m[1])
	if err != nil || shard >= shards {
		return inspect.DeadRef{}, true, fmt.Errorf("%s: shard %s is not one of the %d shards", ref, m[1], shards)
	}
	return inspect.DeadRef{Shard: shard, EntryID: m[2]}, true, nil
}

// parseDeadRefs reads refs, each ENTRY_ID or SHARD/ENTRY_ID of one of shards (checkDeadChoice
// checked their form).
func parseDeadRefs(refs []string, shards int) ([]inspect.DeadRef, error) {
	out := make([]inspect.DeadRef, 0, len(refs))
	for _, ref := range refs {
		r, ok, err := parseDeadRef(ref, shards)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%q is not an entry id (1717171717171-0, or SHARD/1717171717171-0)", ref)
		}
		out = append(out, r)
	}
	return out, nil
}

// checkDeadChoice refuses a replay or purge that does not choose its records exactly one way:
// refs (each ENTRY_ID or SHARD/ENTRY_ID), or a filter (filtered: the operator gave one), or
// all. An operator who mixes them would act on more, or other, records than meant.
func checkDeadChoice(refs []string, filtered, all bool) error {
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
		if _, ok, _ := parseDeadRef(ref, stream.MaxShards); !ok {
			return fmt.Errorf("%q is not an entry id (1717171717171-0, or SHARD/1717171717171-0)", ref)
		}
	}
	return nil
}

// severalShards says, for each entry id of sel named without a shard that more than one shard
// has, that it cannot be acted on, and the refs that would name each of its records.
func severalShards(sel *inspect.DeadSelection, shards int) []string {
	var out []string
	for _, found := range sel.Several {
		var names []string
		for _, d := range found {
			names = append(names, entryRef(d, shards))
		}
		out = append(out, fmt.Sprintf("%s: on several shards (%s); give SHARD/ENTRY_ID", found[0].EntryID, strings.Join(names, ", ")))
	}
	return out
}

// deadView is a dead record as the dead commands print it (snake_case JSON); Job only when
// asked for (`dead show`), since it carries the subscription.
type deadView struct {
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

// viewOf is d as deadView, with its job when withJob.
func viewOf(d inspect.DeadEntry, withJob bool) deadView {
	out := deadView{Shard: d.Shard, EntryID: d.EntryID, ID: d.ID, Code: d.Code, Reason: d.Reason, Provider: d.Provider,
		Attempt: d.Attempt, From: d.From, Entry: d.Entry, At: d.At.UTC(), Note: d.Note}
	if withJob {
		job := d.Job
		out.Job = &job
	}
	return out
}

// newDeadFilter is the filter an operator gives (the flags of `gateway-worker dead`): reason,
// code and provider as inspect.DeadFilter has them, code one of the outcome codes, and since and
// until as parseWhen reads them at now ("" for none).
func newDeadFilter(reason, code, provider, since, until string, now time.Time) (inspect.DeadFilter, error) {
	if code != "" && !taxonomy.Code(code).Valid() {
		return inspect.DeadFilter{}, fmt.Errorf("--code %q is not an outcome code (one of %v)", code, taxonomy.Codes())
	}
	f := inspect.DeadFilter{Reason: reason, Code: code, Provider: provider}
	var err error
	if since != "" {
		if f.Since, err = parseWhen(since, now); err != nil {
			return f, fmt.Errorf("--since: %w", err)
		}
	}
	if until != "" {
		if f.Until, err = parseWhen(until, now); err != nil {
			return f, fmt.Errorf("--until: %w", err)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		return f, fmt.Errorf("--until %s is before --since %s", until, since)
	}
	return f, nil
}

// parseWhen reads a time an operator gives (--since, --until): an RFC 3339 time, or a duration
// before now (Go's units, and d for days).
func parseWhen(s string, now time.Time) (time.Time, error) {
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
