package demo

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/lab/demoreport"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// liveTable prints the live per-provider table: in place on a terminal, every five seconds
// otherwise (a log, CI).
type liveTable struct {
	out     io.Writer
	live    bool
	lines   int // lines drawn last time, to move back over them
	printed int // without a terminal: the last five-second mark printed
}

// draw shows the table at elapsed; last is the final one, which is always printed.
func (t *liveTable) draw(rows []tableRow, elapsed time.Duration, faulted, last bool) {
	secs := int(elapsed.Round(time.Second) / time.Second)
	if !t.live && !last {
		// Every five seconds, by the mark passed rather than the exact second: a tick that
		// comes late on a busy machine must not skip a print.
		if secs/5 <= t.printed {
			return
		}
		t.printed = secs / 5
	}
	// On a terminal the table is redrawn over itself: up over the last one, each line cleared.
	var b strings.Builder
	erase := ""
	if t.live {
		erase = "\x1b[2K"
		if t.lines > 0 {
			fmt.Fprintf(&b, "\x1b[%dA", t.lines)
		}
	}
	state := ""
	if faulted {
		state = "  (fault injected)"
	}
	fmt.Fprintf(&b, "%st=%3ds%s\n", erase, secs, state)
	fmt.Fprintf(&b, "%s%-9s %8s %8s %8s %9s  %-9s  %s\n", erase, "PROVIDER", "SENT/S", "p50", "p99", "ACCEPTED", "BREAKER", "OTHER OUTCOMES (attempts)")
	for _, r := range rows {
		p50, p99 := "-", "-"
		if r.hasLatency {
			p50, p99 = fmtLatency(r.p50), fmtLatency(r.p99)
		}
		var other []string
		for _, c := range sortedCodes(r.other) {
			other = append(other, fmt.Sprintf("%s %d", c, r.other[c]))
		}
		line := fmt.Sprintf("%-9s %8.1f %8s %8s %9d  %-9s  %s", r.provider, r.perSec, p50, p99, r.accepted, r.breaker, strings.Join(other, ", "))
		fmt.Fprintf(&b, "%s%s\n", erase, strings.TrimRight(line, " "))
	}
	if !t.live {
		b.WriteString("\n")
	}
	fmt.Fprint(t.out, b.String())
	t.lines = len(rows) + 2
}

func fmtLatency(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return d.Round(time.Millisecond).String()
}

func sortedCodes(m map[taxonomy.Code]int) []taxonomy.Code {
	cs := make([]taxonomy.Code, 0, len(m))
	for c := range m {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i] < cs[j] })
	return cs
}

// writeReport writes the HTML report and the PNG beside it.
func writeReport(o Options, rep demoreport.Report, out io.Writer) error {
	html, err := demoreport.HTML(rep)
	if err != nil {
		return err
	}
	png, err := demoreport.PNG(rep)
	if err != nil {
		return err
	}
	pngPath := strings.TrimSuffix(o.Report, filepath.Ext(o.Report)) + ".png"
	if err := os.MkdirAll(filepath.Dir(o.Report), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(o.Report, html, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(pngPath, png, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "report:  %s (open it in a browser; no network needed) and %s\n", o.Report, pngPath)
	return nil
}
