package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
)

// Row is one contender's result. Rates and costs are over the backlog phase; latencies
// over the paced phase.
type Row struct {
	Name string `json:"name"`
	What string `json:"what"`
	// Floor marks the rows of the floors: the encryption alone, and the encryption with one
	// HTTP/2 request written per message; no process of their own, no Redis.
	Floor bool `json:"floor,omitempty"`
	// Depth, for a row of the paced gateway behind a backlog, is how many jobs were queued
	// behind the ones it was measured on.
	Depth int `json:"backlog_depth,omitempty"`
	// Skipped says why the contender did not run; every other field is then empty.
	Skipped string `json:"skipped,omitempty"`

	Messages   int            `json:"messages"`
	Delivered  int            `json:"delivered"` // accepted by pushsim
	Failures   map[string]int `json:"failures,omitempty"`
	MsgsPerSec float64        `json:"msgs_per_sec"`
	// CPUPerMsg is the process's CPU time (user + system) over the backlog phase, in
	// microseconds per delivered message.
	CPUPerMsg   float64 `json:"cpu_us_per_msg"`
	PeakRSS     int64   `json:"peak_rss_bytes,omitempty"`
	LatencyP50  float64 `json:"latency_p50_ms,omitempty"`
	LatencyP99  float64 `json:"latency_p99_ms,omitempty"`
	BytesPerMsg float64 `json:"bytes_per_msg"` // sent to the push service: TLS records, headers, body
	// PushsimCPUPerMsg and RedisCPUPerMsg are what the other two processes on the machine spent
	// per message over the same phase: the machine's two cores are shared by all three.
	PushsimCPUPerMsg float64 `json:"pushsim_cpu_us_per_msg,omitempty"`
	RedisCPUPerMsg   float64 `json:"redis_cpu_us_per_msg,omitempty"`
	// Signatures is the distinct VAPID JWTs pushsim received over the whole run.
	Signatures int64 `json:"vapid_signatures"`

	// Gateway only.
	SignaturesSelf int64 `json:"vapid_signatures_reported,omitempty"` // the worker's own count
	// RedisCommandsPerJob is what Redis ran for the backlog (INFO commandstats, commands inside
	// scripts included, the upstream's XADDs taken out) per backlog job, counted until every job
	// had its record.
	RedisCommandsPerJob float64 `json:"redis_commands_per_job,omitempty"`
	// RedisBytesKeptPerJob is how much more memory Redis held once the backlog was recorded
	// (INFO used_memory) per backlog job: the ledger records and the duplicate-suppression window.
	RedisBytesKeptPerJob  float64 `json:"redis_bytes_kept_per_job,omitempty"`
	RedisRoundTripsPerJob float64 `json:"redis_round_trips_per_job,omitempty"`
	Ledger                int64   `json:"ledger_records,omitempty"`
	Profile               string  `json:"cpu_profile,omitempty"`
}

// fill takes a phase's measurements.
func (r *Row) fill(env *runEnv, ph phase) {
	r.Messages = len(env.subs)
	r.fillRates(ph)
	if ph.answered > 0 {
		r.BytesPerMsg = float64(ph.bytesIn) / float64(ph.answered)
		r.PushsimCPUPerMsg = float64(ph.simCPU.Microseconds()) / float64(ph.answered)
	}
	if ph.redisCommands >= 0 && r.Messages > 0 {
		r.RedisCommandsPerJob = float64(ph.redisCommands) / float64(r.Messages)
		r.RedisBytesKeptPerJob = float64(ph.redisBytesKept) / float64(r.Messages)
	}
	r.LatencyP50, r.LatencyP99 = percentileMs(ph.latencies, 50), percentileMs(ph.latencies, 99)
	r.Signatures = int64(ph.tokens)
}

// fillRates takes what every measured row has of a phase: deliveries, failures, the rate, CPU
// per message (the contender's per accepted message, Redis's per answered one) and peak RSS.
func (r *Row) fillRates(ph phase) {
	r.Delivered = ph.accepted
	if len(ph.errors) > 0 {
		r.Failures = ph.errors
	}
	if span := ph.last.Sub(ph.first); ph.answered > 1 && span > 0 {
		r.MsgsPerSec = float64(ph.answered-1) / span.Seconds()
	}
	if ph.accepted > 0 {
		r.CPUPerMsg = float64(ph.cpu.Microseconds()) / float64(ph.accepted)
	}
	if ph.answered > 0 {
		r.RedisCPUPerMsg = float64(ph.redisCPU.Microseconds()) / float64(ph.answered)
	}
	r.PeakRSS = ph.peakRSS
}

func percentileMs(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(cli.Quantile(sorted, p).Microseconds()) / 1000
}

func (r Row) progressLine() string {
	switch {
	case r.Skipped != "":
		return fmt.Sprintf("%-14s skipped: %s", r.Name, r.Skipped)
	case r.Floor && r.Name == contenderSendFloor:
		return fmt.Sprintf("%-14s %d/%d sends answered 201, %.1f µs CPU each", r.Name, r.Delivered, r.Messages, r.CPUPerMsg)
	case r.Floor:
		return fmt.Sprintf("%-14s %d encryptions, %.1f µs CPU each", r.Name, r.Messages, r.CPUPerMsg)
	}
	line := fmt.Sprintf("%-14s %d/%d delivered, %.0f msgs/s, %.1f µs CPU/msg", r.Name, r.Delivered, r.Messages, r.MsgsPerSec, r.CPUPerMsg)
	if r.Depth > 0 {
		line += fmt.Sprintf(", %.2f Redis commands/job, peak RSS %.0f MB", r.RedisCommandsPerJob, float64(r.PeakRSS)/(1<<20))
	}
	return line
}

// Target is one of the goals the bench checks the gateway against.
type Target struct {
	What     string  `json:"what"`
	Measured float64 `json:"measured"` // the ratio (or count) measured
	Limit    float64 `json:"limit"`
	AtMost   bool    `json:"at_most"` // true: Measured <= Limit is met; false: Measured >= Limit
	Met      bool    `json:"met"`
	Missing  string  `json:"missing,omitempty"` // why it could not be measured
}

func (t Target) verdict() string {
	switch {
	case t.Missing != "":
		return "not measured: " + t.Missing
	case t.Met:
		return "met"
	case t.AtMost:
		return fmt.Sprintf("missed by %.0f%%", 100*(t.Measured/t.Limit-1))
	default:
		return fmt.Sprintf("missed by %.0f%%", 100*(1-t.Measured/t.Limit))
	}
}

type Report struct {
	Date      time.Time `json:"date"`
	Command   string    `json:"command"`
	Machine   string    `json:"machine"`
	Load      string    `json:"load"`
	Audiences int       `json:"audiences"`
	Rows      []Row     `json:"rows"`
	Targets   []Target  `json:"targets"`
	Notes     []string  `json:"notes"`
}

func newReport(env *runEnv, rows []Row) Report {
	o := env.o
	rep := Report{
		Date:      time.Now().UTC().Truncate(time.Second),
		Command:   "gateway-lab bench " + strings.Join(o.Args, " "),
		Machine:   fmt.Sprintf("%s, %d CPUs, %s/%s, %s", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		Load:      fmt.Sprintf("%d messages of %d bytes from a backlog, %d paced at %d/s; concurrency %d; mix %s", o.Messages, o.PayloadSize, o.LatencyMessages, o.LatencyRate, o.Concurrency, describeMix(env.subs)),
		Audiences: env.audience,
		Rows:      rows,
	}
	rep.Notes = []string{
		fmt.Sprintf("pushsim checks the VAPID signature and decrypts the body of 1 push in %d (--sample), so that its own CPU does not dominate the machine; every push gets the other checks (subscription, key, aud, exp, headers, size).", o.Sample),
		"msgs/s: backlog messages answered per second, from pushsim's first answer to its last. CPU µs/msg: the contender process's user+system CPU over the backlog phase (its startup and a warm-up message per push service excluded) per delivered message. Peak RSS: the process's high-water mark since it started (VmHWM), read just before it is stopped.",
		fmt.Sprintf("Latency: from just before the XADD to pushsim receiving the push, for %d messages enqueued one at a time at %d/s after the backlog.", o.LatencyMessages, o.LatencyRate),
		"bytes/msg: what the contender sent pushsim per message (TLS records and handshakes, HTTP headers, body).",
		"pushsim, redis µs/msg: the CPU the simulator (in the bench's own process) and redis-server spent per message over the same backlog phase. All three processes share the machine, so a contender's msgs/s is bounded by its own cost plus these two.",
		fmt.Sprintf("webpush-go runs with RecordSize %d: at its default (4096) it pads every body to 4182 bytes, which FCM, Autopush and Apple refuse with 413. Its subject is given without \"mailto:\", which it adds itself. Both Go contenders run with GOGC %d (the gateway worker's default).", webpushGoRecordSize, cli.DefaultGOGC),
		fmt.Sprintf("The gateway's %d in-flight slots are shared by the mix, at least one a provider; the plain consumers run %d sends at once.", o.Concurrency, o.Concurrency),
		"gateway-paced is the same worker at the shipped registry.yaml's rates and bursts (" + shippedRates() + "), the binding limit in production whenever there is a backlog; gateway runs with rates above what one machine sends, so that only its own cost limits it. All have the same in-flight slots. gateway-paced-no-linger is gateway-paced with --commit-linger 0 and --lane-gather 0: beside gateway-paced it shows what the two bounded waits save and what they cost in latency (p50, p99) and in the backlog's msgs/s.",
		"The rows \"gateway-paced, N queued\" are the paced worker measured over as many deliveries as the backlog above, once N more jobs were queued behind them and the intake had moved every job to its lane; the worker is then stopped and the jobs left are deleted. Their Redis commands and CPU are over those deliveries alone (nothing is enqueued meanwhile).",
		"rfc8291-floor is the encryption alone (key pair, ECDH, HKDF, AES-GCM) in the bench's process. send-floor adds the send: each message written as one HTTP/2 request over TLS to pushsim with x/net/http2's framer (HEADERS and DATA in one write, one message at a time, its answer read before the next); its CPU is the sending thread's alone, since pushsim runs in the same process, so the runtime's other threads (network poller, garbage collector) are not in it.",
		"Redis commands per job: INFO commandstats from the backlog's enqueue until every backlog job had its record (commands run inside scripts included), less the upstream's XADDs and the bench's own polls, per backlog job. Redis CPU µs/job: redis-server's user+system CPU over the same span. Redis bytes kept/job: INFO used_memory once the backlog was recorded less before it, per job: the ledger records and the duplicate-suppression window. Round trips per job: the worker's own count of commands and pipelines sent over its life, idle blocking reads included, per job.",
	}
	rep.Targets = rep.targets()
	return rep
}

func (rep Report) row(name string) (Row, bool) {
	for _, r := range rep.Rows {
		if r.Name == name && r.Skipped == "" {
			return r, true
		}
	}
	return Row{}, false
}

// targets are the goals of the gateway's cost: as cheap at the registry's rates as
// unthrottled, in CPU, Redis commands and Redis CPU per job, and one VAPID signature per
// (key, audience).
func (rep Report) targets() []Target {
	_, haveGW := rep.row(contenderGateway)
	_, havePaced := rep.row(contenderPaced)
	if !haveGW && !havePaced {
		return nil
	}
	// of is value of contender c, or why it cannot be had.
	of := func(c string, value func(Row) float64) (float64, string) {
		r, ok := rep.row(c)
		switch {
		case !ok:
			return 0, c + " did not run"
		case value(r) <= 0:
			return 0, c + " has no figure"
		}
		return value(r), ""
	}
	atMost := func(what string, limit float64, v float64, missing string) Target {
		t := Target{What: what, Measured: v, Limit: limit, AtMost: true, Missing: missing}
		t.Met = missing == "" && v <= limit
		return t
	}
	ratio := func(what, a, b string, limit float64, value func(Row) float64) Target {
		va, ma := of(a, value)
		vb, mb := of(b, value)
		if ma != "" || mb != "" {
			return atMost(what, limit, 0, strings.TrimPrefix(ma+"; "+mb, "; "))
		}
		return atMost(what, limit, va/vb, "")
	}
	cpu := func(r Row) float64 { return r.CPUPerMsg }
	cmds := func(r Row) float64 { return r.RedisCommandsPerJob }
	redisCPU := func(r Row) float64 { return r.RedisCPUPerMsg }
	ts := []Target{
		ratio("gateway-paced CPU per message / gateway's (unthrottled)", contenderPaced, contenderGateway, 1.15, cpu),
		ratio("gateway-paced CPU per message / webpush-go consumer's", contenderPaced, contenderWebpushGo, 0.5, cpu),
		ratio("gateway CPU per message / RFC 8291 encryption floor", contenderGateway, contenderFloor, 2.0, cpu),
	}
	if _, ok := rep.row(contenderCampaign); ok {
		ts = append(ts, ratio("gateway-campaign CPU per message / gateway's (a job each)", contenderCampaign, contenderGateway, 1.0, cpu))
	}
	for _, c := range []string{contenderGateway, contenderPaced} {
		v, m := of(c, cmds)
		ts = append(ts, atMost(c+" Redis commands per job", 6, v, m))
		v, m = of(c, redisCPU)
		ts = append(ts, atMost(c+" Redis CPU µs per job", 25, v, m))
	}
	for _, c := range []string{contenderGateway, contenderPaced} {
		if r, ok := rep.row(c); ok {
			ts = append(ts, atMost(fmt.Sprintf("%s VAPID signatures / (key, audience) pairs (%d)", c, rep.Audiences), 1,
				float64(r.Signatures)/float64(max(1, rep.Audiences)), ""))
		}
	}
	// The cost per job does not grow with the backlog: the deepest against the shallowest.
	if ds := rep.depthRows(); len(ds) >= 2 {
		lo, hi := ds[0], ds[len(ds)-1]
		for _, m := range []struct {
			what  string
			value func(Row) float64
		}{{"CPU per message", cpu}, {"Redis commands per job", cmds}, {"Redis CPU per job", redisCPU},
			{"peak RSS", func(r Row) float64 { return float64(r.PeakRSS) }}} {
			what := fmt.Sprintf("gateway-paced %s, %d queued / %d queued", m.what, hi.Depth, lo.Depth)
			if m.value(lo) <= 0 || m.value(hi) <= 0 {
				ts = append(ts, atMost(what, 1.15, 0, "no figure"))
				continue
			}
			ts = append(ts, atMost(what, 1.15, m.value(hi)/m.value(lo), ""))
		}
	}
	return ts
}

// base is the row the "vs gateway" columns compare with: the unthrottled gateway, else the
// paced one.
func (rep Report) base() (Row, bool) {
	if r, ok := rep.row(contenderGateway); ok {
		return r, true
	}
	return rep.row(contenderPaced)
}

// table is the side-by-side comparison, as rows of cells; the first row is the header.
func (rep Report) table() [][]string {
	gw, haveGW := rep.base()
	times := func(v, base float64) string {
		if !haveGW || base == 0 || v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", v/base)
	}
	cells := [][]string{{"contender", "msgs/s", "vs gateway", "CPU µs/msg", "vs gateway", "peak RSS", "p50", "p99", "bytes/msg", "VAPID sigs", "delivered", "pushsim, redis µs/msg"}}
	for _, r := range rep.Rows {
		if r.Depth > 0 {
			continue // in the gateway runs' table
		}
		if r.Skipped != "" {
			cells = append(cells, []string{r.Name, "skipped: " + r.Skipped, "", "", "", "", "", "", "", "", "", ""})
			continue
		}
		if r.Floor {
			cells = append(cells, []string{r.Name, fmt.Sprintf("%.0f (1 core)", r.MsgsPerSec), "-", fmt.Sprintf("%.1f", r.CPUPerMsg),
				times(r.CPUPerMsg, gw.CPUPerMsg), "-", "-", "-", fmt.Sprintf("%.0f (body)", r.BytesPerMsg), "-", "-", "-"})
			continue
		}
		cells = append(cells, []string{r.Name, fmt.Sprintf("%.0f", r.MsgsPerSec), times(r.MsgsPerSec, gw.MsgsPerSec),
			fmt.Sprintf("%.1f", r.CPUPerMsg), times(r.CPUPerMsg, gw.CPUPerMsg), fmt.Sprintf("%.0f MB", float64(r.PeakRSS)/(1<<20)),
			fmt.Sprintf("%.1f ms", r.LatencyP50), fmt.Sprintf("%.1f ms", r.LatencyP99), fmt.Sprintf("%.0f", r.BytesPerMsg),
			fmt.Sprint(r.Signatures), fmt.Sprintf("%d/%d", r.Delivered, r.Messages),
			fmt.Sprintf("%.0f, %.0f", r.PushsimCPUPerMsg, r.RedisCPUPerMsg)})
	}
	return cells
}

// gatewayTable is what each gateway run cost Redis, as rows of cells; the first row is the
// header.
func (rep Report) gatewayTable() [][]string {
	var cells [][]string
	header := func() {
		if cells == nil {
			cells = [][]string{{"gateway run", "CPU µs/msg", "Redis commands/job", "Redis round trips/job", "Redis CPU µs/job",
				"Redis bytes kept/job", "peak RSS", "p50", "p99", "VAPID sigs (worker's count)", "ledger records"}}
		}
	}
	for _, c := range []string{contenderGateway, contenderCampaign, contenderPaced, contenderNoLinger} {
		r, ok := rep.row(c)
		if !ok {
			continue
		}
		header()
		cells = append(cells, []string{r.Name, fmt.Sprintf("%.1f", r.CPUPerMsg), fmt.Sprintf("%.2f", r.RedisCommandsPerJob),
			fmt.Sprintf("%.2f", r.RedisRoundTripsPerJob), fmt.Sprintf("%.1f", r.RedisCPUPerMsg), fmt.Sprintf("%.0f", r.RedisBytesKeptPerJob),
			fmt.Sprintf("%.0f MB", float64(r.PeakRSS)/(1<<20)), fmt.Sprintf("%.1f ms", r.LatencyP50), fmt.Sprintf("%.1f ms", r.LatencyP99),
			fmt.Sprintf("%d (%d)", r.Signatures, r.SignaturesSelf), fmt.Sprint(r.Ledger)})
	}
	for _, r := range rep.depthRows() {
		header()
		cells = append(cells, []string{r.Name, fmt.Sprintf("%.1f", r.CPUPerMsg), fmt.Sprintf("%.2f", r.RedisCommandsPerJob), "-",
			fmt.Sprintf("%.1f", r.RedisCPUPerMsg), "-", fmt.Sprintf("%.0f MB", float64(r.PeakRSS)/(1<<20)), "-", "-", "-", "-"})
	}
	return cells
}

// depthRows are the rows of the paced gateway behind a backlog, shallowest first.
func (rep Report) depthRows() []Row {
	var out []Row
	for _, r := range rep.Rows {
		if r.Depth > 0 && r.Skipped == "" {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Depth < out[j].Depth })
	return out
}

func (rep Report) writeText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range rep.table() {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	if gt := rep.gatewayTable(); gt != nil {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, row := range gt {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()
	}
	if len(rep.Targets) > 0 {
		fmt.Fprintln(w, "\ntargets:")
		for _, t := range rep.Targets {
			fmt.Fprintf(w, "  %-62s %6.2f (%s %.2f)  %s\n", t.What, t.Measured, map[bool]string{true: "at most", false: "at least"}[t.AtMost], t.Limit, t.verdict())
		}
	}
	fmt.Fprintln(w)
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "* "+n)
	}
}

func (rep Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s.\n\n`%s`\n\nLoad: %s.\n\n", rep.Date.Format("2006-01-02"), rep.Machine, rep.Command, rep.Load)
	mdTable(&b, rep.table())
	if gt := rep.gatewayTable(); gt != nil {
		b.WriteString("\n")
		mdTable(&b, gt)
	}
	if len(rep.Targets) > 0 {
		b.WriteString("\n| target | measured | limit | verdict |\n| --- | --- | --- | --- |\n")
		for _, t := range rep.Targets {
			bound := "at most"
			if !t.AtMost {
				bound = "at least"
			}
			fmt.Fprintf(&b, "| %s | %.2f | %s %.2f | %s |\n", t.What, t.Measured, bound, t.Limit, t.verdict())
		}
	}
	b.WriteString("\n")
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "* %s\n", n)
	}
	return b.String()
}

// mdTable writes cells as a markdown table; the first row is the header.
func mdTable(b *strings.Builder, cells [][]string) {
	for i, row := range cells {
		fmt.Fprintf(b, "| %s |\n", strings.Join(row, " | "))
		if i == 0 {
			fmt.Fprintf(b, "|%s\n", strings.Repeat(" --- |", len(row)))
		}
	}
}

// save writes bench-report.json and bench-report.md into dir.
func (rep Report) save(dir string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	jf, mf := filepath.Join(dir, "bench-report.json"), filepath.Join(dir, "bench-report.md")
	if err := os.WriteFile(jf, append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(mf, []byte(rep.markdown()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nwrote %s and %s\n", jf, mf)
	for _, c := range []string{contenderGateway, contenderCampaign, contenderPaced, contenderNoLinger} {
		if gw, ok := rep.row(c); ok && gw.Profile != "" {
			fmt.Fprintf(out, "%s CPU profile: go tool pprof -top %s\n", c, gw.Profile)
		}
	}
	return nil
}
