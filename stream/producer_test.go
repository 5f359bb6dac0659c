package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
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
		es, _, err := s.ReadIntake(env.ctx, sh, 100, 0)
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
