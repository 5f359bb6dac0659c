package inspect

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

func TestResultsAndDeadRecordsReadBack(t *testing.T) {
	e, s := newStore(t, "fcm")
	e.enqueue(t, s, validJob("a"), validJob("b"), "not json")
	in := e.readIntake(t, s, 3)
	at := time.UnixMilli(1_790_000_000_000)
	for _, en := range in[:2] {
		if ok, err := moveToLane(e.ctx, s, en, "fcm", en.Fields["job"], at.UnixMilli()); err != nil || !ok {
			t.Fatalf("ToLane: %v %v", ok, err)
		}
	}
	if ok, err := s.ToDead(e.ctx, in[2], stream.DeadRecord{Code: "INVALID_JOB", Reason: "entry is not JSON", Job: "not json", At: at}); err != nil || !ok {
		t.Fatalf("ToDead: %v %v", ok, err)
	}
	lane := e.readLane(t, s, "fcm", 2)
	want := []stream.Result{
		{ID: "a", Provider: "fcm", Code: "ACCEPTED", Status: 201, Attempt: 0, Latency: 12 * time.Millisecond, At: at},
		{ID: "b", Provider: "fcm", Code: "GONE", Status: 410, Detail: "unsubscribed", Attempt: 1, Latency: 30 * time.Millisecond, At: at},
	}
	for i, r := range want {
		if ok, err := s.Finish(e.ctx, lane[i], r); err != nil || !ok {
			t.Fatalf("Finish: %v %v", ok, err)
		}
	}
	var got []stream.Result
	if err := inspectorOf(s).Results(e.ctx, func(r stream.Result) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Results (-want +got):\n%s", diff)
	}
	var dead []stream.DeadRecord
	if err := inspectorOf(s).DeadRecords(e.ctx, func(d stream.DeadRecord) { dead = append(dead, d) }); err != nil {
		t.Fatal(err)
	}
	wantDead := []stream.DeadRecord{{Code: "INVALID_JOB", Reason: "entry is not JSON", Job: "not json", At: at}}
	if diff := cmp.Diff(wantDead, dead); diff != "" {
		t.Fatalf("DeadRecords (-want +got):\n%s", diff)
	}
}
