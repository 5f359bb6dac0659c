package cli

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// TestCampaignFlagsJSON: the campaign holds the members whose flags were given and only those
// (a worker's defaults apply to the others), a send_at in unix milliseconds as a number and
// one in RFC 3339 as a string, a base64 payload as the file's bytes; the campaign decodes.
func TestCampaignFlagsJSON(t *testing.T) {
	dir := t.TempDir()
	payload := filepath.Join(dir, "p.bin")
	if err := os.WriteFile(payload, []byte{0xff, 'x'}, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want map[string]any
	}{
		{[]string{"--id", "a", "--payload-file", payload, "--payload-encoding", "base64", "--send-at", "1767225600000", "--rate", "2.5"},
			map[string]any{"id": "a", "payload": "/3g=", "payload_encoding": "base64", "send_at": 1767225600000.0, "rate": 2.5}},
		{[]string{"--id", "b", "--payload-file", payload, "--payload-encoding", "base64", "--send-at", "2026-06-01T09:00:00Z", "--ttl", "60", "--class", "transactional", "--vapid-key", "k2"},
			map[string]any{"id": "b", "payload": "/3g=", "payload_encoding": "base64", "send_at": "2026-06-01T09:00:00Z", "ttl": 60.0, "class": "transactional", "vapid_key": "k2"}},
	} {
		var cf CampaignFlags
		fs := NewFlagSet("test campaign create", io.Discard, Help{})
		cf.Register(fs)
		if code, ok := fs.Parse(tc.args); !ok {
			t.Fatalf("%v: Parse: exit %d", tc.args, code)
		}
		raw, err := cf.JSON()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%v: campaign (-want +got):\n%s", tc.args, d)
		}
		c, err := job.DecodeCampaign(`{"create_campaign":`+string(raw)+`}`, time.Now())
		if err != nil || (c.Class == job.ClassBulk) != !strings.Contains(string(raw), "transactional") {
			t.Errorf("%v: decoded %+v, %v", tc.args, c, err)
		}
	}
}

// TestReadRecipients: blank lines are skipped and each recipient keeps its line number; a line
// that is not JSON, or too long, is refused naming it.
func TestReadRecipients(t *testing.T) {
	recs, lines, err := ReadRecipients(strings.NewReader("{\"a\":1}\n\n  \n {\"b\":2} \n"), "in")
	if err != nil || len(recs) != 2 || string(recs[1]) != `{"b":2}` || !cmp.Equal(lines, []int{1, 4}) {
		t.Errorf("ReadRecipients: %q %v %v", recs, lines, err)
	}
	if _, _, err := ReadRecipients(strings.NewReader("{}\n{\n"), "in"); err == nil || err.Error() != "in:2: not JSON" {
		t.Errorf("a line that is not JSON: %v", err)
	}
	long := "{\"x\":\"" + strings.Repeat("y", MaxRecipientLine) + "\"}\n"
	if _, _, err := ReadRecipients(strings.NewReader("{}\n"+long), "in"); err == nil || !strings.HasPrefix(err.Error(), "in:2: ") {
		t.Errorf("a line over MaxRecipientLine: %v", err)
	}
}
