package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// PriorityReport is what `gateway-lab priority` measured, as priority-report.json; its
// tables are priority-report.md. A scenario that did not run is absent.
type PriorityReport struct {
	Date     time.Time       `json:"date"`
	Command  string          `json:"command"`
	Machine  string          `json:"machine"`
	Load     string          `json:"load"`
	Backlog  *BacklogResult  `json:"bulk_backlog,omitempty"`
	Campaign *CampaignResult `json:"campaign,omitempty"`
	Stop     *StopResult     `json:"stop,omitempty"`
	Notes    []string        `json:"notes"`
}

// table is one scenario's figures: a title and rows of cells, the first the header.
type table struct {
	title string
	cells [][]string
}

func latencyCells(phase string, l Latency) []string {
	if l.Recorded == 0 {
		return []string{phase, fmt.Sprint(l.Jobs), "-", "-", "-"}
	}
	return []string{phase, fmt.Sprint(l.Jobs), fmt.Sprintf("%.0f ms", l.P50), fmt.Sprintf("%.0f ms", l.P99), fmt.Sprintf("%.0f ms", l.Max)}
}

var latencyHeader = []string{"transactional jobs", "jobs", "p50", "p99", "max"}

func (rep PriorityReport) tables() []table {
	var ts []table
	if r := rep.Backlog; r != nil {
		ts = append(ts, table{fmt.Sprintf("bulk-backlog: %d bulk jobs enqueued one XADD each by %d producers in %.1f s; the run ended after %.1f s (%s)",
			r.Bulk, r.Producers, r.EnqueueSecs, r.RunSecs, r.Ended), [][]string{
			latencyHeader,
			latencyCells("alone", r.Alone),
			latencyCells("behind the bulk backlog", r.Behind),
			latencyCells("- while bulk jobs were enqueued", r.Enqueuing),
			latencyCells("- after the last was enqueued", r.Enqueued),
		}}, table{"", [][]string{
			{"bulk jobs recorded in the run", "bulk jobs/s", "share of the backlog", "pushsim's answers", "CPU, cores", "load"},
			{fmt.Sprint(r.BulkRecorded), fmt.Sprintf("%.0f", r.BulkPerSec), fmt.Sprintf("%.0f%%", 100*r.BulkShare), r.ProviderCodes, r.CPU.cells(), fmt.Sprintf("%.1f", r.LoadAvg)},
		}})
	}
	if r := rep.Campaign; r != nil {
		ts = append(ts, table{fmt.Sprintf("campaign: %d recipients, a %d-byte message", r.Recipients, r.PayloadSize), [][]string{
			latencyHeader,
			latencyCells("alone", r.Alone),
			latencyCells("while the recipients were added", r.Adding),
			latencyCells("while the campaign sent", r.Sending),
		}}, table{"", [][]string{
			{"added in", "routed in", "used_memory before, after", "bytes a recipient", "CPU adding, cores"},
			{fmt.Sprintf("%.1f s", r.AddSecs), fmt.Sprintf("%.1f s", r.RoutedSecs), fmt.Sprintf("%d, %d", r.MemBefore, r.MemAfter),
				fmt.Sprintf("%.0f", r.BytesPerRecipient), r.AddCPU.cells()},
		}}, table{"", [][]string{
			{"sent", "recipients/s", "codes", "CPU sending, cores", "load"},
			{fmt.Sprintf("%d in %.1f s", r.Sent, r.SendSecs), fmt.Sprintf("%.0f", r.SendPerSec), codes(r.Codes), r.SendCPU.cells(), fmt.Sprintf("%.1f", r.LoadAvg)},
		}})
		sl := [][]string{{"slowest Redis calls", "µs", "first arguments", "client"}}
		for _, c := range r.Slowlog.Slowest {
			sl = append(sl, []string{c.Command, fmt.Sprint(c.Micros), strings.Join(c.Args, " "), c.Client})
		}
		full := ""
		if r.Slowlog.Full {
			full = " (the log was full: the earliest calls are not in it)"
		}
		ts = append(ts, table{fmt.Sprintf("Redis's slow log from the first batch to the end: %d calls over 1 ms, %d over 2 ms (%s)%s",
			r.Slowlog.Logged, r.Slowlog.Over2ms, codes(r.Slowlog.ByCall), full), sl})
		longest := [][]string{{"script", "longest call, µs"}}
		for _, name := range slices.SortedFunc(maps.Keys(r.Slowlog.Longest), func(a, b string) int {
			return cmp.Compare(r.Slowlog.Longest[b], r.Slowlog.Longest[a])
		}) {
			if script, ok := strings.CutPrefix(name, "EVALSHA "); ok {
				longest = append(longest, []string{script, fmt.Sprint(r.Slowlog.Longest[name])})
			}
		}
		ts = append(ts, table{"the longest call of each of the worker's scripts in the slow log", longest})
	}
	if r := rep.Stop; r != nil {
		ts = append(ts, table{fmt.Sprintf("stop: two workers, %d jobs; SIGTERM to A once %d had their record", r.Messages, r.SignalAt), [][]string{
			{"pending under A at SIGTERM", "A exited after", "pending under A then", "settled after", "recorded", "twice"},
			{fmt.Sprintf("%d entries, %d jobs", r.PendingAtSignal, r.JobsAtSignal), fmt.Sprintf("%.2f s", r.ExitSecs), fmt.Sprint(sum(r.PendingAfterExit)),
				fmt.Sprintf("%.2f s", r.SettledSecs), fmt.Sprintf("%d of %d", r.Recorded, r.Messages), fmt.Sprint(r.Duplicates)},
		}})
	}
	return ts
}

func (c CPUShare) cells() string {
	return fmt.Sprintf("worker %.2f, redis %.2f, lab %.2f", c.Worker, c.Redis, c.Lab)
}

// codes is a count by name as "A 3, B 1", by name.
func codes(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func (rep PriorityReport) writeText(w io.Writer) {
	for _, t := range rep.tables() {
		if t.title != "" {
			fmt.Fprintln(w, t.title)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, row := range t.cells {
			fmt.Fprintln(tw, "  "+strings.Join(row, "\t"))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "* "+n)
	}
}

func (rep PriorityReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s.\n\n`%s`\n\nLoad: %s.\n\n", rep.Date.Format("2006-01-02"), rep.Machine, rep.Command, rep.Load)
	for _, t := range rep.tables() {
		if t.title != "" {
			fmt.Fprintf(&b, "%s.\n\n", t.title)
		}
		mdTable(&b, t.cells)
		b.WriteString("\n")
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "* %s\n", n)
	}
	return b.String()
}

// save writes priority-report.json and priority-report.md into dir.
func (rep PriorityReport) save(dir string, out io.Writer) error {
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	jf, mf := filepath.Join(dir, "priority-report.json"), filepath.Join(dir, "priority-report.md")
	if err := os.WriteFile(jf, append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(mf, []byte(rep.markdown()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s and %s\n", jf, mf)
	return nil
}

// priorityNotes say how each figure was measured: the common ones, and those of the scenarios
// that ran.
func priorityNotes(o PriorityOptions) []string {
	notes := []string{
		"Every scenario runs the real gateway-worker binary (one, or two for stop) at the shipped registry.yaml's rates and bursts, on a key prefix of its own that is deleted after it, against one Redis and pushsim, which answers every push at once.",
		fmt.Sprintf("A transactional job's wait is from its XADD to the transactional intake to its ledger record, both by Redis's clock: the milliseconds of the intake entry's id and of the ledger record's id. The jobs are written one at a time at %d/s, each its own XADD, with no class (as today's upstreams write them). alone: before any bulk work starts (%s).", o.Rate, o.Baseline),
		fmt.Sprintf("The jobs and recipients go round a pool of %d pushsim subscriptions in the mix: the worker keeps nothing per endpoint on the way of an accepted job and no job names a recipient, so the pool stands for as many distinct subscriptions.", o.benchOptions().Messages),
		"CPU, cores: CPU seconds per second of wall time over the phase, of the worker process, of redis-server (INFO cpu) and of the lab's own process (pushsim, the producers, the lab's reads); the machine's cores are shared by the three, and by whatever else runs on it (load: the one-minute load average at the phase's end).",
	}
	for _, sc := range o.scenarios() {
		notes = append(notes, scenarioNotes[sc])
	}
	return notes
}

var scenarioNotes = map[string]string{
	ScenarioBacklog:  "bulk-backlog: the bulk jobs carry \"class\": \"bulk\" and go to the bulk intake through stream.Producer.Enqueue, one call (one XADD) each, from several goroutines at once, while the transactional jobs go on; the run ends once half the bulk jobs have their record, or at --duration after the first. Behind the bulk backlog: the transactional jobs written from the first bulk XADD to the run's end, and the same split at the last bulk XADD (while the upstream still writes, and after). Bulk jobs/s: bulk records written within the run, per second of it.",
	ScenarioCampaign: "campaign: the recipients are added (stream.Producer.AddRecipients, 1,000 a batch) before the campaign's create entry, so that they wait in its lists while Redis's memory for them is measured (INFO memory's used_memory before the first batch and once every recipient is routed, client buffers included); then the create entry, and the campaign sends for --duration. Recipients/s: the campaign's records written within that time, per second. The slow log (slowlog-log-slower-than 1000 µs, slowlog-max-len 10000, reset before the first batch, read at the end of the sending; both settings put back after) holds the worker's scripts, named by their hash, and the upstream's own XADDs (client gateway-bench).",
	ScenarioStop:     "stop: workers A and B, the backlog's jobs transactional and bulk in turn; A gets SIGTERM once a quarter of them have their record, at the first instant after it when A has entries pending (pushsim answers at once, so at some instants it has none); just before, one script lists every entry pending under A's consumer name (both intakes, every lane) with its job. A exited after: the signal to its exit. Pending under A then: entries still pending under its name right after it exited. Settled after: the signal until nothing was pending under A's name and every job pending under it at the signal had its terminal record (ledger or dead). Then B drains the rest, and every job of the backlog must have one record.",
}
