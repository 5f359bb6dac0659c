package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// auditJSON is what `audit --json` prints: the report, with the snake_case keys of send's.
type auditJSON struct {
	Total       int            `json:"total"`
	ExactlyOne  int            `json:"exactly_one"`
	None        int            `json:"none"`
	MoreThanOne int            `json:"more_than_one"`
	NoneWhere   map[string]int `json:"none_where"`
	ByCode      map[string]int `json:"by_code"`
	Missing     []string       `json:"missing"`
	Duplicated  []string       `json:"duplicated"`
}

func cmdAudit(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.registerReader(fs)
	fs.Group("Jobs")
	idsFile := fs.String("ids", "", "`FILE` of job ids, one per line (or JSON-lines jobs: their \"id\" is used); this or --campaign")
	campaign := fs.String("campaign", "", "the recipients of campaign `ID` instead: every one a worker has numbered (job ids ID/1, ID/2, ...)")
	fs.Group("Output")
	asJSON := fs.Bool("json", false, "print the report as one JSON object (snake_case keys)")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	var ids []string
	switch {
	case *idsFile == "" && *campaign == "":
		return fs.Fail(errors.New("--ids or --campaign is required"))
	case *idsFile != "" && *campaign != "":
		return fs.Fail(errors.New("--ids and --campaign both choose the jobs: give one"))
	case *campaign != "":
		if err := job.CheckCampaignID(*campaign); err != nil {
			return fs.Fail(fmt.Errorf("--campaign: %w", err))
		}
	default:
		var skipped int
		var err error
		if ids, skipped, err = cli.ReadIDs(*idsFile); err != nil {
			return fs.Fail(fmt.Errorf("--ids: %w", err))
		}
		if skipped > 0 {
			fmt.Fprintf(stderr, "gateway-worker audit: %d lines of %s have no job id and were not audited\n", skipped, *idsFile)
		}
	}
	st, code := rf.openReader(ctx, fs, "gateway-audit", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	if *campaign != "" {
		var err error
		if ids, err = st.CampaignRecipientIDs(ctx, *campaign); errors.Is(err, inspect.ErrNoCampaign) {
			fmt.Fprintf(stdout, "no campaign %s under prefix %s\n", *campaign, rf.prefix)
			return cli.ExitNo
		} else if err != nil {
			return redisFailure(stderr, fs.Name(), err)
		}
	}
	rep, byCode, err := st.Audit(ctx, ids)
	if err != nil {
		return redisFailure(stderr, fs.Name(), err)
	}
	if *asJSON {
		out := auditJSON{
			Total: rep.Total, ExactlyOne: rep.ExactlyOne, None: rep.None, MoreThanOne: rep.MoreThanOne,
			NoneWhere: rep.NoneWhere, ByCode: byCode, Missing: rep.Missing, Duplicated: rep.Duplicated,
		}
		if out.Missing == nil {
			out.Missing = []string{}
		}
		if out.Duplicated == nil {
			out.Duplicated = []string{}
		}
		if code := printJSON(fs, stdout, stderr, out); code != cli.ExitOK {
			return code
		}
	} else {
		writeAudit(stdout, rep, byCode)
	}
	if rep.ExactlyOne != rep.Total {
		return cli.ExitNo
	}
	return cli.ExitOK
}

// writeAudit writes rep, and the records counted by code (byCode, as Audit returns them), as
// `gateway-worker audit` prints them: the counts, where the jobs without a record are, and the
// first ten ids missing a record and the first ten with more than one.
func writeAudit(w io.Writer, rep inspect.AuditReport, byCode map[string]int) {
	fmt.Fprintf(w, "jobs:                     %d\n", rep.Total)
	fmt.Fprintf(w, "exactly one terminal:     %d\n", rep.ExactlyOne)
	fmt.Fprintf(w, "none yet:                 %d\n", rep.None)
	for _, k := range slices.Sorted(maps.Keys(rep.NoneWhere)) {
		label := k
		if k == "nowhere" {
			label = "nowhere (LOST)"
		}
		fmt.Fprintf(w, "  %-22s  %d\n", label, rep.NoneWhere[k])
	}
	fmt.Fprintf(w, "more than one terminal:   %d\n", rep.MoreThanOne)
	for _, id := range rep.Duplicated[:min(10, len(rep.Duplicated))] {
		fmt.Fprintf(w, "  duplicated: %s\n", id)
	}
	for _, id := range rep.Missing[:min(10, len(rep.Missing))] {
		fmt.Fprintf(w, "  missing:    %s\n", id)
	}
	if len(byCode) > 0 {
		fmt.Fprintln(w, "terminal records by code:")
		for _, code := range slices.Sorted(maps.Keys(byCode)) {
			fmt.Fprintf(w, "  %-22s  %d\n", code, byCode[code])
		}
	}
}
