package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// StopResult is the stop scenario: one of two workers is sent SIGTERM with a backlog in hand.
type StopResult struct {
	Messages int `json:"messages"` // the backlog: transactional and bulk jobs, one in two each
	// SignalAt is how many of the backlog's jobs had their record when worker A got SIGTERM.
	SignalAt int `json:"recorded_at_signal"`
	// PendingAtSignal is the entries pending under A's consumer name just before the signal
	// (intake and lanes), JobsAtSignal their distinct jobs.
	PendingAtSignal int `json:"pending_at_signal"`
	JobsAtSignal    int `json:"jobs_pending_at_signal"`
	// ExitSecs is the time from the signal until A exited; PendingAfterExit the entries still
	// pending under its name right then, by stream.
	ExitSecs         float64          `json:"exit_seconds"`
	PendingAfterExit map[string]int64 `json:"pending_after_exit"`
	// SettledSecs is the time from the signal until nothing was pending under A's name and
	// every job pending under it at the signal had its terminal record.
	SettledSecs float64 `json:"settled_seconds"`
	// Recorded is the backlog's jobs with a record once worker B had drained it; Duplicates
	// those with more than one.
	Recorded   int `json:"recorded"`
	Duplicates int `json:"duplicates"`
}

// The consumer names of the stop scenario's workers.
const (
	stopConsumerA = "priority-stop-a"
	stopConsumerB = "priority-stop-b"
)

// pendingScript takes, at one instant, every entry pending under a consumer in the given
// streams with its job, and the last entry id of the two record streams after them.
//
// KEYS: the streams, then results and dead. ARGV[1] group, ARGV[2] consumer.
// Returns {{stream, entry id, job}, ...}, {last results id, last dead id}, and the records in
// both.
var pendingScript = redis.NewScript(`
local out, n = {}, #KEYS - 2
for i = 1, n do
  for _, e in ipairs(redis.call('XPENDING', KEYS[i], ARGV[1], '-', '+', 1000000, ARGV[2])) do
    local job = ''
    local r = redis.call('XRANGE', KEYS[i], e[1], e[1])
    if #r > 0 then
      local f = r[1][2]
      for j = 1, #f, 2 do
        if f[j] == 'job' then job = f[j + 1] end
      end
    end
    table.insert(out, {KEYS[i], e[1], job})
  end
end
local last, records = {}, 0
for i = n + 1, #KEYS do
  local r = redis.call('XREVRANGE', KEYS[i], '+', '-', 'COUNT', 1)
  table.insert(last, #r > 0 and r[1][1] or '0-0')
  records = records + redis.call('XLEN', KEYS[i])
end
return {out, last, records}
`)

// stopRun runs the stop scenario: workers A and B at the shipped rates, a backlog of
// o.Messages jobs (transactional and bulk in turn), and SIGTERM to A once a quarter of them
// have their record and A holds some, with B running on.
func (env *runEnv) stopRun(ctx context.Context, o PriorityOptions) (*StopResult, error) {
	res := &StopResult{Messages: o.Messages}
	prefix := scenarioPrefix(ScenarioStop)
	defer env.deletePrefix(ctx, prefix)
	keys := stream.KeysFor(prefix, 0)
	env.sim.Reset()
	a, err := env.startPaced(prefix, stopConsumerA)
	if err != nil {
		return nil, err
	}
	defer a.stop(30 * time.Second)
	b, err := env.startPaced(prefix, stopConsumerB)
	if err != nil {
		return nil, err
	}
	defer b.stop(30 * time.Second)
	// Both alive (their heartbeats) before the backlog, so both read it.
	err = waitChild(ctx, b.exited, time.Minute, 50*time.Millisecond, func() (bool, string, error) {
		pipe := env.rdb.Pipeline()
		sa, sb := pipe.ZScore(ctx, stream.ReplicasKey(prefix), stopConsumerA), pipe.ZScore(ctx, stream.ReplicasKey(prefix), stopConsumerB)
		_, _ = pipe.Exec(ctx)
		return sa.Err() == nil && sb.Err() == nil, "workers A and B have no heartbeat yet", nil
	})
	if err != nil {
		return nil, failWith(err, b)
	}
	warm, err := env.warmUp(ctx, prefix, a.exited)
	if err != nil {
		return nil, failWith(err, a)
	}
	producer := stream.NewProducer(env.rdb, prefix, 1)
	for from := 0; from < o.Messages; from += 1000 {
		var jobs [][]byte
		for i := from; i < min(from+1000, o.Messages); i++ {
			class := ""
			if i%2 == 1 {
				class = "bulk"
			}
			jobs = append(jobs, env.classJob(fmt.Sprintf("s-%07d", i), env.subs[i%len(env.subs)], class))
		}
		if _, err := producer.Enqueue(ctx, jobs...); err != nil {
			return nil, err
		}
	}
	quarter := int64(warm + o.Messages/4)
	if err := env.waitRecords(ctx, keys, quarter, a.exited, 5*time.Minute); err != nil {
		return nil, failWith(err, a)
	}

	// What A holds, at one instant, then the signal.
	streams := keys.Intakes()
	for _, p := range benchProviders {
		streams = append(streams, keys.Lane(p), keys.BulkLane(p))
	}
	// A holds nothing at some instants (pushsim answers at once): the signal comes at the first
	// instant it holds something, within a few seconds.
	var (
		held    heldEntries
		last    [2]string
		records int64
	)
	for deadline := time.Now().Add(5 * time.Second); ; {
		v, err := pendingScript.Run(ctx, env.rdb, append(append([]string{}, streams...), keys.Results, keys.Dead), stream.Group, stopConsumerA).Slice()
		if err != nil {
			return nil, err
		}
		if held, last, records, err = parsePending(v); err != nil {
			return nil, err
		}
		if len(held.entries) > 0 || time.Now().After(deadline) {
			break
		}
		if err := pause(ctx, 2*time.Millisecond); err != nil {
			return nil, err
		}
	}
	res.SignalAt = int(records) - warm
	signalled := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil, err
	}
	res.PendingAtSignal, res.JobsAtSignal = len(held.entries), len(held.jobs)

	// Until A has exited, nothing is pending under its name and every job it held has its
	// record.
	left := len(held.jobs)
	scan := env.scanRecords(keys.Results, keys.Dead, func(r record) {
		if held.jobs[r.id] {
			held.jobs[r.id] = false
			left--
		}
	}).from(last[0], last[1])
	exited := false
	err = waitChild(ctx, b.exited, 2*time.Minute, 10*time.Millisecond, func() (bool, string, error) {
		if !exited {
			select {
			case <-a.exited:
				exited = true
				res.ExitSecs = time.Since(signalled).Seconds()
				var err error
				if res.PendingAfterExit, err = env.pendingOf(ctx, streams, stopConsumerA); err != nil {
					return false, "", err
				}
			default:
			}
		}
		if err := scan.poll(ctx); err != nil {
			return false, "", err
		}
		pending, err := env.pendingOf(ctx, streams, stopConsumerA)
		if err != nil {
			return false, "", err
		}
		n := int64(0)
		for _, c := range pending {
			n += c
		}
		if res.SettledSecs == 0 && n == 0 && left == 0 {
			res.SettledSecs = time.Since(signalled).Seconds()
		}
		return exited && res.SettledSecs > 0, fmt.Sprintf("A exited %v, %d entries pending under its name, %d of the %d jobs it held without a record", exited, n, left, len(held.jobs)), nil
	})
	if err != nil {
		return nil, failWith(err, a)
	}
	if a.waitErr != nil {
		return nil, failWith(fmt.Errorf("worker A: %w", a.waitErr), a)
	}

	// B drains the rest: every job recorded, and once.
	if err := env.waitRecords(ctx, keys, int64(warm+o.Messages), b.exited, time.Duration(o.Messages/50+60)*time.Second); err != nil {
		return nil, failWith(err, b)
	}
	counts := map[string]int{}
	if err := env.scanRecords(keys.Results, keys.Dead, func(r record) {
		if strings.HasPrefix(r.id, "s-") {
			counts[r.id]++
		}
	}).poll(ctx); err != nil {
		return nil, err
	}
	res.Recorded = len(counts)
	for _, n := range counts {
		if n > 1 {
			res.Duplicates++
		}
	}
	if err := b.stop(30 * time.Second); err != nil {
		return nil, err
	}
	fmt.Fprintf(env.out, "%s: SIGTERM to A with %d entries pending under it (%d jobs); A exited after %.2f s leaving %d pending; every job it held recorded and nothing pending under it %.2f s after the signal; %d of %d jobs recorded, %d twice\n",
		ScenarioStop, res.PendingAtSignal, res.JobsAtSignal, res.ExitSecs, sum(res.PendingAfterExit), res.SettledSecs, res.Recorded, res.Messages, res.Duplicates)
	return res, nil
}

// heldEntries are the entries pending under a consumer and their jobs (true: no record yet).
type heldEntries struct {
	entries []string
	jobs    map[string]bool
}

func parsePending(v []any) (h heldEntries, last [2]string, records int64, err error) {
	h = heldEntries{jobs: map[string]bool{}}
	if len(v) != 3 {
		return h, last, 0, fmt.Errorf("pending script: %d results", len(v))
	}
	list, _ := v[0].([]any)
	for _, e := range list {
		f, _ := e.([]any)
		if len(f) != 3 {
			return h, last, 0, fmt.Errorf("pending script: entry %v", e)
		}
		key, _ := f[0].(string)
		id, _ := f[1].(string)
		raw, _ := f[2].(string)
		h.entries = append(h.entries, key+" "+id)
		var j struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(raw), &j) == nil && j.ID != "" {
			h.jobs[j.ID] = true
		}
	}
	ids, _ := v[1].([]any)
	for i := range min(2, len(ids)) {
		last[i], _ = ids[i].(string)
	}
	records, _ = v[2].(int64)
	return h, last, records, nil
}

// pendingOf is how many entries of each stream are pending under consumer (only those with
// some).
func (env *runEnv) pendingOf(ctx context.Context, streams []string, consumer string) (map[string]int64, error) {
	pipe := env.rdb.Pipeline()
	cmds := make([]*redis.XPendingExtCmd, len(streams))
	for i, s := range streams {
		cmds[i] = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: s, Group: stream.Group, Start: "-", End: "+", Count: 100_000, Consumer: consumer})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for i, c := range cmds {
		if n := len(c.Val()); n > 0 {
			out[streams[i]] = int64(n)
		}
	}
	return out, nil
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
