package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// CampaignResult is the campaign scenario: a large campaign's recipients added, then sent,
// while transactional jobs keep arriving.
type CampaignResult struct {
	Recipients  int `json:"recipients"`
	PayloadSize int `json:"payload_bytes"`
	// AddSecs is how long AddRecipients took to write every batch; RoutedSecs how long from its
	// start until the worker had routed every recipient into the campaign's lists.
	AddSecs    float64 `json:"add_seconds"`
	RoutedSecs float64 `json:"routed_seconds"`
	// MemBefore and MemAfter are INFO memory's used_memory before the first batch and once every
	// recipient was routed; BytesPerRecipient their difference per recipient.
	MemBefore         int64   `json:"used_memory_before"`
	MemAfter          int64   `json:"used_memory_after"`
	BytesPerRecipient float64 `json:"bytes_per_recipient"`
	// SendSecs is how long the campaign sent: from its create entry's write to the end of the
	// run, or to its last record when every recipient had one sooner; Sent its recipients with
	// a record within that time, by code in Codes; SendPerSec Sent / SendSecs.
	SendSecs   float64        `json:"send_seconds"`
	Sent       int            `json:"recipients_recorded"`
	Codes      map[string]int `json:"codes"`
	SendPerSec float64        `json:"send_per_second"`
	Alone      Latency        `json:"transactional_alone"`   // before the first batch
	Adding     Latency        `json:"transactional_adding"`  // while the recipients were added
	Sending    Latency        `json:"transactional_sending"` // while the campaign sent
	Slowlog    Slowlog        `json:"slowlog"`
	// AddCPU and SendCPU are what the worker, Redis and this process used while the recipients
	// were added and routed, and while the campaign sent; LoadAvg the machine's load average over
	// the minute before the end.
	AddCPU  CPUShare `json:"cpu_adding"`
	SendCPU CPUShare `json:"cpu_sending"`
	LoadAvg float64  `json:"load_average_1m"`
}

// campaignID is the campaign scenario's campaign.
const campaignID = "prio-campaign"

// campaignRun runs the campaign scenario: the paced worker, transactional jobs alone for
// o.Baseline, then o.Recipients recipients added (before the campaign's create entry, so that
// they wait in its lists and Redis's memory for them is measured alone), then the create entry,
// and the campaign sends for o.Duration; the transactional jobs go on throughout. Redis's slow
// log records every call over 1 ms from the first batch to the end.
func (env *runEnv) campaignRun(ctx context.Context, o PriorityOptions) (*CampaignResult, error) {
	res := &CampaignResult{Recipients: o.Recipients, PayloadSize: o.PayloadSize, Codes: map[string]int{}}
	prefix := scenarioPrefix(ScenarioCampaign)
	defer env.deletePrefix(ctx, prefix)
	keys := stream.KeysFor(prefix, 0)
	env.sim.Reset()
	c, err := env.startPaced(prefix, "")
	if err != nil {
		return nil, err
	}
	defer c.stop(30 * time.Second)
	if _, err := env.warmUp(ctx, prefix, c.exited); err != nil {
		return nil, failWith(err, c)
	}
	// The producers stop with the scenario, whichever way it ends.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tx := env.startTransactional(pctx, keys.Intake, o.Rate)
	if err := pause(ctx, o.Baseline); err != nil {
		return nil, err
	}
	restore, err := env.slowlogStart(ctx)
	if err != nil {
		return nil, err
	}
	defer restore()
	if res.MemBefore, err = usedMemory(ctx, env.rdb); err != nil {
		return nil, err
	}
	addStart, err := env.redisMs(ctx)
	if err != nil {
		return nil, err
	}
	pid := c.cmd.Process.Pid
	cpu0, err := env.markCPU(ctx, pid)
	if err != nil {
		return nil, err
	}
	wall := time.Now()
	producer := stream.NewProducer(env.rdb, prefix, 1)
	if err := env.addRecipients(ctx, producer, o.Recipients); err != nil {
		return nil, err
	}
	res.AddSecs = time.Since(wall).Seconds()
	hash := stream.CampaignKeysFor(prefix, 0, campaignID).Hash
	limit := max(5*time.Minute, time.Duration(o.Recipients/2000)*time.Second)
	err = waitChild(ctx, c.exited, limit, 100*time.Millisecond, func() (bool, string, error) {
		added, err := env.rdb.HGet(ctx, hash, "added").Int()
		return added >= o.Recipients, fmt.Sprintf("%d of %d recipients routed", added, o.Recipients), err
	})
	if err != nil {
		return nil, failWith(err, c)
	}
	res.RoutedSecs = time.Since(wall).Seconds()
	if res.MemAfter, err = usedMemory(ctx, env.rdb); err != nil {
		return nil, err
	}
	res.BytesPerRecipient = float64(res.MemAfter-res.MemBefore) / float64(o.Recipients)

	cpu1, err := env.markCPU(ctx, pid)
	if err != nil {
		return nil, err
	}
	res.AddCPU = cpu0.since(cpu1)
	createAt, err := env.redisMs(ctx)
	if err != nil {
		return nil, err
	}
	msg, _ := json.Marshal(map[string]any{"id": campaignID, "payload": strings.Repeat("x", o.PayloadSize), "ttl": 3600, "urgency": "normal", "class": "bulk"})
	if _, err := producer.CreateCampaign(ctx, msg); err != nil {
		return nil, err
	}
	if err := pause(ctx, o.Duration); err != nil {
		return nil, err
	}
	end, err := env.redisMs(ctx)
	if err != nil {
		return nil, err
	}
	cpu2, err := env.markCPU(ctx, pid)
	if err != nil {
		return nil, err
	}
	res.SendCPU, res.LoadAvg = cpu1.since(cpu2), loadAverage()
	// The slow log first: what the lab reads next is not the run's.
	if res.Slowlog, err = env.slowlogRead(ctx); err != nil {
		return nil, err
	}
	sent, err := tx.finish()
	if err != nil {
		return nil, err
	}
	got := map[string]record{}
	var lastAt int64
	scan := env.scanRecords(keys.Results, keys.Dead, func(r record) {
		switch {
		case strings.HasPrefix(r.id, "t-"):
			got[r.id] = r
		case r.campaign == campaignID && r.at >= createAt && r.at <= end:
			res.Sent++
			res.Codes[r.code]++
			lastAt = max(lastAt, r.at)
		}
	})
	if err := txRecords(ctx, scan, sent, got, c.exited, 2*time.Minute); err != nil {
		return nil, failWith(err, c)
	}
	// A campaign that finished within the time sent for as long as its last record took.
	if res.Sent < o.Recipients {
		lastAt = end
	}
	res.SendSecs = float64(lastAt-createAt) / 1000
	if res.SendSecs > 0 {
		res.SendPerSec = float64(res.Sent) / res.SendSecs
	}
	res.Alone = latencyOf(sent, got, 0, addStart)
	res.Adding = latencyOf(sent, got, addStart, createAt)
	res.Sending = latencyOf(sent, got, createAt, end+1)
	if err := c.stop(30 * time.Second); err != nil {
		return nil, err
	}
	fmt.Fprintf(env.out, "%s: %d recipients added in %.1f s, routed in %.1f s, %.0f bytes each; sent %.0f/s over %.1f s; transactional alone %s, adding %s, sending %s; slowest Redis call %s\n",
		ScenarioCampaign, o.Recipients, res.AddSecs, res.RoutedSecs, res.BytesPerRecipient, res.SendPerSec, res.SendSecs,
		res.Alone, res.Adding, res.Sending, res.Slowlog.slowest())
	return res, nil
}

// addRecipients adds n recipients to campaignID, the pool's subscriptions in turn, with
// AddRecipients in slices of 20,000, so that neither this process nor one pipeline holds them
// all.
func (env *runEnv) addRecipients(ctx context.Context, producer *stream.Producer, n int) error {
	subs := make([][]byte, len(env.subs))
	for i, s := range env.subs {
		subs[i], _ = json.Marshal(s)
	}
	const slice = 20_000
	rs := make([][]byte, 0, slice)
	for from := 0; from < n; from += slice {
		rs = rs[:0]
		for i := from; i < min(from+slice, n); i++ {
			rs = append(rs, subs[i%len(subs)])
		}
		if done, err := producer.AddRecipients(ctx, campaignID, rs...); err != nil {
			return fmt.Errorf("add recipients %d..: %d written: %w", from, done, err)
		}
	}
	return nil
}

// Slowlog is what Redis's slow log held of a run: every call over 1 ms.
type Slowlog struct {
	Logged  int            `json:"logged"`           // calls over 1 ms
	Full    bool           `json:"full,omitempty"`   // the log reached its 10,000 entries: older ones are lost
	Over2ms int            `json:"over_2ms"`         // calls over 2 ms
	ByCall  map[string]int `json:"over_2ms_by_call"` // of them, by command (EVALSHA: by script)
	// Longest is the longest call of each command (EVALSHA: of each script), µs.
	Longest map[string]int64 `json:"longest_us_by_call"`
	Slowest []SlowCall       `json:"slowest"` // the longest five, longest first
}

// SlowCall is one entry of the slow log.
type SlowCall struct {
	Micros  int64    `json:"duration_us"`
	Command string   `json:"command"` // the command, and for EVALSHA the script's file name
	Args    []string `json:"args"`    // its first arguments, cut, as the log keeps them
	Client  string   `json:"client_name,omitempty"`
}

func (s Slowlog) slowest() string {
	if len(s.Slowest) == 0 {
		return "none over 1 ms"
	}
	return fmt.Sprintf("%d µs (%s), %d over 2 ms", s.Slowest[0].Micros, s.Slowest[0].Command, s.Over2ms)
}

// slowlogMax is how many entries the slow log keeps during the run.
const slowlogMax = 10_000

// slowlogStart makes Redis log every call over 1 ms, up to slowlogMax, from an empty log;
// restore puts the two settings back as they were.
func (env *runEnv) slowlogStart(ctx context.Context) (restore func(), err error) {
	old, err := env.rdb.ConfigGet(ctx, "slowlog-*").Result()
	if err != nil {
		return nil, err
	}
	for k, v := range map[string]string{"slowlog-log-slower-than": "1000", "slowlog-max-len": fmt.Sprint(slowlogMax)} {
		if err := env.rdb.ConfigSet(ctx, k, v).Err(); err != nil {
			return nil, err
		}
	}
	if err := env.rdb.SlowLogReset(ctx).Err(); err != nil {
		return nil, err
	}
	return func() {
		for _, k := range []string{"slowlog-log-slower-than", "slowlog-max-len"} {
			if v, ok := old[k]; ok {
				env.rdb.ConfigSet(context.WithoutCancel(ctx), k, v)
			}
		}
	}, nil
}

// slowlogRead reads the slow log and sums it up.
func (env *runEnv) slowlogRead(ctx context.Context) (Slowlog, error) {
	entries, err := env.rdb.SlowLogGet(ctx, slowlogMax).Result()
	if err != nil {
		return Slowlog{}, err
	}
	s := Slowlog{Logged: len(entries), Full: len(entries) >= slowlogMax, ByCall: map[string]int{}, Longest: map[string]int64{}}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Duration > entries[j].Duration })
	for i, e := range entries {
		call := SlowCall{Micros: e.Duration.Microseconds(), Command: slowCommand(e.Args), Client: e.ClientName}
		s.Longest[call.Command] = max(s.Longest[call.Command], call.Micros)
		if e.Duration > 2*time.Millisecond {
			s.Over2ms++
			s.ByCall[call.Command]++
		}
		if i < 5 {
			from := 1
			if strings.HasPrefix(call.Command, "EVALSHA ") {
				from = 2 // the hash is in the command's name
			}
			for _, a := range e.Args[min(from, len(e.Args)):min(len(e.Args), from+5)] {
				if len(a) > 64 {
					a = a[:64] + "..."
				}
				call.Args = append(call.Args, a)
			}
			s.Slowest = append(s.Slowest, call)
		}
	}
	return s, nil
}

// slowCommand names a logged call: its command, and for EVALSHA the script by its hash.
func slowCommand(args []string) string {
	if len(args) == 0 {
		return "?"
	}
	cmd := strings.ToUpper(args[0])
	if cmd == "EVALSHA" && len(args) > 1 {
		if name, ok := stream.ScriptName(args[1]); ok {
			return cmd + " " + name
		}
		return cmd + " " + args[1][:min(len(args[1]), 12)]
	}
	return cmd
}
