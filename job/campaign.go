package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind is what an intake entry asks for: a job to send, a campaign to create, or recipients
// to add to a campaign (docs/job-format.md, "Campaigns").
type Kind int

const (
	// KindJob is a job of format v1 (or anything that is not one of the others, which Decode
	// then refuses with its reason).
	KindJob Kind = iota
	// KindCreateCampaign is {"create_campaign": {...}}: DecodeCampaign.
	KindCreateCampaign
	// KindAddRecipients is {"add_recipients": {...}}: DecodeRecipients.
	KindAddRecipients
)

// Campaign entry members.
const (
	createMember = "create_campaign"
	addMember    = "add_recipients"
)

// KindOf tells an entry's kind from its first member: a campaign entry is an object whose
// first member is "create_campaign" or "add_recipients"; every other entry is a job.
func KindOf(raw string) Kind {
	s := strings.TrimLeft(raw, " \t\r\n")
	if !strings.HasPrefix(s, "{") {
		return KindJob
	}
	s = strings.TrimLeft(s[1:], " \t\r\n")
	switch {
	case strings.HasPrefix(s, `"`+createMember+`"`):
		return KindCreateCampaign
	case strings.HasPrefix(s, `"`+addMember+`"`):
		return KindAddRecipients
	}
	return KindJob
}

// campaignFields are the members of a campaign: a job's message members, its id, when it may
// start and how fast it may go.
var campaignFields = []string{"id", "payload", "payload_encoding", "notification", "ttl", "urgency", "topic",
	"vapid_key", "class", "send_at", "rate"}

// messageFields are the members a campaign copies into each of its recipients' jobs.
var messageFields = map[string]bool{"payload": true, "payload_encoding": true, "notification": true,
	"ttl": true, "urgency": true, "topic": true, "vapid_key": true, "class": true}

// MaxCampaignRate is the highest pace a campaign may ask for, in messages a second.
const MaxCampaignRate = 1_000_000

// Campaign is a decoded, valid campaign: one message for many subscriptions.
type Campaign struct {
	ID string
	// Message is the JSON members (without braces) that every recipient's job carries besides
	// its id, subscription, recipient and campaign: the payload stored once for the campaign.
	Message  string
	Class    Class
	VAPIDKey string
	TTL      int
	// SendAt is when the campaign may start (zero: at once).
	SendAt time.Time
	// Rate is the fleet-wide pace in messages a second (0: as fast as the providers take them).
	Rate float64
}

// sampleSubscription is a valid subscription (the P-256 generator point and 16 zero bytes)
// that DecodeCampaign puts beside a campaign's message to check it by the job rules.
const sampleSubscription = `{"endpoint":"https://push.example/x","keys":{"p256dh":"BGsX0fLhLEJH-Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`

// DecodeCampaign decodes and validates the entry {"create_campaign": {...}}. Its message is
// checked by the job rules (a job made of it and any subscription must be valid); a
// "ciphertext" is refused, since each subscription needs its own encryption. now bounds
// nothing here: the caller decides how far ahead send_at may be.
func DecodeCampaign(raw string, now time.Time) (*Campaign, error) {
	body, err := singleMember(raw, createMember)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil || m == nil {
		return nil, invalid("%s: must be an object", createMember)
	}
	if _, ok := m["ciphertext"]; ok {
		return nil, invalid("%s.ciphertext: a campaign's payload is encrypted for each subscription; give payload or notification", createMember)
	}
	for name := range m {
		if index(campaignFields, name) < 0 {
			return nil, invalid("%s: unknown field %q", createMember, name)
		}
	}
	c := &Campaign{}
	idRaw, ok := m["id"]
	if !ok {
		return nil, invalid("%s.id: required", createMember)
	}
	if err := json.Unmarshal(idRaw, &c.ID); err != nil {
		return nil, invalid("%s.id: must be a string", createMember)
	}
	if err := CheckCampaignID(c.ID); err != nil {
		return nil, invalid("%s.id: %v", createMember, err)
	}
	if r, ok := m["rate"]; ok && string(r) != "null" {
		if err := json.Unmarshal(r, &c.Rate); err != nil || c.Rate < 0 || c.Rate > MaxCampaignRate || math.IsNaN(c.Rate) {
			return nil, invalid("%s.rate: must be a number from 0 to %d (messages a second; 0: no pace)", createMember, MaxCampaignRate)
		}
	}
	if s, ok := m["send_at"]; ok && string(s) != "null" {
		t, err := decodeTime(member{raw: string(s)})
		if err != nil {
			return nil, invalid("%s.send_at: %v", createMember, err)
		}
		c.SendAt = t
	}
	names := make([]string, 0, len(m))
	for name, v := range m {
		// null is "none" for every optional member, as in a job: left out, so that its
		// default holds (bulk, for the class).
		if messageFields[name] && string(v) != "null" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var msg strings.Builder
	for i, name := range names {
		if i > 0 {
			msg.WriteByte(',')
		}
		var v bytes.Buffer
		if err := json.Compact(&v, m[name]); err != nil {
			return nil, invalid("%s.%s: %v", createMember, name, err)
		}
		msg.WriteString(strconv.Quote(name))
		msg.WriteByte(':')
		msg.Write(v.Bytes())
	}
	c.Message = msg.String()
	if index(names, "class") < 0 {
		// A campaign is bulk unless it says otherwise: it must not delay the pushes someone waits for.
		if c.Message != "" {
			c.Message += ","
		}
		c.Message += `"class":"bulk"`
	}
	j, err := DecodeString(c.jobJSON("x/0", sampleSubscription, ""), now)
	if err != nil {
		var ie *InvalidError
		if errors.As(err, &ie) {
			return nil, invalid("%s.%s", createMember, ie.Reason)
		}
		return nil, err
	}
	c.Class, c.VAPIDKey, c.TTL = j.Class, j.VAPIDKey, j.TTL
	return c, nil
}

// jobJSON is the job of recipient id with subscription sub (JSON) and recipient key rcpt (a
// JSON string, or ""): what a worker sends for that recipient. stream's expansion script
// builds the same text in Redis.
func (c *Campaign) jobJSON(id, sub, rcpt string) string {
	var b strings.Builder
	b.WriteString(`{"id":`)
	b.WriteString(strconv.Quote(id))
	b.WriteString(`,"campaign":`)
	b.WriteString(strconv.Quote(c.ID))
	b.WriteString(`,"subscription":`)
	b.WriteString(sub)
	if rcpt != "" {
		b.WriteString(`,"recipient":`)
		b.WriteString(rcpt)
	}
	if c.Message != "" {
		b.WriteByte(',')
		b.WriteString(c.Message)
	}
	b.WriteByte('}')
	return b.String()
}

// WithMessage is a campaign recipient's job: its reference (the lane entry's job: id, campaign,
// subscription and recipient, as the expansion writes it) with the campaign's message joined
// in, as jobJSON makes it whole.
func WithMessage(ref, message string) string {
	if message == "" {
		return ref
	}
	return ref[:len(ref)-1] + "," + message + "}"
}

// Recipient is one subscription a batch adds to a campaign.
type Recipient struct {
	// Key is the upstream's own key for it ("recipient"), "" when none.
	Key          string
	Subscription Subscription
	// Parsed is what the decode made of Subscription, for its routing.
	Parsed Parsed
	// Compact is the subscription as given, without insignificant whitespace: what the
	// campaign keeps of it.
	Compact string
	// Invalid says why the recipient cannot be sent; the rest is set as far as it was read.
	Invalid error
	// Raw is the recipient as given, for the dead record of an invalid one.
	Raw string
}

// MaxRecipientsPerBatch bounds one add_recipients entry (which is also bounded by
// MaxEntryBytes).
const MaxRecipientsPerBatch = 1000

// MaxBatchIDLen bounds an add_recipients entry's batch id.
const MaxBatchIDLen = 64

// DecodeRecipients decodes the entry {"add_recipients": {"campaign": ID, "batch": BATCH,
// "recipients": [...]}}; batch is optional: a batch id already taken for the campaign makes
// the entry a copy, whose recipients are not added again (a producer that writes a batch a
// second time, not knowing whether the first write went through, sends no one twice).
// Each recipient is a PushSubscription object, or {"recipient": KEY, "subscription": {...}}.
// An error is about the batch as a whole; a recipient that fails its checks has Invalid set
// and the others are kept. It reads the entry with Decode's own readers: one scan checks its
// JSON, and each recipient is split without encoding/json.
func DecodeRecipients(raw string) (campaign, batch string, rs []Recipient, err error) {
	if len(raw) > MaxEntryBytes {
		return "", "", nil, invalid("entry is %d bytes; at most %d", len(raw), MaxEntryBytes)
	}
	top, err := splitObject(raw, 0, "", []string{addMember})
	if err != nil {
		return "", "", nil, err
	}
	add, ok := top.get(addMember)
	if !ok || kindOf(add.raw) != "an object" {
		return "", "", nil, invalid("%s: must be an object", addMember)
	}
	b, err := splitObject(add.raw, add.at, addMember, []string{"campaign", "batch", "recipients"})
	if err != nil {
		return "", "", nil, err
	}
	c, ok := b.get("campaign")
	if !ok {
		return "", "", nil, invalid("%s.campaign: required", addMember)
	}
	if campaign, err = stringOf(c, addMember+".campaign"); err != nil {
		return "", "", nil, err
	}
	if err := CheckCampaignID(campaign); err != nil {
		return "", "", nil, invalid("%s.campaign: %v", addMember, err)
	}
	if batch, _, err = optionalString(&b, "batch"); err != nil {
		return "", "", nil, err
	}
	if len(batch) > MaxBatchIDLen || !isPrintableASCII(batch) {
		return "", "", nil, invalid("%s.batch: must be at most %d printable ASCII characters", addMember, MaxBatchIDLen)
	}
	list, ok := b.get("recipients")
	if !ok || kindOf(list.raw) != "an array" {
		return "", "", nil, invalid("%s.recipients: must be an array", addMember)
	}
	els := arrayElements(list)
	if len(els) > MaxRecipientsPerBatch {
		return "", "", nil, invalid("%s.recipients: %d in one batch; at most %d", addMember, len(els), MaxRecipientsPerBatch)
	}
	rs = make([]Recipient, len(els))
	for i, el := range els {
		rs[i] = decodeRecipient(el)
	}
	return campaign, batch, rs, nil
}

// arrayElements are the elements of the JSON array m, which a split has checked already.
func arrayElements(m member) []member {
	var out []member
	s := m.raw
	i := skipSpace(s, 1)
	for i < len(s) && s[i] != ']' {
		end := skipValue(s, i)
		if end < 0 {
			break
		}
		out = append(out, member{raw: s[i:end], at: m.at + i})
		i = skipSpace(s, end)
		if i < len(s) && s[i] == ',' {
			i = skipSpace(s, i+1)
		}
	}
	return out
}

// recipientFields are the members a recipient object may have: a PushSubscription's, or the
// wrapped form's.
var recipientFields = []string{"endpoint", "expirationTime", "keys", "recipient", "subscription"}

func decodeRecipient(el member) Recipient {
	r := Recipient{Raw: el.raw}
	if kindOf(el.raw) != "an object" {
		r.Invalid = invalid("recipient: must be an object, got %s", kindOf(el.raw))
		return r
	}
	f, err := splitObject(el.raw, el.at, "recipient", recipientFields)
	if err != nil {
		r.Invalid = err
		return r
	}
	sub := el
	key, hasKey := f.get("recipient")
	wrapped, hasSub := f.get("subscription")
	if hasKey || hasSub {
		for _, name := range subscriptionFields {
			if _, ok := f.get(name); ok {
				r.Invalid = invalid("recipient: unknown field %q beside \"subscription\"", name)
				return r
			}
		}
		if hasKey {
			if r.Key, err = stringOf(key, "recipient"); err != nil {
				r.Invalid = err
				return r
			}
			if err := checkRecipient(r.Key); err != nil {
				r.Invalid = invalid("recipient: %v", err)
				return r
			}
		}
		if !hasSub {
			r.Invalid = invalid("subscription: required")
			return r
		}
		sub = wrapped
	}
	if r.Parsed, err = decodeSubscription(sub, &r.Subscription); err != nil {
		r.Invalid = err
		return r
	}
	r.Compact = sub.raw
	if strings.ContainsAny(sub.raw, " \t\r\n") {
		var c bytes.Buffer
		if err := json.Compact(&c, []byte(sub.raw)); err != nil {
			r.Invalid = invalid("subscription: %v", err)
			return r
		}
		r.Compact = c.String()
	}
	return r
}

// singleMember is the raw value of the one member name of the object raw.
func singleMember(raw, name string) (string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return "", invalid("%s", jsonProblem(err))
	}
	v, ok := m[name]
	if !ok || len(m) != 1 {
		return "", invalid("a campaign entry has exactly one member, %q", name)
	}
	return string(v), nil
}

// CampaignJob is the job a worker makes of recipient n of campaign c (for tests and tools
// that build what the expansion writes).
func CampaignJob(c *Campaign, n int64, rcptKey, compactSub string) string {
	rcpt := ""
	if rcptKey != "" {
		b, _ := json.Marshal(rcptKey)
		rcpt = string(b)
	}
	return c.jobJSON(RecipientJobID(c.ID, n), compactSub, rcpt)
}

// RecipientJobID is the job id of recipient n of campaign id.
func RecipientJobID(campaign string, n int64) string {
	return fmt.Sprintf("%s/%d", campaign, n)
}
