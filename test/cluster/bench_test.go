package cluster_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// The benchmarks behind docs/scaling.md: what a job costs the workers and Redis, on each
// topology, and what it holds in Redis's memory while it waits and after it is sent.
//
//	go test -run '^$' -bench 'BenchmarkCost' -benchtime 1x -count 3 -v ./test/cluster/
//	go test -run '^$' -bench 'BenchmarkMemory' -benchtime 1x ./test/cluster/

// benchRegistry leaves rates and slots out of the way: the figures are per job, and what
// limits throughput here is the machine, which the workers, pushsim and Redis share.
const benchRegistry = `version: 1
defaults:
  max_in_flight: 32
  rate: 100000
  burst: 10000
  timeout: 10s
` + everyProvider

// dispatchDefaultBlock is run's default --block, which the benchmarks keep: the tests' shorter
// one makes idle readers ask Redis five times as often.
const dispatchDefaultBlock = "1s"

// benchPayload is a 256-byte message, as in `gateway-lab bench`.
var benchPayload = strings.Repeat("x", 256)

// costJobs are the jobs of one benchmark round.
const costJobs = 20000

// BenchmarkCost: three workers on one Redis (1 shard) and on a Redis Cluster of 3 masters with
// a replica each (6 shards), each with AOF fsynced on every write (appendfsync always, the
// guarantee docs/operations.md describes) and once a second (everysec).
func BenchmarkCost(b *testing.B) {
	for _, fsync := range []string{"always", "everysec"} {
		b.Run("single-"+fsync, func(b *testing.B) {
			srv := redistest.Start(b, redistest.WithConfig("appendfsync", fsync))
			benchCost(b, srv.URL(), 1, []*redistest.Server{srv}, nil)
		})
		b.Run("cluster-"+fsync, func(b *testing.B) {
			c := redistest.StartCluster(b, redistest.ClusterConfig("appendfsync", fsync))
			var masters, replicas []*redistest.Server
			for _, a := range c.Addrs() {
				if slices.Contains(c.Masters(), a) {
					masters = append(masters, c.Node(a))
				} else {
					replicas = append(replicas, c.Node(a))
				}
			}
			benchCost(b, c.URL(), clusterShards, masters, replicas)
		})
	}
}

// benchCost runs rounds of costJobs jobs in the market mix through three worker processes,
// each round enqueued at once and timed to its last ledger record, and reports per job: the
// workers' CPU (/proc), the masters' and replicas' CPU (INFO cpu), the commands the masters ran
// (INFO commandstats, commands inside scripts included, the enqueue's XADD included, the
// benchmark's own INFO and XLEN left out), and the bytes the masters exchanged with clients and
// sent their replicas (INFO stats).
func benchCost(b *testing.B, url string, shards int, masters, replicas []*redistest.Server) {
	f := newFleet(b, fleetOptions{url: url, shards: shards, registry: benchRegistry, sample: 50,
		args: []string{"--block", dispatchDefaultBlock}})
	ws := f.startFleet(3)
	// The market mix of `gateway-lab bench`: FCM 72, Autopush 19, Apple 6, WNS 3, self-hosted 1.
	var subs []job.Subscription
	for p, n := range map[string]int{pushsim.FCM: 72, pushsim.Autopush: 19, pushsim.Apple: 6, pushsim.WNS: 3, pushsim.Generic: 1} {
		subs = append(subs, f.subscriptions(p, n)...)
	}
	ctx := context.Background()
	p := f.store.Producer()
	// One job to every push service first, so connections and VAPID tokens are made.
	var warm [][]byte
	var warmIDs []string
	for i, s := range subs {
		warmIDs = append(warmIDs, fmt.Sprintf("warm-%03d", i))
		warm = append(warm, jobLine(b, warmIDs[i], s, map[string]any{"payload": benchPayload}))
	}
	if _, err := p.Enqueue(ctx, warm...); err != nil {
		b.Fatal(err)
	}
	f.waitSettled(warmIDs, time.Minute)
	done := int64(len(warm))

	var workerCPU, masterCPU, replicaCPU time.Duration
	var cmds, netBytes, replBytes, jobs int64
	byName := map[string]int64{}
	var elapsed time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		lines := make([][]byte, costJobs)
		for j := range lines {
			lines[j] = jobLine(b, fmt.Sprintf("r%d-%05d", i, j), subs[j%len(subs)], map[string]any{"payload": benchPayload})
		}
		before := snapshot(b, ws, masters, replicas)
		b.StartTimer()
		t0 := time.Now()
		for k := 0; k < len(lines); k += 500 {
			if _, err := p.Enqueue(ctx, lines[k:min(k+500, len(lines))]...); err != nil {
				b.Fatal(err)
			}
		}
		done += costJobs
		f.waitLedger(shards, done)
		elapsed += time.Since(t0)
		b.StopTimer()
		after := snapshot(b, ws, masters, replicas)
		workerCPU += after.workers - before.workers
		masterCPU += after.masters.cpu - before.masters.cpu
		replicaCPU += after.replicas.cpu - before.replicas.cpu
		cmds += after.masters.commands - before.masters.commands
		for name, n := range after.masters.byName {
			byName[name] += n - before.masters.byName[name]
		}
		netBytes += after.masters.net - before.masters.net
		replBytes += after.masters.repl - before.masters.repl
		jobs += costJobs
		b.StartTimer()
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(jobs) }
	b.ReportMetric(float64(jobs)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(per(workerCPU), "worker-cpu-µs/job")
	b.ReportMetric(per(masterCPU), "master-cpu-µs/job")
	b.ReportMetric(per(replicaCPU), "replica-cpu-µs/job")
	b.ReportMetric(float64(cmds)/float64(jobs), "redis-cmds/job")
	b.ReportMetric(float64(netBytes)/float64(jobs), "client-bytes/job")
	b.ReportMetric(float64(replBytes)/float64(jobs), "repl-bytes/job")
	names := slices.Collect(maps.Keys(byName))
	slices.SortFunc(names, func(x, y string) int { return cmp.Compare(byName[y], byName[x]) })
	var line []string
	for _, name := range names {
		if per := float64(byName[name]) / float64(jobs); per >= 0.01 {
			line = append(line, fmt.Sprintf("%s %.2f", name, per))
		}
	}
	b.Logf("commands per job on the masters: %s", strings.Join(line, ", "))
	f.checkLogs()
}

// waitLedger polls the ledgers of every shard until they hold want records in all.
func (f *fleet) waitLedger(shards int, want int64) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var n int64
		for s := range shards {
			n += f.rdb.XLen(context.Background(), f.store.Keys(s).Results).Val()
		}
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the ledgers hold %d records after 5 minutes, want %d", n, want)
		}
		time.Sleep(20 * time.Millisecond) // polling Redis for a state
	}
}

// redisUse is what a set of Redis servers has done so far.
type redisUse struct {
	cpu        time.Duration // INFO cpu: used_cpu_sys + used_cpu_user
	commands   int64         // INFO commandstats, the benchmark's own INFO and XLEN left out
	net, repl  int64         // INFO stats: client bytes in and out; bytes sent to replicas
	usedMemory int64         // INFO memory: used_memory
	byName     map[string]int64
}

type usage struct {
	workers           time.Duration
	masters, replicas redisUse
}

func snapshot(tb testing.TB, ws []*worker, masters, replicas []*redistest.Server) usage {
	tb.Helper()
	var u usage
	for _, w := range ws {
		u.workers += procCPU(tb, w.Pid())
	}
	u.masters = redisUsage(tb, masters)
	u.replicas = redisUsage(tb, replicas)
	return u
}

func redisUsage(tb testing.TB, servers []*redistest.Server) redisUse {
	tb.Helper()
	u := redisUse{byName: map[string]int64{}}
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		info, err := c.Info(context.Background(), "cpu", "stats", "memory").Result()
		c.Close()
		if err != nil {
			tb.Fatalf("INFO on %s: %v", s.Addr(), err)
		}
		u.cpu += time.Duration((infoFloat(info, "used_cpu_sys") + infoFloat(info, "used_cpu_user")) * float64(time.Second))
		// total_net_output_bytes counts what went to replicas too.
		repl := int64(infoFloat(info, "total_net_repl_output_bytes"))
		u.repl += repl
		u.net += int64(infoFloat(info, "total_net_input_bytes")+infoFloat(info, "total_net_output_bytes")) - repl
		u.usedMemory += int64(infoFloat(info, "used_memory"))
		for name, n := range s.CommandStats(tb) {
			if name != "info" && name != "xlen" {
				u.commands += n
				u.byName[name] += n
			}
		}
	}
	return u
}

// infoFloat is field of an INFO reply as a number, 0 when absent.
func infoFloat(info, field string) float64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// procCPU is the user and system CPU time of process pid so far (/proc/pid/stat, in the
// clock ticks of USER_HZ, 100 a second on Linux).
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces: utime and
	// stime are the 12th and 13th.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// memoryJobs are the jobs BenchmarkMemory holds in Redis at once.
const memoryJobs = 20000

// BenchmarkMemory measures what a job holds in one Redis's memory (INFO used_memory deltas
// over memoryJobs jobs of the market mix's shape, FCM subscriptions, 256-byte payloads): in the
// intake before any worker reads it; in its lane with its jobs index field (FCM paused, so
// the lane reads nothing); and once sent, its ledger record and its sent mark.
func BenchmarkMemory(b *testing.B) {
	for range b.N {
		srv := redistest.Start(b)
		f := newFleet(b, fleetOptions{url: srv.URL(), shards: 1, registry: benchRegistry, sample: 50})
		ctx := context.Background()
		c := f.rdb
		subs := f.subscriptions(pushsim.FCM, 100)
		lines := make([][]byte, memoryJobs)
		for i := range lines {
			lines[i] = jobLine(b, fmt.Sprintf("mem-%06d", i), subs[i%len(subs)], map[string]any{"payload": benchPayload})
		}
		used := func() int64 { return redisUsage(b, []*redistest.Server{srv}).usedMemory }
		// The shard count recorded as the first worker records it, so m0 counts its key.
		if err := c.SetNX(ctx, stream.ShardsKey(f.o.prefix), f.o.shards, 0).Err(); err != nil {
			b.Fatal(err)
		}
		m0 := used()
		for k := 0; k < len(lines); k += 1000 {
			if _, err := f.store.Producer().Enqueue(ctx, lines[k:k+1000]...); err != nil {
				b.Fatal(err)
			}
		}
		m1 := used()
		if err := f.insp.PauseProvider(ctx, inspect.Pause{Provider: "fcm", At: time.Now()}); err != nil {
			b.Fatal(err)
		}
		w := f.startWorker()
		k := f.store.Keys(0)
		f.waitFor("every job in its lane", func() bool {
			return c.XLen(ctx, k.Intake).Val() == 0 && c.XLen(ctx, k.Lane("fcm")).Val() == memoryJobs
		})
		m2 := used()
		if _, err := f.insp.ResumeProvider(ctx, "fcm"); err != nil {
			b.Fatal(err)
		}
		f.waitLedger(1, memoryJobs)
		f.stop(w)
		m3 := used()
		if err := c.Del(ctx, k.Results).Err(); err != nil {
			b.Fatal(err)
		}
		m4 := used()
		// The duplicate-suppression window: its state and its buckets (Keys.Window).
		var windowKeys int64
		iter := c.Scan(ctx, 0, k.Window+"*", 1000).Iterator()
		for iter.Next(ctx) {
			windowKeys += c.Del(ctx, iter.Val()).Val()
		}
		if iter.Err() != nil || windowKeys == 0 {
			b.Fatalf("deleted %d keys of the window (%v), want its state and buckets", windowKeys, iter.Err())
		}
		m5 := used()
		n := float64(memoryJobs)
		b.ReportMetric(float64(len(lines[0])), "job-bytes")
		b.ReportMetric(float64(m1-m0)/n, "intake-bytes/job")
		b.ReportMetric(float64(m2-m0)/n, "lane-bytes/job")
		b.ReportMetric(float64(m3-m4)/n, "ledger-bytes/job")
		b.ReportMetric(float64(m4-m5)/n, "window-bytes/job")
	}
}

// waitFor polls cond until it holds, or fails the benchmark after a minute naming what.
func (f *fleet) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(20 * time.Millisecond) // polling Redis for a state
	}
}
