package dispatch

import (
	"testing"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
)

// TestParkedTransactionalGoesAheadOfBulk: under one recipient's key, a transactional entry
// parked after a bulk backlog is woken before it, and the order within each class stays the
// order of arrival.
func TestParkedTransactionalGoesAheadOfBulk(t *testing.T) {
	var p parking
	key := parkKey{recipient: "user-1"}
	mk := func(name string, c jobfmt.Class) *delivery {
		return &delivery{laneJob: &laneJob{class: c}, recipient: name}
	}
	for _, d := range []*delivery{
		mk("b1", jobfmt.ClassBulk), mk("b2", jobfmt.ClassBulk), mk("t1", jobfmt.ClassTransactional),
		mk("b3", jobfmt.ClassBulk), mk("t2", jobfmt.ClassTransactional),
	} {
		if !p.park(key, d, false) {
			t.Fatal("the parking refused an entry while far from full")
		}
	}
	// A delivery taken out to start and put back keeps the front, whatever its class.
	p.park(key, mk("b0", jobfmt.ClassBulk), true)
	var got []string
	for d := p.pop(key); d != nil; d = p.pop(key) {
		got = append(got, d.recipient)
	}
	want := []string{"b0", "t1", "t2", "b1", "b2", "b3"}
	if len(got) != len(want) {
		t.Fatalf("woken %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("woken %v; want %v", got, want)
		}
	}
}
