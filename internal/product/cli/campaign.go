package cli

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// CampaignFlags are the flags of `gateway-worker campaign create` that describe the campaign
// (docs/job-format.md, "Campaigns"), and the campaign they give.
type CampaignFlags struct {
	ID, PayloadFile, PayloadEncoding, NotificationFile string

	fs *FlagSet
}

// campaignMembers are the members of a campaign and the flags that give them, so that a
// refusal names the flag rather than the member.
var campaignMembers = map[string]string{"id": "id", "payload": "payload-file", "payload_encoding": "payload-encoding",
	"notification": "notification-file", "ttl": "ttl", "urgency": "urgency", "topic": "topic",
	"vapid_key": "vapid-key", "class": "class", "send_at": "send-at", "rate": "rate"}

// Register defines the flags on fs, under "Campaign"; --id is required.
func (c *CampaignFlags) Register(fs *FlagSet) {
	c.fs = fs
	fs.Group("Campaign")
	fs.StringVar(&c.ID, "id", "", fmt.Sprintf("the campaign's `ID`: 1 to %d letters, digits, '.', '_' and '-'", job.MaxCampaignIDLen))
	fs.StringVar(&c.PayloadFile, "payload-file", "", "the message: the bytes of `FILE`")
	fs.StringVar(&c.PayloadEncoding, "payload-encoding", "text", "`ENCODING` of --payload-file: text (UTF-8, sent as it is) or base64 (any bytes; the campaign carries them base64-encoded)")
	fs.StringVar(&c.NotificationFile, "notification-file", "", "the message as a Declarative Web Push notification: the JSON object in `FILE`")
	fs.Int("ttl", job.DefaultTTL, "`SECONDS` each message is kept, counted from when its recipient enters its lane")
	fs.String("urgency", "", "`URGENCY`: "+strings.Join(job.Urgencies, ", "))
	fs.String("topic", "", fmt.Sprintf("replace a pending message with this `TOPIC` (at most %d base64url characters)", job.MaxTopicLen))
	fs.String("vapid-key", job.DefaultVAPIDKey, "`NAME` of the application server key the subscriptions were made with")
	fs.String("class", string(job.ClassBulk), "`CLASS`: bulk or transactional")
	fs.String("send-at", "", "start at `TIME` (RFC 3339 or unix milliseconds), not before")
	fs.Float64("rate", 0, "at most `N` messages a second over the fleet (0: as fast as the providers take them)")
	fs.Require("id")
}

// JSON is the campaign the parsed flags give, checked as a worker checks it
// (job.DecodeCampaign): an error names the flag whose value is refused, and why.
func (c *CampaignFlags) JSON() ([]byte, error) {
	m := map[string]any{"id": c.ID}
	switch {
	case (c.PayloadFile == "") == (c.NotificationFile == ""):
		return nil, errors.New("give the message with --payload-file FILE or --notification-file FILE, one of them")
	case c.NotificationFile != "" && c.fs.IsSet("payload-encoding"):
		return nil, errors.New("--payload-encoding: only with --payload-file")
	case c.PayloadFile != "":
		b, err := os.ReadFile(c.PayloadFile)
		switch {
		case err != nil:
			return nil, fmt.Errorf("--payload-file: %w", err)
		case c.PayloadEncoding == "base64":
			m["payload"], m["payload_encoding"] = base64.StdEncoding.EncodeToString(b), "base64"
		case c.PayloadEncoding != "text":
			return nil, fmt.Errorf("--payload-encoding: must be text or base64, got %q", c.PayloadEncoding)
		case !utf8.Valid(b):
			// JSON would carry U+FFFD in place of each bad byte: the message would change unsaid.
			return nil, fmt.Errorf("--payload-file: %s is not UTF-8 text; give --payload-encoding base64 to send its bytes", c.PayloadFile)
		default:
			m["payload"] = string(b)
		}
	default:
		b, err := os.ReadFile(c.NotificationFile)
		if err == nil && !json.Valid(b) {
			err = fmt.Errorf("%s is not JSON", c.NotificationFile)
		}
		if err != nil {
			return nil, fmt.Errorf("--notification-file: %w", err)
		}
		m["notification"] = json.RawMessage(b)
	}
	for member, name := range campaignMembers {
		if _, done := m[member]; done || !c.fs.IsSet(name) {
			continue
		}
		v := c.fs.Lookup(name).Value.String()
		switch {
		case member == "ttl" || member == "rate" || (member == "send_at" && v != "" && strings.Trim(v, "0123456789") == ""):
			m[member] = json.Number(v)
		default:
			m[member] = v
		}
	}
	raw, err := json.Marshal(m)
	if err != nil { // only a --rate that is no JSON number (NaN, Inf) gets here
		return nil, fmt.Errorf("--rate: %w", err)
	}
	if _, err := job.DecodeCampaign(`{"create_campaign":`+string(raw)+`}`, time.Now()); err != nil {
		return nil, campaignFlagError(err)
	}
	return raw, nil
}

// campaignFlagError is a refusal of DecodeCampaign, naming the flag that gave the member.
func campaignFlagError(err error) error {
	var ie *job.InvalidError
	if !errors.As(err, &ie) {
		return err
	}
	path := strings.TrimPrefix(ie.Reason, "create_campaign.")
	member, why, _ := strings.Cut(path, ": ")
	if name, ok := campaignMembers[member]; ok {
		return fmt.Errorf("--%s: %s", name, why)
	}
	if name, ok := campaignMembers[strings.SplitN(member, ".", 2)[0]]; ok {
		return fmt.Errorf("--%s: %s", name, path) // a member inside the notification
	}
	return errors.New(path)
}

// MaxRecipientLine is the longest line ReadRecipients takes: well over any valid
// subscription, and under what one entry can carry.
const MaxRecipientLine = job.MaxEntryBytes - 4096

// ReadRecipients reads the recipients of `campaign add` from in (named name in its
// messages): one PushSubscription JSON object a line, or {"recipient": KEY, "subscription":
// {...}}, blank lines skipped. It returns each recipient and its line number. A line that is
// not JSON, or is over MaxRecipientLine, is an error naming it, so that input that is not
// what it should be is refused whole, before anything is written; every other check is the
// worker's (an invalid recipient gets a dead record with its reason).
func ReadRecipients(in io.Reader, name string) (recs [][]byte, lines []int, err error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), MaxRecipientLine)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			return nil, nil, fmt.Errorf("%s:%d: not JSON", name, n)
		}
		recs, lines = append(recs, bytes.Clone(line)), append(lines, n)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s:%d: %w (a line is at most %d bytes)", name, n+1, err, MaxRecipientLine)
	}
	return recs, lines, nil
}
