package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/job"
)

func TestProducerShardsAndPipelines(t *testing.T) {
	env := newEnv(t)
	const shards = 4
	var jobs [][]byte
	want := map[int][]string{}
	for i := range 40 {
		id := fmt.Sprintf("job-%d", i)
		j := validJob(id)
		jobs = append(jobs, []byte(j))
		sh := ShardOf(id, shards)
		want[sh] = append(want[sh], j)
	}
	env.srv.ResetStats(t)
	hook := &countHook{}
	pc := env.srv.Client(t)
	pc.AddHook(hook)
	p := NewProducer(pc, "gw", shards)
	n, err := p.Enqueue(env.ctx, jobs...)
	if err != nil || n != 40 {
		t.Fatalf("Enqueue = %d, %v", n, err)
	}
	if hook.single != 0 || hook.pipelines != 1 || hook.pipelined != 40 {
		t.Errorf("Enqueue sent %d single commands and %d pipelines of %d commands; want one pipeline of 40",
			hook.single, hook.pipelines, hook.pipelined)
	}
	if len(want) < 2 {
		t.Fatal("test ids all fell in one shard; pick others")
	}
	got := map[int][]string{}
	for sh := range shards {
		for _, m := range env.entries(t, KeysFor("gw", sh).Intake) {
			f := fieldsOf(m)
			if len(f) != 1 {
				t.Errorf("entry fields %v, want only job", f)
			}
			got[sh] = append(got[sh], f["job"])
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("entries per shard (-want +got):\n%s", d)
	}
	stats := env.srv.CommandStats(t)
	if stats["xadd"] != 40 {
		t.Errorf("XADD calls = %d, want 40", stats["xadd"])
	}
	// A store with the same prefix and shard count reads them where the producer put them.
	s := env.store(t, "w1", Options{Prefix: "gw", Shards: shards})
	total := 0
	for sh := range shards {
		es, _, err := s.ReadIntake(env.ctx, sh, job.ClassTransactional, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if ShardOf(jobID(e.Fields["job"]), shards) != sh || e.Shard != sh {
				t.Errorf("job %s read on shard %d", jobID(e.Fields["job"]), sh)
			}
		}
		total += len(es)
	}
	if total != 40 {
		t.Errorf("read %d jobs, want 40", total)
	}
}

// countHook counts the XADDs a client sends alone and the pipelines that carry XADDs.
// Connection set-up (HELLO, CLIENT SETINFO) goes through hooks too and is not counted.
type countHook struct{ single, pipelines, pipelined int }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "xadd" {
			h.single++
		}
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if c.Name() == "xadd" {
				n++
			}
		}
		if n > 0 {
			h.pipelines++
			h.pipelined += n
		}
		return next(ctx, cmds)
	}
}

func TestProducerRefusesLineWithoutID(t *testing.T) {
	cases := []struct {
		name, bad, wantErr string
	}{
		{"no id", `{"subscription":{}}`, "stream: enqueue: job 1: no id"},
		{"empty id", `{"id":""}`, "stream: enqueue: job 1: no id"},
		{"null", `null`, "stream: enqueue: job 1: no id"},
		{"numeric id", `{"id":7}`, "stream: enqueue: job 1: not a JSON object with a string id"},
		{"not JSON", `id=7`, "stream: enqueue: job 1: not a JSON object with a string id"},
		{"array", `["id"]`, "stream: enqueue: job 1: not a JSON object with a string id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			p := NewProducer(env.c, "", 1)
			n, err := p.Enqueue(env.ctx, []byte(validJob("ok")), []byte(c.bad), []byte(validJob("ok2")))
			if err == nil || err.Error() != c.wantErr || n != 0 {
				t.Fatalf("Enqueue = %d, %v; want 0, %q", n, err, c.wantErr)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Error("error leaks the job")
			}
			if keys := env.c.Keys(env.ctx, "*").Val(); len(keys) != 0 {
				t.Errorf("something was written: %v", keys)
			}
		})
	}
}

// startReplicated starts a master and one replica of it, and waits until the replica's link
// is up.
func startReplicated(t *testing.T) (master, replica *redistest.Server) {
	t.Helper()
	master = redistest.Start(t)
	host, port, _ := strings.Cut(master.Addr(), ":")
	replica = redistest.Start(t, redistest.WithConfig("replicaof", host, port), redistest.WithConfig("enable-debug-command", "yes"))
	waitLinkUp(t, replica.Client(t))
	return master, replica
}

// waitLinkUp polls INFO replication of a replica until its link to the master is up.
func waitLinkUp(t *testing.T, r *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := r.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica link not up after 15s: %v\n%s", err, info)
		}
		time.Sleep(20 * time.Millisecond) // polling Redis for a state
	}
}

// waitBlocked waits until srv answers nothing: a PING on a new connection times out.
func waitBlocked(t *testing.T, srv *redistest.Server) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for c.Ping(context.Background()).Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the server still answers PING after 5s")
		}
	}
}

func TestProducerWaitsForTheReplica(t *testing.T) {
	master, replica := startReplicated(t)
	ctx := context.Background()
	const shards = 3
	var jobs [][]byte
	for i := range 30 {
		jobs = append(jobs, []byte(validJob(fmt.Sprintf("w-%d", i))))
	}
	master.ResetStats(t)
	p := NewProducer(master.Client(t), "", shards, WaitReplicas(1, 5*time.Second))
	if n, err := p.Enqueue(ctx, jobs...); err != nil || n != len(jobs) {
		t.Fatalf("Enqueue = %d, %v; want %d, nil", n, err, len(jobs))
	}
	stats := master.CommandStats(t)
	if stats["xadd"] != 30 || stats["wait"] != 1 {
		t.Errorf("master ran %d XADD and %d WAIT; want 30 and 1", stats["xadd"], stats["wait"])
	}
	// WAIT returned, so the replica holds every entry now, not eventually.
	rc := replica.Client(t)
	total := int64(0)
	for s := range shards {
		total += rc.XLen(ctx, KeysFor("", s).Intake).Val()
	}
	if total != 30 {
		t.Errorf("the replica holds %d intake entries once Enqueue returned; want 30", total)
	}

	t.Run("more replicas than there are", func(t *testing.T) {
		p := NewProducer(master.Client(t), "", shards, WaitReplicas(2, 200*time.Millisecond))
		n, err := p.Enqueue(ctx, []byte(validJob("x-1")), []byte(validJob("x-2")))
		if !errors.Is(err, ErrNotReplicated) || n != 0 {
			t.Fatalf("Enqueue = %d, %v; want 0, ErrNotReplicated", n, err)
		}
		if want := "stream: enqueue: job 0: stream: enqueue: not acknowledged by enough replicas: 1 of 2 replicas of the master acknowledged within 200ms"; err.Error() != want {
			t.Errorf("error %q\nwant  %q", err, want)
		}
	})

	t.Run("replica stalled", func(t *testing.T) {
		// The replica is connected but answers nothing for a while (DEBUG SLEEP), so it
		// acknowledges none of the new writes. A WAIT on the connection that wrote them must
		// time out; one on any other connection would count the replica at once, for the
		// writes it had already acknowledged.
		slept := make(chan error, 1)
		go func() { slept <- replica.Client(t).Do(ctx, "DEBUG", "SLEEP", "1").Err() }()
		waitBlocked(t, replica)
		p := NewProducer(master.Client(t), "", shards, WaitReplicas(1, 300*time.Millisecond))
		key := KeysFor("", ShardOf("stalled-1", shards)).Intake
		before := master.Client(t).XLen(ctx, key).Val()
		n, err := p.Enqueue(ctx, []byte(validJob("stalled-1")))
		if !errors.Is(err, ErrNotReplicated) || n != 0 {
			t.Fatalf("Enqueue = %d, %v; want 0, ErrNotReplicated", n, err)
		}
		// The job is on the master all the same: a failover now would lose it, which is what
		// the error tells the caller, who may send it again.
		if after := master.Client(t).XLen(ctx, key).Val(); after != before+1 {
			t.Errorf("intake length %d -> %d; the job should be written, only unconfirmed", before, after)
		}
		if err := <-slept; err != nil {
			t.Fatalf("DEBUG SLEEP: %v", err)
		}
	})
}

// TestProducerWaitsOnEveryMasterItWrote: on Redis Cluster, Enqueue sends each master's XADDs
// and a WAIT on one connection to that master, so each master that owns a shard of the batch
// runs exactly one WAIT, and every replica holds its master's entries when Enqueue returns.
func TestProducerWaitsOnEveryMasterItWrote(t *testing.T) {
	c := redistest.StartCluster(t)
	ctx := context.Background()
	const shards = 6
	st, err := Open(c.URL(), OpenOptions{Options: Options{Shards: shards}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	perMaster := map[string]int64{}
	var jobs [][]byte
	for i := range 60 {
		id := fmt.Sprintf("c-%d", i)
		jobs = append(jobs, []byte(validJob(id)))
		perMaster[c.MasterFor(KeysFor("", ShardOf(id, shards)).Intake)]++
	}
	if len(perMaster) != 3 {
		t.Fatalf("the jobs' shards land on %d masters (%v); the test needs all 3", len(perMaster), perMaster)
	}
	for _, a := range c.Addrs() {
		c.Node(a).ResetStats(t)
	}
	if n, err := st.Producer(WaitReplicas(1, 5*time.Second)).Enqueue(ctx, jobs...); err != nil || n != 60 {
		t.Fatalf("Enqueue = %d, %v", n, err)
	}
	for _, m := range c.Masters() {
		stats := c.Node(m).CommandStats(t)
		if stats["xadd"] != perMaster[m] || stats["wait"] != 1 {
			t.Errorf("master %s ran %d XADD and %d WAIT; want %d and 1", m, stats["xadd"], stats["wait"], perMaster[m])
		}
	}
	for _, a := range c.Addrs() {
		rc := c.Node(a).Client(t)
		role, err := rc.Do(ctx, "ROLE").Slice()
		if err != nil {
			t.Fatal(err)
		}
		if role[0] != "slave" {
			continue
		}
		of := fmt.Sprintf("%s:%d", role[1], role[2])
		got := int64(0)
		for s := range shards {
			k := KeysFor("", s).Intake
			if c.MasterFor(k) == of {
				// READONLY lets a replica answer for its master's slots.
				conn := rc.Conn()
				if err := conn.ReadOnly(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				got += conn.XLen(ctx, k).Val()
				conn.Close()
			}
		}
		if got != perMaster[of] {
			t.Errorf("replica %s of %s holds %d intake entries once Enqueue returned; want %d", a, of, got, perMaster[of])
		}
	}
}

func TestProducerWaitNeedsAKnownClient(t *testing.T) {
	env := newEnv(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": env.srv.Addr()}})
	defer ring.Close()
	n, err := NewProducer(ring, "", 1, WaitReplicas(1, time.Second)).Enqueue(env.ctx, []byte(validJob("r-1")))
	if err == nil || n != 0 || !strings.Contains(err.Error(), "WaitReplicas needs a *redis.Client or a *redis.ClusterClient, not *redis.Ring") {
		t.Fatalf("Enqueue = %d, %v", n, err)
	}
	if l := env.c.XLen(env.ctx, KeysFor("", 0).Intake).Val(); l != 0 {
		t.Errorf("%d entries written", l)
	}
}

// TestProducerWithoutWaitLosesAJobToAFailover shows what WaitReplicas is for. The replica is
// cut off (its link dropped while it cannot reconnect) and the master then dies: the job
// enqueued without the wait was reported written and is not on the replica promoted in the
// master's place; the one enqueued with it is not there either, but Enqueue said so.
func TestProducerWithoutWaitLosesAJobToAFailover(t *testing.T) {
	master, replica := startReplicated(t)
	ctx := context.Background()
	mc, rc := master.Client(t), replica.Client(t)
	waiting := NewProducer(mc, "", 1, WaitReplicas(1, 200*time.Millisecond))
	plain := NewProducer(mc, "", 1)
	// Before the cut the wait must succeed, however loaded the machine is.
	if _, err := NewProducer(mc, "", 1, WaitReplicas(1, 10*time.Second)).Enqueue(ctx, []byte(validJob("before"))); err != nil {
		t.Fatal(err)
	}
	slept := make(chan error, 1)
	go func() { slept <- replica.Client(t).Do(ctx, "DEBUG", "SLEEP", "2").Err() }()
	waitBlocked(t, replica)
	if err := mc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := plain.Enqueue(ctx, []byte(validJob("unwaited"))); err != nil || n != 1 {
		t.Fatalf("Enqueue without the wait = %d, %v; want 1, nil", n, err)
	}
	if n, err := waiting.Enqueue(ctx, []byte(validJob("waited"))); !errors.Is(err, ErrNotReplicated) || n != 0 {
		t.Fatalf("Enqueue with the wait = %d, %v; want 0, ErrNotReplicated", n, err)
	}
	master.Kill()
	if err := <-slept; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range rc.XRange(ctx, KeysFor("", 0).Intake, "-", "+").Val() {
		got = append(got, jobID(m.Values["job"].(string)))
	}
	if !slices.Equal(got, []string{"before"}) {
		t.Errorf("the promoted replica holds %v; want only the job enqueued with the wait before the cut", got)
	}
}

// BenchmarkProducer: batches of 100 jobs to one master with a replica (AOF fsynced on every
// write on both), without the wait and with WaitReplicas(1): what the wait costs a producer.
//
//	go test -run '^$' -bench BenchmarkProducer -benchtime 200x -count 3 ./stream/
func BenchmarkProducer(b *testing.B) {
	master := redistest.Start(b)
	host, port, _ := strings.Cut(master.Addr(), ":")
	replica := redistest.Start(b, redistest.WithConfig("replicaof", host, port))
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(replica.Client(b).Info(context.Background(), "replication").Val(), "master_link_status:up") {
		if time.Now().After(deadline) {
			b.Fatal("replica link not up after 15s")
		}
		time.Sleep(20 * time.Millisecond) // polling Redis for a state
	}
	batch := make([][]byte, 100)
	for i := range batch {
		batch[i] = []byte(validJob(fmt.Sprintf("bench-%d", i)))
	}
	for _, tc := range []struct {
		name string
		opts []ProducerOption
	}{{"nowait", nil}, {"wait1", []ProducerOption{WaitReplicas(1, time.Second)}}} {
		b.Run(tc.name, func(b *testing.B) {
			p := NewProducer(master.Client(b), "", 1, tc.opts...)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if _, err := p.Enqueue(ctx, batch...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
