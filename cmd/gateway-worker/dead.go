package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// deadFlags are the flags of the dead commands that choose records.
type deadFlags struct {
	rf                       redisFlags
	reason, code, provider   string
	since, until             string
	limit                    int
	filter                   stream.DeadFilter
	filtered                 bool // some filter was given
	all, dryRun, yes, asJSON bool
}

func (d *deadFlags) registerFilters(fs *cli.FlagSet, limit int, limitHelp string) {
	d.rf.registerReader(fs)
	fs.Group("Filters")
	fs.StringVar(&d.reason, "reason", "", "records whose reason contains `TEXT`")
	fs.StringVar(&d.code, "code", "", "records of outcome `CODE` (INVALID_JOB, PROVIDER_DOWN, ...)")
	fs.StringVar(&d.provider, "provider", "", "records of provider `ID`")
	fs.StringVar(&d.since, "since", "", "records written at or after `WHEN`: an RFC 3339 time, or a duration ago (90s, 30m, 2h, 7d)")
	fs.StringVar(&d.until, "until", "", "records written at or before `WHEN` (as --since)")
	fs.CountVar(&d.limit, "limit", limit, limitHelp)
}

// registerSelection defines the flags replay and purge choose their records with: the filters,
// and under "Action" --all and --dry-run. verb is what the command does to a record ("replay"),
// done the same as a participle ("replayed").
func (d *deadFlags) registerSelection(fs *cli.FlagSet, verb, done string) {
	d.registerFilters(fs, 0, verb+" at most `N` of the records the filters choose, newest first (0: all)")
	fs.Group("Action")
	fs.BoolVar(&d.all, "all", false, verb+" every dead record")
	fs.BoolVar(&d.dryRun, "dry-run", false, "list the records that would be "+done+", and change nothing")
}

// check reads the filters at now; it has printed the problem when it returns false.
func (d *deadFlags) check(fs *cli.FlagSet, now time.Time) (int, bool) {
	if d.code != "" && !taxonomy.Code(d.code).Valid() {
		return fs.Fail(fmt.Errorf("--code %q is not an outcome code (one of %v)", d.code, taxonomy.Codes())), false
	}
	d.filter = stream.DeadFilter{Reason: d.reason, Code: d.code, Provider: d.provider}
	var err error
	if d.since != "" {
		if d.filter.Since, err = parseWhen(d.since, now); err != nil {
			return fs.Fail(fmt.Errorf("--since: %w", err)), false
		}
	}
	if d.until != "" {
		if d.filter.Until, err = parseWhen(d.until, now); err != nil {
			return fs.Fail(fmt.Errorf("--until: %w", err)), false
		}
	}
	if !d.filter.Since.IsZero() && !d.filter.Until.IsZero() && d.filter.Until.Before(d.filter.Since) {
		return fs.Fail(fmt.Errorf("--until %s is before --since %s", d.until, d.since)), false
	}
	d.filtered = d.reason != "" || d.code != "" || d.provider != "" || d.since != "" || d.until != ""
	return cli.ExitOK, true
}

// parseWhen reads a --since or --until value: an RFC 3339 time, or a duration before now (Go's
// units, and d for days).
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

// deadRecordJSON is a dead record as the dead commands print it; Job only in `show`.
type deadRecordJSON struct {
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

func deadJSON(d stream.DeadEntry, withJob bool) deadRecordJSON {
	out := deadRecordJSON{Shard: d.Shard, EntryID: d.EntryID, ID: d.ID, Code: d.Code, Reason: d.Reason, Provider: d.Provider,
		Attempt: d.Attempt, From: d.From, Entry: d.Entry, At: d.At.UTC(), Note: d.Note}
	if withJob {
		job := d.Job
		out.Job = &job
	}
	return out
}

// entryRef is how the dead commands name a record: its entry id, with "SHARD/" in front when
// the prefix has more than one shard.
func entryRef(d stream.DeadEntry, shards int) string {
	if shards > 1 {
		return fmt.Sprintf("%d/%s", d.Shard, d.EntryID)
	}
	return d.EntryID
}

var entryIDPattern = regexp.MustCompile(`^(?:(\d+)/)?(\d+-\d+)$`)

// parseEntryRef reads ENTRY_ID or SHARD/ENTRY_ID; shard is -1 without one. ok is false when ref
// is neither form.
func parseEntryRef(ref string, shards int) (shard int, id string, ok bool, err error) {
	m := entryIDPattern.FindStringSubmatch(ref)
	if m == nil {
		return 0, "", false, nil
	}
	if m[1] == "" {
		return -1, m[2], true, nil
	}
	shard, err = strconv.Atoi(m[1])
	if err != nil || shard >= shards {
		return 0, "", true, &badRef{fmt.Sprintf("%s: shard %s is not one of the %d shards", ref, m[1], shards)}
	}
	return shard, m[2], true, nil
}

// findEntry finds the record ref names (ENTRY_ID or SHARD/ENTRY_ID): none, one, or, for an
// entry id without a shard, one per shard that has it.
func findEntry(ctx context.Context, st *stream.Inspector, ref string) ([]stream.DeadEntry, error) {
	shard, id, ok, err := parseEntryRef(ref, st.Shards())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &badRef{fmt.Sprintf("%q is not an entry id (1717171717171-0, or SHARD/1717171717171-0)", ref)}
	}
	if shard >= 0 {
		d, found, err := st.DeadEntry(ctx, shard, id)
		if err != nil || !found {
			return nil, err
		}
		return []stream.DeadEntry{d}, nil
	}
	return st.DeadEntries(ctx, id)
}

func printable(s string) string {
	if s == "" {
		return "-"
	}
	if q := strconv.Quote(s); q[1:len(q)-1] != s || strings.ContainsAny(s, " \t") {
		return q
	}
	return s
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func cmdDeadLs(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var d deadFlags
	d.registerFilters(fs, 100, "list at most `N` records (0: all)")
	fs.Group("Output")
	fs.BoolVar(&d.asJSON, "json", false, "print one JSON object: {\"records\": [...]} (snake_case keys; no job)")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	if code, ok := d.check(fs, time.Now()); !ok {
		return code
	}
	st, code := d.rf.openReader(ctx, fs, "gateway-dead", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	// One more than asked tells whether there were more.
	ask := d.limit
	if ask > 0 {
		ask++
	}
	recs, err := st.DeadList(ctx, d.filter, ask)
	if err != nil {
		return unavailable(stderr, fs.Name(), err)
	}
	more := d.limit > 0 && len(recs) > d.limit
	if more {
		recs = recs[:d.limit]
	}
	if d.asJSON {
		out := struct {
			Records []deadRecordJSON `json:"records"`
			More    bool             `json:"more"`
		}{Records: []deadRecordJSON{}, More: more}
		for _, r := range recs {
			out.Records = append(out.Records, deadJSON(r, false))
		}
		return printJSON(fs, stdout, stderr, out)
	}
	if len(recs) == 0 {
		fmt.Fprintln(stdout, "no dead record matches")
		return cli.ExitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTRY\tJOB\tCODE\tPROVIDER\tAT\tREASON")
	for _, r := range recs {
		reason := cut(r.Reason, 100)
		if r.Note != "" {
			reason += " [job cut: cannot be replayed]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", entryRef(r, st.Shards()), printable(r.ID), r.Code, dash(r.Provider),
			r.At.UTC().Format(time.RFC3339), reason)
	}
	_ = tw.Flush()
	if more {
		fmt.Fprintf(stdout, "%d records shown, newest first; more match (--limit %d; --limit 0 lists all)\n", len(recs), d.limit)
	} else {
		fmt.Fprintf(stdout, "%d records\n", len(recs))
	}
	return cli.ExitOK
}

func cmdDeadShow(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.registerReader(fs)
	fs.Group("Search")
	scanLimit := fs.Count("scan-limit", defaultScanLimit, "given a job id, read at most `N` records (0: all)")
	fs.Group("Output")
	asJSON := fs.Bool("json", false, "print the record as one JSON object (snake_case keys, the job as a string)")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	st, code := rf.openReader(ctx, fs, "gateway-dead", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	ref := fs.Arg(0)
	var found []stream.DeadEntry
	if _, _, isEntry, _ := parseEntryRef(ref, st.Shards()); isEntry {
		var err error
		if found, err = findEntry(ctx, st, ref); err != nil {
			return unavailableOrUsage(fs, stderr, err)
		}
	}
	cutNote := ""
	if len(found) == 0 {
		byJob, cut, err := st.DeadOfJob(ctx, ref, *scanLimit)
		if err != nil {
			return unavailable(stderr, fs.Name(), err)
		}
		if cut {
			cutNote = fmt.Sprintf(" (read the newest %d records of its shard only: --scan-limit)", *scanLimit)
		}
		if len(byJob) > 1 {
			fmt.Fprintf(stderr, "%s: job %s has %d dead records; showing the newest (`dead ls` lists them)\n", fs.Name(), ref, len(byJob))
		}
		if len(byJob) > 0 {
			found = byJob[:1]
		}
	}
	switch {
	case len(found) == 0:
		fmt.Fprintf(stderr, "%s: no dead record %s%s\n", fs.Name(), ref, cutNote)
		return cli.ExitNo
	case len(found) > 1:
		var refs []string
		for _, d := range found {
			refs = append(refs, entryRef(d, st.Shards()))
		}
		return fs.Fail(fmt.Errorf("entry %s is on several shards: give one of %s", ref, strings.Join(refs, ", ")))
	}
	d := found[0]
	if *asJSON {
		return printJSON(fs, stdout, stderr, deadJSON(d, true))
	}
	fmt.Fprintf(stdout, "entry     %s of %s\n", entryRef(d, st.Shards()), st.Keys(d.Shard).Dead)
	fmt.Fprintf(stdout, "id        %s\n", printable(d.ID))
	fmt.Fprintf(stdout, "code      %s\n", d.Code)
	fmt.Fprintf(stdout, "reason    %s\n", d.Reason)
	fmt.Fprintf(stdout, "provider  %s\n", dash(d.Provider))
	fmt.Fprintf(stdout, "attempt   %d (0 is the first; the last attempt made)\n", d.Attempt)
	fmt.Fprintf(stdout, "from      %s entry %s\n", d.From, dash(d.Entry))
	fmt.Fprintf(stdout, "at        %s\n", d.At.UTC().Format(time.RFC3339Nano))
	if d.Note != "" {
		fmt.Fprintf(stdout, "note      %s (cannot be replayed)\n", d.Note)
	}
	fmt.Fprintf(stdout, "job       %s\n", d.Job)
	return cli.ExitOK
}

// unavailableOrUsage reports err as a refused argument when it is one (a shard out of range),
// else as a Redis that could not be read.
func unavailableOrUsage(fs *cli.FlagSet, stderr io.Writer, err error) int {
	var bad *badRef
	if errors.As(err, &bad) {
		return fs.Fail(err)
	}
	return unavailable(stderr, fs.Name(), err)
}

// badRef is an argument that names no record a dead stream can hold.
type badRef struct{ msg string }

func (e *badRef) Error() string { return e.msg }

// choose resolves the records replay and purge act on: those args name, or, with --limit,
// the newest that the filters (or --all) choose; the caller walks every record the filters
// choose itself, as they are read (selection.each). An argument that names no record is in
// missing (acting twice on a record is not a failure); one on several shards is a problem.
func (d *deadFlags) choose(ctx context.Context, st *stream.Inspector, args []string) (chosen []stream.DeadEntry, missing, problems []string, err error) {
	if len(args) == 0 {
		chosen, err = st.DeadList(ctx, d.filter, d.limit)
		return chosen, nil, nil, err
	}
	for _, ref := range args {
		found, err := findEntry(ctx, st, ref)
		if err != nil {
			return nil, nil, nil, err
		}
		switch len(found) {
		case 0:
			missing = append(missing, ref)
		case 1:
			chosen = append(chosen, found[0])
		default:
			var refs []string
			for _, f := range found {
				refs = append(refs, entryRef(f, st.Shards()))
			}
			problems = append(problems, fmt.Sprintf("%s: on several shards (%s); give SHARD/ENTRY_ID", ref, strings.Join(refs, ", ")))
		}
	}
	return chosen, missing, problems, nil
}

// reportMissing lists the entry ids that named no record: replayed or purged before (which is
// why it is not a failure), or mistyped.
func reportMissing(w io.Writer, name string, missing []string) {
	for _, ref := range missing {
		fmt.Fprintf(w, "%s: %s: no such record (replayed or purged before, or never there)\n", name, ref)
	}
}

// checkSelection checks that the records to act on are chosen one way: entry ids, or filters, or
// --all.
func (d *deadFlags) checkSelection(fs *cli.FlagSet) (int, bool) {
	ways := 0
	for _, on := range []bool{fs.NArg() > 0, d.filtered, d.all} {
		if on {
			ways++
		}
	}
	switch {
	case ways == 0:
		return fs.Fail(errors.New("choose the records: ENTRY_ID..., a filter (--reason, --code, --provider, --since, --until) or --all")), false
	case ways > 1:
		return fs.Fail(errors.New("choose the records one way: ENTRY_ID..., filters, or --all")), false
	}
	for _, ref := range fs.Args() {
		if _, _, ok, _ := parseEntryRef(ref, stream.MaxShards); !ok {
			return fs.Fail(fmt.Errorf("%q is not an entry id (1717171717171-0, or SHARD/1717171717171-0)", ref)), false
		}
	}
	return cli.ExitOK, true
}

// selection of replay or purge: the records chosen, on the open Store (the caller closes it).
type selection struct {
	st *stream.Inspector
	// chosen are the records the arguments named, or the newest --limit the filters chose;
	// unless walk, in which case every record the filters choose is read as each goes.
	chosen   []stream.DeadEntry
	walk     bool
	filter   stream.DeadFilter
	problems []string // arguments that cannot be acted on
	gone     int      // entry ids that named no record
}

// each calls fn with every chosen record until fn fails. Walking every record the filters
// choose holds one page of the dead stream at a time, however long it is.
func (s *selection) each(ctx context.Context, fn func(stream.DeadEntry) error) error {
	if s.walk {
		return s.st.DeadEach(ctx, s.filter, fn)
	}
	for _, r := range s.chosen {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// selected parses the command line of replay or purge, checks it (and with confirm, whatever
// else the command requires), opens Redis and resolves the chosen records. A nil selection
// means the command ends with code, the reason printed.
func (d *deadFlags) selected(ctx context.Context, fs *cli.FlagSet, args []string, stderr io.Writer, confirm func() error) (*selection, int) {
	if code, ok := fs.Parse(args); !ok {
		return nil, code
	}
	if code, ok := d.check(fs, time.Now()); !ok {
		return nil, code
	}
	if code, ok := d.checkSelection(fs); !ok {
		return nil, code
	}
	if confirm != nil {
		if err := confirm(); err != nil {
			return nil, fs.Fail(err)
		}
	}
	st, code := d.rf.openReader(ctx, fs, "gateway-dead", stderr)
	if st == nil {
		return nil, code
	}
	if fs.NArg() == 0 && d.limit == 0 {
		return &selection{st: st, walk: true, filter: d.filter}, cli.ExitOK
	}
	chosen, missing, problems, err := d.choose(ctx, st, fs.Args())
	if err != nil {
		st.Close()
		return nil, unavailableOrUsage(fs, stderr, err)
	}
	reportMissing(stderr, fs.Name(), missing)
	return &selection{st: st, chosen: chosen, problems: problems, gone: len(missing)}, cli.ExitOK
}

func cmdDeadReplay(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var d deadFlags
	d.registerSelection(fs, "replay", "replayed")
	sel, code := d.selected(ctx, fs, args, stderr, nil)
	if sel == nil {
		return code
	}
	defer sel.st.Close()
	st := sel.st
	replayed, gone, skipped := 0, sel.gone, 0
	// Each record that cannot be replayed is reported as it is met: a walk holds no list of them.
	skip := func(problem string) {
		skipped++
		fmt.Fprintf(stderr, "%s: not replayed: %s\n", fs.Name(), problem)
	}
	for _, p := range sel.problems {
		skip(p)
	}
	err := sel.each(ctx, func(r stream.DeadEntry) error {
		ref := entryRef(r, st.Shards())
		if d.dryRun {
			if r.Note != "" {
				skip(fmt.Sprintf("%s (job %s): its job was cut to the entry limit; it cannot be replayed", ref, printable(r.ID)))
				return nil
			}
			fmt.Fprintf(stdout, "would replay %s (job %s, %s)\n", ref, printable(r.ID), r.Code)
			replayed++
			return nil
		}
		v, intakeID, err := st.ReplayDead(ctx, r.Shard, r.EntryID)
		if err != nil {
			return err
		}
		switch v {
		case stream.Replayed:
			replayed++
			fmt.Fprintf(stdout, "replayed %s (job %s) as %s entry %s\n", ref, printable(r.ID), st.Keys(r.Shard).Intake, intakeID)
		case stream.ReplayGone:
			gone++
		case stream.ReplayCut:
			skip(fmt.Sprintf("%s (job %s): its job was cut to the entry limit; it cannot be replayed", ref, printable(r.ID)))
		case stream.ReplayNoJob:
			skip(fmt.Sprintf("%s: the record holds no job to replay", ref))
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stdout, "replayed %d records before Redis failed\n", replayed)
		return unavailable(stderr, fs.Name(), err)
	}
	verb := "replayed"
	if d.dryRun {
		verb = "would replay"
	}
	fmt.Fprintf(stdout, "%s %d records; %d skipped; %d already gone (replayed or purged before)\n", verb, replayed, skipped, gone)
	if skipped > 0 {
		return cli.ExitNo
	}
	return cli.ExitOK
}

// purgeBatch is how many records purge deletes with one XDEL.
const purgeBatch = 500

func cmdDeadPurge(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var d deadFlags
	d.registerSelection(fs, "purge", "purged")
	fs.BoolVar(&d.yes, "yes", false, "confirm --all, which purge refuses without it")
	sel, code := d.selected(ctx, fs, args, stderr, func() error {
		if d.all && !d.yes && !d.dryRun {
			return errors.New("--all deletes every dead record: add --yes to confirm (or --dry-run to see them)")
		}
		return nil
	})
	if sel == nil {
		return code
	}
	defer sel.st.Close()
	st := sel.st
	var chosen, purged int64
	// The walk goes shard by shard: a batch holds one shard's ids and is deleted when full or
	// when the walk moves on, so what was purged before a failure is every shard walked.
	batch, shard := make([]string, 0, purgeBatch), -1
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := st.PurgeDead(ctx, shard, batch...)
		purged += n
		batch = batch[:0]
		return err
	}
	err := sel.each(ctx, func(r stream.DeadEntry) error {
		chosen++
		if d.dryRun {
			fmt.Fprintf(stdout, "would purge %s (job %s, %s)\n", entryRef(r, st.Shards()), printable(r.ID), r.Code)
			return nil
		}
		if r.Shard != shard || len(batch) == purgeBatch {
			if err := flush(); err != nil {
				return err
			}
			shard = r.Shard
		}
		batch = append(batch, r.EntryID)
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		fmt.Fprintf(stdout, "purged %d records before Redis failed\n", purged)
		return unavailable(stderr, fs.Name(), err)
	}
	for _, p := range sel.problems {
		fmt.Fprintf(stderr, "%s: not purged: %s\n", fs.Name(), p)
	}
	if d.dryRun {
		fmt.Fprintf(stdout, "would purge %d records\n", chosen)
	} else {
		fmt.Fprintf(stdout, "purged %d records\n", purged)
	}
	if len(sel.problems) > 0 {
		return cli.ExitNo
	}
	return cli.ExitOK
}
