package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream"
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
	idsFile := fs.String("ids", "", "`FILE` of job ids, one per line (or JSON-lines jobs: their \"id\" is used)")
	fs.Require("ids")
	fs.Group("Output")
	asJSON := fs.Bool("json", false, "print the report as one JSON object (snake_case keys)")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	ids, skipped, err := readIDs(*idsFile)
	if err != nil {
		return fs.Fail(fmt.Errorf("--ids: %w", err))
	}
	if skipped > 0 {
		fmt.Fprintf(stderr, "gateway-worker audit: %d lines of %s have no job id and were not audited\n", skipped, *idsFile)
	}
	st, code := rf.openReader(ctx, fs, "gateway-audit", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
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
		printAudit(stdout, rep, byCode)
	}
	if rep.ExactlyOne != rep.Total {
		return cli.ExitNo
	}
	return cli.ExitOK
}

func printAudit(w io.Writer, rep stream.AuditReport, byCode map[string]int) {
	fmt.Fprintf(w, "jobs:                     %d\n", rep.Total)
	fmt.Fprintf(w, "exactly one terminal:     %d\n", rep.ExactlyOne)
	fmt.Fprintf(w, "none yet:                 %d\n", rep.None)
	for _, k := range sortedKeys(rep.NoneWhere) {
		label := k
		if k == "nowhere" {
			label = "nowhere (LOST)"
		}
		fmt.Fprintf(w, "  %-22s  %d\n", label, rep.NoneWhere[k])
	}
	fmt.Fprintf(w, "more than one terminal:   %d\n", rep.MoreThanOne)
	for _, id := range first(rep.Duplicated, 10) {
		fmt.Fprintf(w, "  duplicated: %s\n", id)
	}
	for _, id := range first(rep.Missing, 10) {
		fmt.Fprintf(w, "  missing:    %s\n", id)
	}
	if len(byCode) > 0 {
		fmt.Fprintln(w, "terminal records by code:")
		for _, code := range sortedKeys(byCode) {
			fmt.Fprintf(w, "  %-22s  %d\n", code, byCode[code])
		}
	}
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// readIDs reads one id per line or, when the first line is a JSON object, the "id" of each
// JSON-lines job, so the file given to enqueue can be audited as it is. In that form a line
// without an id was refused by enqueue too, so it is skipped and counted.
func readIDs(path string) (ids []string, skipped int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	jsonLines, first := false, true
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if first {
			jsonLines, first = strings.HasPrefix(line, "{"), false
		}
		if !jsonLines {
			ids = append(ids, line)
			continue
		}
		id, problem := cli.LineJobID([]byte(line))
		if problem != "" {
			skipped++
			continue
		}
		ids = append(ids, id)
	}
	return ids, skipped, sc.Err()
}
