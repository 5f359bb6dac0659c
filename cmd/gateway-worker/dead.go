package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// deadFlags are the flags of the dead commands that choose records.
type deadFlags struct {
	rf                       redisFlags
	reason, code, provider   string
	since, until             string
	limit                    int
	filter                   inspect.DeadFilter
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
	var err error
	if d.filter, err = newDeadFilter(d.reason, d.code, d.provider, d.since, d.until, now); err != nil {
		return fs.Fail(err), false
	}
	d.filtered = d.reason != "" || d.code != "" || d.provider != "" || d.since != "" || d.until != ""
	return cli.ExitOK, true
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
			Records []deadView `json:"records"`
			More    bool       `json:"more"`
		}{Records: []deadView{}, More: more}
		for _, r := range recs {
			out.Records = append(out.Records, viewOf(r, false))
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
		reason := r.Reason
		if len(reason) > 100 {
			reason = reason[:100] + "..."
		}
		if r.Note != "" {
			reason += " [job cut: cannot be replayed]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", entryRef(r, st.Shards()), cli.Printable(r.ID), r.Code, cli.Dash(r.Provider),
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
	entry, isEntry, err := parseDeadRef(ref, st.Shards())
	if err != nil {
		return fs.Fail(err)
	}
	var named *inspect.DeadRef
	if isEntry {
		named = &entry
	}
	found, ofJob, cut, err := st.ShowDead(ctx, named, ref, *scanLimit)
	if err != nil {
		return unavailable(stderr, fs.Name(), err)
	}
	if ofJob > 1 {
		fmt.Fprintf(stderr, "%s: job %s has %d dead records; showing the newest (`dead ls` lists them)\n", fs.Name(), ref, ofJob)
	}
	switch {
	case len(found) == 0:
		cutNote := ""
		if cut {
			cutNote = fmt.Sprintf(" (read the newest %d records of its shard only: --scan-limit)", *scanLimit)
		}
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
		return printJSON(fs, stdout, stderr, viewOf(d, true))
	}
	fmt.Fprintf(stdout, "entry     %s of %s\n", entryRef(d, st.Shards()), st.Keys(d.Shard).Dead)
	fmt.Fprintf(stdout, "id        %s\n", cli.Printable(d.ID))
	fmt.Fprintf(stdout, "code      %s\n", d.Code)
	fmt.Fprintf(stdout, "reason    %s\n", d.Reason)
	fmt.Fprintf(stdout, "provider  %s\n", cli.Dash(d.Provider))
	fmt.Fprintf(stdout, "attempt   %d (0 is the first; the last attempt made)\n", d.Attempt)
	fmt.Fprintf(stdout, "from      %s entry %s\n", d.From, cli.Dash(d.Entry))
	fmt.Fprintf(stdout, "at        %s\n", d.At.UTC().Format(time.RFC3339Nano))
	if d.Note != "" {
		fmt.Fprintf(stdout, "note      %s (cannot be replayed)\n", d.Note)
	}
	fmt.Fprintf(stdout, "job       %s\n", d.Job)
	return cli.ExitOK
}

// selected parses the command line of replay or purge, checks it (and with confirm, whatever
// else the command requires), opens Redis and resolves the chosen records. A nil Inspector
// means the command ends with code, the reason printed.
func (d *deadFlags) selected(ctx context.Context, fs *cli.FlagSet, args []string, stderr io.Writer, confirm func() error) (*inspect.Inspector, *inspect.DeadSelection, int) {
	if code, ok := fs.Parse(args); !ok {
		return nil, nil, code
	}
	if code, ok := d.check(fs, time.Now()); !ok {
		return nil, nil, code
	}
	if err := checkDeadChoice(fs.Args(), d.filtered, d.all); err != nil {
		return nil, nil, fs.Fail(err)
	}
	if confirm != nil {
		if err := confirm(); err != nil {
			return nil, nil, fs.Fail(err)
		}
	}
	st, code := d.rf.openReader(ctx, fs, "gateway-dead", stderr)
	if st == nil {
		return nil, nil, code
	}
	refs, err := parseDeadRefs(fs.Args(), st.Shards())
	if err != nil {
		st.Close()
		return nil, nil, fs.Fail(err)
	}
	sel, err := st.SelectDead(ctx, refs, d.filter, d.limit)
	if err != nil {
		st.Close()
		return nil, nil, unavailable(stderr, fs.Name(), err)
	}
	for _, r := range sel.Missing { // replayed or purged before, or mistyped
		fmt.Fprintf(stderr, "%s: %s: no such record (replayed or purged before, or never there)\n", fs.Name(), refText(r))
	}
	return st, sel, cli.ExitOK
}

func cmdDeadReplay(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var d deadFlags
	d.registerSelection(fs, "replay", "replayed")
	includeInvalid := fs.Bool("include-invalid", false, "replay records whose code says the job would fail the same way again "+
		"(INVALID_JOB, PAYLOAD_TOO_LARGE, INVALID_REQUEST, INVALID_TTL, BLOCKED, EXPIRED), once what refused them was fixed")
	st, sel, code := d.selected(ctx, fs, args, stderr, nil)
	if st == nil {
		return code
	}
	defer st.Close()
	// A named record that is not there is a "not found": the operator may have mistyped it,
	// and a script must be able to tell that from a replay that did all it was asked.
	missing := len(sel.Missing)
	replayed, gone, skipped, again := 0, 0, 0, 0
	// Each record that cannot be replayed is reported as it is met: a walk holds no list of them.
	skip := func(problem string) {
		skipped++
		fmt.Fprintf(stderr, "%s: not replayed: %s\n", fs.Name(), problem)
	}
	for _, p := range severalShards(sel, st.Shards()) {
		skip(p)
	}
	byRef := fs.NArg() > 0
	err := st.ReplaySelection(ctx, sel, inspect.ReplayOptions{DryRun: d.dryRun, IncludeInvalid: *includeInvalid}, func(r inspect.DeadEntry, v inspect.ReplayVerdict, intakeID string) {
		ref := entryRef(r, st.Shards())
		switch {
		case v == inspect.Replayed && d.dryRun:
			replayed++
			fmt.Fprintf(stdout, "would replay %s (job %s, %s)\n", ref, cli.Printable(r.ID), r.Code)
		case v == inspect.Replayed:
			replayed++
			fmt.Fprintf(stdout, "replayed %s (job %s) as %s entry %s\n", ref, cli.Printable(r.ID), st.Keys(r.Shard).Intake, intakeID)
		case v == inspect.ReplayGone && byRef:
			// Found by the selection, gone at its replay: another replay or purge took it.
			missing++
			fmt.Fprintf(stderr, "%s: %s: no such record (replayed or purged meanwhile)\n", fs.Name(), ref)
		case v == inspect.ReplayGone:
			gone++
		case v == inspect.ReplayCut:
			skip(fmt.Sprintf("%s (job %s): its record keeps only the first bytes of its job; it cannot be replayed", ref, cli.Printable(r.ID)))
		case v == inspect.ReplayNoJob:
			skip(fmt.Sprintf("%s: the record holds no job to replay", ref))
		case v == inspect.ReplayFailsAgain:
			why, _ := inspect.FailsAgain(r.Code)
			skipped++
			again++
			fmt.Fprintf(stderr, "%s: skipped %s (job %s, %s): %s; --include-invalid replays it\n", fs.Name(), ref, cli.Printable(r.ID), r.Code, why)
		}
	})
	if err != nil {
		fmt.Fprintf(stdout, "replayed %d records before Redis failed\n", replayed)
		return unavailable(stderr, fs.Name(), err)
	}
	verb := "replayed"
	if d.dryRun {
		verb = "would replay"
	}
	againNote := ""
	if again > 0 {
		againNote = fmt.Sprintf(" (%d would fail the same way again: --include-invalid)", again)
	}
	fmt.Fprintf(stdout, "%s %d records; %d skipped%s; %d already gone (replayed or purged before)", verb, replayed, skipped, againNote, gone)
	if missing > 0 {
		fmt.Fprintf(stdout, "; %d entry ids not found", missing)
	}
	fmt.Fprintln(stdout)
	// Records skipped because they would fail again are the command doing as documented, not
	// a failure; a record that could not be replayed at all, or an id that named none, is.
	if skipped-again > 0 || missing > 0 {
		return cli.ExitNo
	}
	return cli.ExitOK
}

func cmdDeadPurge(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var d deadFlags
	d.registerSelection(fs, "purge", "purged")
	fs.BoolVar(&d.yes, "yes", false, "confirm --all, which purge refuses without it")
	st, sel, code := d.selected(ctx, fs, args, stderr, func() error {
		if d.all && !d.yes && !d.dryRun {
			return errors.New("--all deletes every dead record: add --yes to confirm (or --dry-run to see them)")
		}
		return nil
	})
	if st == nil {
		return code
	}
	defer st.Close()
	chosen, purged, err := st.PurgeSelection(ctx, sel, d.dryRun, func(r inspect.DeadEntry) {
		if d.dryRun {
			fmt.Fprintf(stdout, "would purge %s (job %s, %s)\n", entryRef(r, st.Shards()), cli.Printable(r.ID), r.Code)
		}
	})
	if err != nil {
		fmt.Fprintf(stdout, "purged %d records before Redis failed\n", purged)
		return unavailable(stderr, fs.Name(), err)
	}
	several := severalShards(sel, st.Shards())
	for _, p := range several {
		fmt.Fprintf(stderr, "%s: not purged: %s\n", fs.Name(), p)
	}
	if d.dryRun {
		fmt.Fprintf(stdout, "would purge %d records\n", chosen)
	} else {
		fmt.Fprintf(stdout, "purged %d records\n", purged)
	}
	if len(several) > 0 {
		return cli.ExitNo
	}
	return cli.ExitOK
}
