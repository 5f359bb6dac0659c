package inspect

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// TestFailsAgainCodes: the codes a replay skips are those the job earned itself, never the
// service's or the path's state.
func TestFailsAgainCodes(t *testing.T) {
	var skipped []string
	for _, c := range taxonomy.Codes() {
		if _, ok := FailsAgain(string(c)); ok {
			skipped = append(skipped, string(c))
		}
		if _, ok := FailsAgain(string(c)); ok && c.Retryable() {
			t.Errorf("%s is retryable and skipped", c)
		}
	}
	want := []string{"INVALID_REQUEST", "PAYLOAD_TOO_LARGE", "INVALID_TTL", "EXPIRED", "INVALID_JOB", "BLOCKED"}
	if diff := cmp.Diff(want, skipped); diff != "" {
		t.Errorf("codes skipped (-want +got):\n%s", diff)
	}
}
