package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/webpush-gateway/webpush-gateway/internal/cli"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("gateway-worker audit", stderr)
	var rf redisFlags
	rf.register(fs)
	idsFile := fs.String("ids", "", "`FILE` of job ids, one per line (or JSON-lines jobs: their \"id\" is used)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage(err)
	}
	if err := cli.NoArgs(fs); err != nil {
		return 2
	}
	if err := rf.check(); err != nil {
		fmt.Fprintln(stderr, "gateway-worker audit:", err)
		return 2
	}
	if *idsFile == "" {
		fmt.Fprintln(stderr, "gateway-worker audit: --ids is required")
		return 2
	}
	ids, skipped, err := readIDs(*idsFile)
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker audit:", err)
		return 2
	}
	if skipped > 0 {
		fmt.Fprintf(stderr, "gateway-worker audit: %d lines of %s have no job id and were not audited\n", skipped, *idsFile)
	}
	st, err := stream.Open(rf.url, stream.OpenOptions{
		Options: stream.Options{Prefix: rf.prefix, Shards: rf.shards, Consumer: "audit"}, ClientName: "gateway-audit",
	})
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker audit:", err)
		return 2
	}
	defer st.Close()
	rep, err := st.Audit(ctx, ids)
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker audit:", err)
		return 1
	}
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(rep)
	} else {
		printAudit(stdout, rep)
	}
	if rep.ExactlyOne != rep.Total {
		return 1
	}
	return 0
}

func printAudit(w io.Writer, rep stream.AuditReport) {
	fmt.Fprintf(w, "jobs:                     %d\n", rep.Total)
	fmt.Fprintf(w, "exactly one terminal:     %d\n", rep.ExactlyOne)
	fmt.Fprintf(w, "none yet:                 %d\n", rep.None)
	where := make([]string, 0, len(rep.NoneWhere))
	for k := range rep.NoneWhere {
		where = append(where, k)
	}
	sort.Strings(where)
	for _, k := range where {
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
		var j struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(line), &j) != nil || j.ID == "" {
			skipped++
			continue
		}
		ids = append(ids, j.ID)
	}
	return ids, skipped, sc.Err()
}
