package dispatch

import (
	"testing"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
)

// TestIntakeReadsAreBoundedInBytes: an intake read takes about intakeReadBytes of entries the
// size of the largest of the read before: the whole batch of small jobs, a few entries of a
// campaign's recipients, one entry of any size, and to begin with a few of the largest allowed.
func TestIntakeReadsAreBoundedInBytes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		largest int
		want    int
	}{
		{"small jobs: the whole batch", 1 << 10, 100},
		{"the first read: entries of the largest size allowed", jobfmt.MaxEntryBytes, intakeReadBytes / jobfmt.MaxEntryBytes},
		{"recipients of a campaign, 60 KiB an entry", 60 << 10, 4},
		{"one entry over the bound: still one", intakeReadBytes * 2, 1},
		{"empty entries: the batch", 0, 100},
	} {
		if got := intakeCount(100, tc.largest); got != tc.want {
			t.Errorf("%s: intakeCount(100, %d) = %d, want %d", tc.name, tc.largest, got, tc.want)
		}
	}
}
