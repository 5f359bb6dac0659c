package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// TestWriteAudit: the counts, where the jobs without a record are (nowhere named LOST), the
// first ten ids missing a record and the first ten with more than one, and the records by
// code; no code table when there are no records.
func TestWriteAudit(t *testing.T) {
	var ids []string
	for i := range 12 {
		ids = append(ids, fmt.Sprintf("m%02d", i))
	}
	var b strings.Builder
	writeAudit(&b, inspect.AuditReport{Total: 2, ExactlyOne: 2, NoneWhere: map[string]int{}}, map[string]int{"INVALID_JOB": 1, "ACCEPTED": 1})
	want := "jobs:                     2\n" +
		"exactly one terminal:     2\n" +
		"none yet:                 0\n" +
		"more than one terminal:   0\n" +
		"terminal records by code:\n" +
		"  ACCEPTED                1\n" +
		"  INVALID_JOB             1\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("writeAudit of finished jobs (-want +got):\n%s", d)
	}
	b.Reset()
	writeAudit(&b, inspect.AuditReport{Total: 30, ExactlyOne: 5, None: 12, MoreThanOne: 12,
		NoneWhere: map[string]int{"nowhere": 3, "intake": 4, "lane:fcm": 2, "campaign": 3}, Missing: ids, Duplicated: ids[:2]}, nil)
	want = "jobs:                     30\n" +
		"exactly one terminal:     5\n" +
		"none yet:                 12\n" +
		"  campaign                3\n" +
		"  intake                  4\n" +
		"  lane:fcm                2\n" +
		"  nowhere (LOST)          3\n" +
		"more than one terminal:   12\n" +
		"  duplicated: m00\n" +
		"  duplicated: m01\n"
	for _, id := range ids[:10] {
		want += "  missing:    " + id + "\n"
	}
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("writeAudit of jobs not finished (-want +got):\n%s", d)
	}
}
