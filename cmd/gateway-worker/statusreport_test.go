package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// TestWriteStatus: every table of status as an operator reads it: a stream no worker has read
// (LAG ?), an age from a clock ahead of this one (0s), a stream name that is not printable
// (quoted), the retries and scheduled jobs, a shard left by a shrink, the breakers not closed
// first, the proxies by replica, the pauses, the parked keys, memory in binary units with and
// without a limit, an estimated upstream lag, and a warning for each setting a node lacks.
func TestWriteStatus(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	n := func(v int64) *int64 { return &v }
	sec := func(v float64) *float64 { return &v }
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	rep := inspect.StatusReport{Prefix: "wp", Shards: 2, At: now, StaleAfterSeconds: 15,
		Queues: []inspect.QueueStatus{
			{Shard: 0, Stream: "intake", Length: 3, Lag: n(2), Pending: n(1), OldestPendingAgeSeconds: sec(3.456)},
			{Shard: 0, Stream: "delayed", Length: 5, DueNow: n(2), NextDue: at(252 * time.Second), Scheduled: n(3), NextSendAt: at(2 * time.Hour)},
			{Shard: 0, Stream: "delayed", Length: 0, DueNow: n(0), Scheduled: n(0)},
			{Shard: 1, Stream: "lane:fcm", Length: 7, Pending: n(0)},
			{Shard: 1, Stream: "bad\nname", Length: 1, Lag: n(0), Pending: n(1), OldestPendingAgeSeconds: sec(-1)},
			{Shard: 2, Stream: "dead", Length: 9},
		},
		LeftShards: []int{2},
		Replicas: []inspect.ReplicaStatus{
			{Consumer: "worker-a", LastSeenAgoSec: 0.42, Version: "v1",
				Breakers:      map[string]string{"fcm": "closed", "apple": "open", "wns": "half-open", "autopush": "closed"},
				Proxies:       map[string]string{"fcm": "proxy:3128", "apple": "proxy:3128", "wns": "other:8080"},
				ProxyBreakers: map[string]string{"proxy:3128": "open"}},
			{Consumer: "worker-b", LastSeenAgoSec: 4000},
		},
		Paused:   []inspect.PauseStatus{{Provider: "autopush", Reason: "incident 4", By: "ops@host", At: now.Add(-3 * time.Minute)}},
		KeyParks: []inspect.KeyParkStatus{{Provider: "apple", Key: "k1", Until: now.Add(90 * time.Second), Reason: "429", By: "worker-a"}},
		Memory: []inspect.MemoryStatus{
			{Node: "127.0.0.1:6379", Role: "master", UsedBytes: 1536, PeakBytes: 900, MaxBytes: 3 << 30, Policy: "noeviction", AOF: true},
			{Node: "n2", Role: "replica", UsedBytes: 5 << 40, PeakBytes: 1023, Policy: "allkeys-lru"},
		},
		UpstreamGroups: []stream.UpstreamGroup{{Shard: 0, Stream: "results", Group: "analytics", Lag: 12, Pending: 3},
			{Shard: 1, Stream: "gone", Lag: 4, Estimated: true}},
	}
	var b strings.Builder
	writeStatus(&b, rep)
	want := "" +
		"prefix wp, 2 shard(s), at 2026-03-04T05:06:07Z\n" +
		"\n" +
		"SHARD  STREAM       LENGTH  LAG  PENDING  OLDEST PENDING  RETRIES\n" +
		"0      intake       3       2    1        3.5s ago        \n" +
		"0      delayed      5       -    -        -               2 due now, next in 4m12s; 3 scheduled, next send_at in 2h0m0s\n" +
		"0      delayed      0       -    -        -               0 due now\n" +
		"1      lane:fcm     7       ?    0        -               \n" +
		"1      \"bad\\nname\"  1       0    1        0s ago          \n" +
		"2      dead         9       -    -        -               \n" +
		"LAG ?: no worker has read that stream yet (it has no consumer group): every entry waits\n" +
		"shards [2] are beyond the 2 in use and still hold jobs (a larger shard count wrote them): only workers run with --reshard-from read them (docs/operations.md, \"Changing the shard count\")\n" +
		"\n" +
		"replicas: 2 live (heartbeat within 15s)\n" +
		"CONSUMER  LAST SEEN   VERSION  BREAKERS\n" +
		"worker-a  400ms ago   v1       apple=open wns=half-open autopush=closed fcm=closed\n" +
		"worker-b  1h7m0s ago  -        -\n" +
		"\n" +
		"egress proxies (the providers not listed go direct)\n" +
		"CONSUMER  PROXY       BREAKER  PROVIDERS\n" +
		"worker-a  other:8080  -        wns\n" +
		"worker-a  proxy:3128  open     apple,fcm\n" +
		"\n" +
		"paused providers: 1 (their lanes read nothing; `gateway-worker resume PROVIDER` ends a pause)\n" +
		"PROVIDER  SINCE                            BY        REASON\n" +
		"autopush  2026-03-04T05:03:07Z (3m0s ago)  ops@host  incident 4\n" +
		"\n" +
		"parked keys: 1 (a push service throttled the sender; its jobs on that provider wait in the delayed set until then)\n" +
		"PROVIDER  KEY  UNTIL                            BY        REASON\n" +
		"apple     k1   2026-03-04T05:07:37Z (in 1m30s)  worker-a  429\n" +
		"\n" +
		"redis memory\n" +
		"NODE            ROLE     USED     PEAK    MAXMEMORY          POLICY\n" +
		"127.0.0.1:6379  master   1.5 KiB  900 B   3.0 GiB (0% used)  noeviction\n" +
		"n2              replica  5.0 TiB  1023 B  no limit           allkeys-lru (the gateway needs noeviction: docs/operations.md)\n" +
		"\n" +
		"upstream consumer groups: 2 (what a group has not read and acknowledged is never trimmed)\n" +
		"SHARD  STREAM   GROUP      LAG  PENDING\n" +
		"0      results  analytics  12   3\n" +
		"1      gone     -          ~4   0\n" +
		"LAG ~: estimated: Redis cannot count it (entries were deleted past the group); entries added minus entries read, at most the length\n" +
		"warning: redis n2: AOF is off (appendonly no): a restart of Redis loses the jobs and records written since its last snapshot (docs/operations.md)\n" +
		"warning: redis n2: no maxmemory: Redis grows until the host runs out of memory instead of refusing writes (docs/runbooks.md, WebPushRedisNoMaxmemory)\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("writeStatus (-want +got):\n%s", d)
	}

	// Nothing to list: each table says so in a line, and the replicas' table and the proxies'
	// are left out.
	rep.LeftShards, rep.Replicas, rep.Paused, rep.KeyParks, rep.UpstreamGroups = nil, nil, nil, nil, nil
	rep.Queues, rep.Memory = rep.Queues[:1], rep.Memory[:1]
	b.Reset()
	writeStatus(&b, rep)
	for _, line := range []string{"replicas: 0 live (heartbeat within 15s)\n\npaused providers: none\n\nparked keys: none\n",
		"upstream consumer groups: none on the ledger, gone or dead streams\n"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("writeStatus with nothing to list lacks %q:\n%s", line, b.String())
		}
	}
	for _, absent := range []string{"CONSUMER", "LAG ?", "shards [", "warning:"} {
		if strings.Contains(b.String(), absent) {
			t.Errorf("writeStatus with nothing to list prints %q:\n%s", absent, b.String())
		}
	}
}
