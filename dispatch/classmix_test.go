package dispatch

import (
	"testing"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
)

// TestClassMixOwesBulkItsShare: bulk is owed while transactional jobs took tokens and bulk's
// part of the last one to two seconds is under its share; never with a share of 0, nor while
// transactional jobs took none; and the count forgets spans older than two.
func TestClassMixOwesBulkItsShare(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var m classMix
	if m.bulkOwed(t0, 0.1) {
		t.Error("owed with nothing taken")
	}
	for range 9 {
		m.took(t0, jobfmt.ClassTransactional)
	}
	if !m.bulkOwed(t0, 0.1) || m.bulkOwed(t0, 0) {
		t.Error("after 9 transactional and no bulk: want owed at share 0.1, never at 0")
	}
	m.took(t0.Add(500*time.Millisecond), jobfmt.ClassBulk)
	if m.bulkOwed(t0.Add(500*time.Millisecond), 0.1) {
		t.Error("1 bulk in 10 is the share 0.1: not owed")
	}
	if !m.bulkOwed(t0.Add(500*time.Millisecond), 0.2) {
		t.Error("1 bulk in 10 is under a share of 0.2: owed")
	}
	// The previous span still counts one second on; two seconds on, both are gone.
	if !m.bulkOwed(t0.Add(1500*time.Millisecond), 0.2) {
		t.Error("one span on, the counts still hold")
	}
	if m.bulkOwed(t0.Add(3*time.Second), 0.2) {
		t.Error("three seconds on, nothing counts: not owed")
	}
	for range 5 {
		m.took(t0.Add(3*time.Second), jobfmt.ClassBulk)
	}
	if m.bulkOwed(t0.Add(3*time.Second), 0.5) {
		t.Error("bulk alone is never owed")
	}
}

func TestBulkSlotReserve(t *testing.T) {
	for capacity, want := range map[int]int{1: 0, 2: 1, 10: 1, 11: 2, 16: 2, 512: 52} {
		if got := bulkSlotReserve(capacity); got != want {
			t.Errorf("bulkSlotReserve(%d) = %d, want %d", capacity, got, want)
		}
	}
}
