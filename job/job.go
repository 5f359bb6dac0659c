package job

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/webpush-gateway/webpush-gateway/ece"
)

// Limits of the job format v1 (docs/job-format.md). The sizes of a push message's body are
// in rules.go, with the other rules the adapter checks too.
const (
	// MaxEntryBytes is the largest job entry accepted; larger entries are INVALID_JOB.
	MaxEntryBytes = 64 << 10
	// MaxIDLen is the longest job id.
	MaxIDLen = 128
	// MaxRecipientLen bounds the fairness key, which becomes a field of the rcpt hash.
	MaxRecipientLen = 256
	// MaxVAPIDKeyLen bounds the key name.
	MaxVAPIDKeyLen = 128
	// DefaultTTL is the ttl of a job that gives none: 28 days, what most push services keep.
	DefaultTTL = 2419200
	// DefaultVAPIDKey is the key name of a job that gives none.
	DefaultVAPIDKey = "default"
	// MaxCampaignIDLen is the longest campaign id: a campaign recipient's job id is the
	// campaign's id, "/" and the recipient's number, within MaxIDLen.
	MaxCampaignIDLen = 64
)

// jobFields are the top-level fields of format v1, in the order they are validated.
var jobFields = []string{
	"id", "subscription", "payload", "payload_encoding", "ciphertext", "notification", "ttl",
	"urgency", "topic", "vapid_key", "recipient", "class", "enqueued_at", "send_at", "campaign",
}

// subscriptionFields and keysFields are the members of "subscription" and of its "keys".
var (
	subscriptionFields = []string{"endpoint", "expirationTime", "keys"}
	keysFields         = []string{"p256dh", "auth"}
)

// Job is a decoded, structurally valid delivery job. Provider routing (https only, known
// authority: EndpointReason) and the existence of the named VAPID key are checked by the
// intake loop.
type Job struct {
	ID           string
	Subscription Subscription
	// Payload is the plaintext to encrypt (already base64-decoded when payload_encoding was
	// "base64", the rendered declarative JSON when the job gave a notification); Ciphertext is
	// an aes128gcm body sent as is. At most one is set; neither is an empty push, which RFC
	// 8030 allows.
	Payload    []byte
	Ciphertext []byte
	// Notification is the job's declarative notification, when it gave one: Payload is what
	// it renders to.
	Notification *Notification
	// TTL is the time to live in seconds the upstream asked for, counted from TTLStart.
	TTL       int
	Urgency   string
	Topic     string
	VAPIDKey  string
	Recipient string
	// Class is the job's priority class inside its provider's lane: ClassTransactional (the
	// default) or ClassBulk.
	Class Class
	// EnqueuedAt is when the upstream enqueued the job (or when intake first saw it).
	EnqueuedAt time.Time
	// SendAt is when the job may be sent, when it gave send_at (zero otherwise): intake holds a
	// job whose SendAt is still to come in the delayed set until then.
	SendAt time.Time
	// Campaign is the id of the campaign the job is a recipient of, "" for a job of its own:
	// its records carry it, and its outcome counts in the campaign's status.
	Campaign string
	// Parsed is what Decode made of the subscription's endpoint and keys while checking them,
	// for the routing and the encryption after it.
	Parsed Parsed
}

// Parsed is a subscription's endpoint and keys as Decode parsed them to check them, kept so
// that routing (providers.Registry.ResolveParsed) and encryption do not parse them again: on
// the way from a lane to the push service the endpoint would otherwise be parsed three times
// and the P-256 point, the costliest part of a decode, twice. Each parse is handed out only
// for the very strings it was made from, so a Parsed that outlives a change to its
// Subscription is not used rather than used wrongly; the zero Parsed holds nothing, and its
// users then parse for themselves.
type Parsed struct {
	endpoint string
	url      *url.URL
	keys     Keys
	ece      *ece.Keys
}

// Equal is true: a Parsed says nothing its Subscription does not, so two jobs that differ in
// it alone are the same job (go-cmp compares by Equal).
func (Parsed) Equal(Parsed) bool { return true }

// URL is the parse of endpoint, nil when this Parsed holds none of it. The URL is shared:
// read it, never change it.
func (p *Parsed) URL(endpoint string) *url.URL {
	if p.url == nil || p.endpoint != endpoint {
		return nil
	}
	return p.url
}

// Keys is the parse of keys, nil when this Parsed holds none of them. ece.Keys is immutable.
func (p *Parsed) Keys(keys Keys) *ece.Keys {
	if p.ece == nil || p.keys != keys {
		return nil
	}
	return p.ece
}

// TTLStart is when the job's TTL starts to count: its send_at when it gave one (a sender who
// schedules a message means it to live ttl from the time it goes out, not from the time it was
// enqueued), else enqueued, its enqueued_at as the lane entry keeps it.
func (j *Job) TTLStart(enqueued time.Time) time.Time {
	if !j.SendAt.IsZero() {
		return j.SendAt
	}
	return enqueued
}

// Subscription is the browser's PushSubscription, as its toJSON() gives it: marshalled, it
// is that JSON, expirationTime null included.
type Subscription struct {
	Endpoint       string `json:"endpoint"`
	ExpirationTime *int64 `json:"expirationTime"`
	Keys           Keys   `json:"keys"`
}

// Keys are the user agent's ECDH public key and auth secret, base64url without padding as
// browsers give them.
type Keys struct {
	P256dh string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// ErrInvalid is what every InvalidError unwraps to.
var ErrInvalid = errors.New("job: invalid job")

// InvalidError says why a job was refused. Reason names the field and never quotes an
// endpoint or a key; it is what a dead record of the job says.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return "job: invalid job: " + e.Reason }

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(format string, a ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, a...)}
}

// Decode decodes and validates one job entry. now is the default for enqueued_at and the
// upper bound for it (an enqueued_at in the future, from a skewed upstream clock, is taken as
// now so that it cannot lengthen the job's TTL). The first problem found is reported.
func Decode(raw []byte, now time.Time) (*Job, error) {
	if len(raw) > MaxEntryBytes {
		return nil, invalid("entry is %d bytes; at most %d", len(raw), MaxEntryBytes)
	}
	return DecodeString(string(raw), now)
}

// DecodeString is Decode of an entry held as a string, as Redis gives it. The job's strings
// that hold no escapes share raw's memory rather than copy it.
func DecodeString(raw string, now time.Time) (*Job, error) {
	return DecodeFromIntake(raw, now, ClassTransactional)
}

// DecodeFromIntake is DecodeString of an entry read from the intake of class intake: a job
// that names no class is of its intake's (a producer marks a job's class by the intake it
// writes it to, or by its class member, which wins).
func DecodeFromIntake(raw string, now time.Time, intake Class) (*Job, error) {
	if len(raw) > MaxEntryBytes {
		return nil, invalid("entry is %d bytes; at most %d", len(raw), MaxEntryBytes)
	}
	fields, err := splitObject(raw, 0, "", jobFields)
	if err != nil {
		return nil, err
	}
	j := &Job{TTL: DefaultTTL, VAPIDKey: DefaultVAPIDKey, Class: intake, EnqueuedAt: now}

	if j.ID, err = requiredString(&fields, "id"); err != nil {
		return nil, err
	}
	if err := checkID(j.ID); err != nil {
		return nil, err
	}
	sub, ok := fields.get("subscription")
	if !ok {
		return nil, invalid("subscription: required")
	}
	if j.Parsed, err = decodeSubscription(sub, &j.Subscription); err != nil {
		return nil, err
	}
	if err := decodeBody(&fields, j); err != nil {
		return nil, err
	}
	if m, ok := fields.get("ttl"); ok {
		n, err := wholeNumber(m.raw)
		if err != nil {
			return nil, invalid("ttl: %v", err)
		}
		if n < 0 {
			return nil, invalid("ttl: must be at least 0, got %d", n)
		}
		if n > math.MaxInt32 {
			return nil, invalid("ttl: must be at most %d, got %d", math.MaxInt32, n)
		}
		j.TTL = int(n)
	}
	// The optional strings, each with its rule, in the order of jobFields.
	for _, f := range []struct {
		name  string
		check func(string) error
		dst   *string
	}{
		{"urgency", CheckUrgency, &j.Urgency},
		{"topic", CheckTopic, &j.Topic},
		{"vapid_key", checkVAPIDKey, &j.VAPIDKey},
		{"recipient", checkRecipient, &j.Recipient},
		{"campaign", CheckCampaignID, &j.Campaign},
	} {
		v, ok, err := optionalString(&fields, f.name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if err := f.check(v); err != nil {
			return nil, invalid("%s: %v", f.name, err)
		}
		*f.dst = v
	}
	if v, ok, err := optionalString(&fields, "class"); err != nil {
		return nil, err
	} else if ok {
		c, err := ParseClass(v)
		if err != nil {
			return nil, invalid("class: %v", err)
		}
		j.Class = c
	}
	if m, ok := fields.get("enqueued_at"); ok {
		t, err := decodeTime(m)
		if err != nil {
			return nil, invalid("enqueued_at: %v", err)
		}
		if t.Before(now) {
			j.EnqueuedAt = t
		}
	}
	if m, ok := fields.get("send_at"); ok {
		t, err := decodeTime(m)
		if err != nil {
			return nil, invalid("send_at: %v", err)
		}
		// 0001-01-01T00:00:00Z is the zero time.Time, which means "none" here; it is long past
		// like the unix epoch, so it is taken as that.
		if t.IsZero() {
			t = time.UnixMilli(0)
		}
		j.SendAt = t
	}
	return j, nil
}

func checkID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return invalid("id: must be 1 to %d characters, got %d", MaxIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return invalid("id: byte %d is not printable ASCII", i)
		}
	}
	return nil
}

func checkVAPIDKey(s string) error {
	if s == "" || len(s) > MaxVAPIDKeyLen || !isPrintableASCII(s) {
		return fmt.Errorf("must be 1 to %d printable ASCII characters", MaxVAPIDKeyLen)
	}
	return nil
}

func checkRecipient(s string) error {
	if len(s) > MaxRecipientLen {
		return fmt.Errorf("is %d bytes; at most %d", len(s), MaxRecipientLen)
	}
	return nil
}

// CheckCampaignID says why id cannot name a campaign, nil when it can: 1 to MaxCampaignIDLen
// letters, digits, '.', '_' and '-', so that it reads the same in a Redis key, a job id and
// a shell.
func CheckCampaignID(id string) error {
	if id == "" || len(id) > MaxCampaignIDLen {
		return fmt.Errorf("must be 1 to %d characters, got %d", MaxCampaignIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("byte %d is not a letter, a digit, '.', '_' or '-'", i)
		}
	}
	return nil
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// decodeSubscription decodes m into sub and returns the parses its checks made.
func decodeSubscription(m member, sub *Subscription) (Parsed, error) {
	if kindOf(m.raw) != "an object" {
		return Parsed{}, invalid("subscription: must be an object, got %s", kindOf(m.raw))
	}
	f, err := splitObject(m.raw, m.at, "subscription", subscriptionFields)
	if err != nil {
		return Parsed{}, err
	}
	ep, ok := f.get("endpoint")
	if !ok {
		return Parsed{}, invalid("subscription.endpoint: required")
	}
	if sub.Endpoint, err = stringOf(ep, "subscription.endpoint"); err != nil {
		return Parsed{}, err
	}
	u, err := checkEndpoint(sub.Endpoint)
	if err != nil {
		return Parsed{}, err
	}
	if et, ok := f.get("expirationTime"); ok {
		n, err := wholeOrFraction(et.raw)
		if err != nil {
			return Parsed{}, invalid("subscription.expirationTime: %v", err)
		}
		sub.ExpirationTime = &n
	}
	keys, ok := f.get("keys")
	if !ok {
		return Parsed{}, invalid("subscription.keys: required")
	}
	if kindOf(keys.raw) != "an object" {
		return Parsed{}, invalid("subscription.keys: must be an object, got %s", kindOf(keys.raw))
	}
	kf, err := splitObject(keys.raw, keys.at, "subscription.keys", keysFields)
	if err != nil {
		return Parsed{}, err
	}
	for _, k := range []struct {
		name string
		dst  *string
	}{{"p256dh", &sub.Keys.P256dh}, {"auth", &sub.Keys.Auth}} {
		v, ok := kf.get(k.name)
		if !ok {
			return Parsed{}, invalid("subscription.keys.%s: required", k.name)
		}
		if *k.dst, err = stringOf(v, "subscription.keys."+k.name); err != nil {
			return Parsed{}, err
		}
	}
	ek, err := ece.ParseKeys(sub.Keys.P256dh, sub.Keys.Auth)
	if err != nil {
		if errors.Is(err, ece.ErrBadAuth) {
			return Parsed{}, invalid("subscription.keys.auth: must be base64url of 16 bytes")
		}
		return Parsed{}, invalid("subscription.keys.p256dh: must be base64url of a 65-byte uncompressed P-256 point")
	}
	return Parsed{endpoint: sub.Endpoint, url: u, keys: sub.Keys, ece: ek}, nil
}

// DecodeSubscription decodes a PushSubscription JSON object on its own (what `gateway-worker
// send --subscription` reads) by the rules of a job's "subscription" member: the same checks,
// refused with the same reasons ("subscription.keys.auth: required", `subscription: unknown
// field "x"`). Like Decode it leaves routing to the caller (EndpointReason).
func DecodeSubscription(raw []byte) (Subscription, error) {
	var sub Subscription
	if len(raw) > MaxEntryBytes {
		return sub, invalid("subscription: is %d bytes; at most %d", len(raw), MaxEntryBytes)
	}
	// A job's members are valid JSON by the time they are read; this one must be shown to be.
	var whole json.RawMessage
	if err := json.Unmarshal(raw, &whole); err != nil {
		return sub, invalid("subscription: %s", jsonProblem(err))
	}
	_, err := decodeSubscription(member{raw: string(whole), at: len(raw) - len(bytes.TrimLeft(raw, " \t\r\n"))}, &sub)
	return sub, err
}

// checkEndpoint checks that the endpoint parses as an absolute URL with a host, and returns
// the parse. Whether its scheme and host may be delivered to is the provider registry's
// decision, at intake. The endpoint is never quoted: its path is a bearer credential.
func checkEndpoint(ep string) (*url.URL, error) {
	if ep == "" {
		return nil, invalid("subscription.endpoint: must not be empty")
	}
	if len(ep) > MaxEndpointLen {
		return nil, invalid("subscription.endpoint: is %d bytes; at most %d", len(ep), MaxEndpointLen)
	}
	u, err := url.Parse(ep)
	if err != nil {
		return nil, invalid("subscription.endpoint: not a valid URL")
	}
	if !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return nil, invalid("subscription.endpoint: not an absolute URL with a host")
	}
	return u, nil
}

// decodeBody reads payload, payload_encoding, ciphertext and notification.
func decodeBody(fields *members, j *Job) error {
	payload, hasPayload, err := optionalString(fields, "payload")
	if err != nil {
		return err
	}
	enc, hasEnc, err := optionalString(fields, "payload_encoding")
	if err != nil {
		return err
	}
	ct, hasCT, err := optionalString(fields, "ciphertext")
	if err != nil {
		return err
	}
	if hasPayload && hasCT {
		return invalid("payload and ciphertext: give one, not both")
	}
	note, hasNote := fields.get("notification")
	switch {
	case hasNote && hasPayload:
		return invalid("payload and notification: give one, not both")
	case hasNote && hasCT:
		return invalid("ciphertext and notification: give one, not both")
	}
	if hasEnc {
		if enc != "text" && enc != "base64" {
			return invalid("payload_encoding: must be text or base64")
		}
		if !hasPayload {
			return invalid("payload_encoding: given without payload")
		}
	}
	switch {
	case hasPayload && enc == "base64":
		b, err := decodeBase64(payload)
		if err != nil {
			return invalid("payload: not valid base64")
		}
		j.Payload = b
	case hasPayload:
		j.Payload = []byte(payload)
	case hasCT:
		b, err := decodeBase64(ct)
		if err != nil {
			return invalid("ciphertext: not valid base64")
		}
		if len(b) > MaxCiphertext {
			return invalid("ciphertext: is %d bytes; at most %d", len(b), MaxCiphertext)
		}
		if err := checkAES128GCM(b); err != nil {
			return err
		}
		j.Ciphertext = b
	case hasNote:
		n, err := decodeNotification(note)
		if err != nil {
			return err
		}
		j.Notification, j.Payload = n, n.Render()
		if len(j.Payload) > MaxPayload {
			return invalid("notification: renders to %d bytes of JSON, %d over the %d a payload may have (one %d-byte aes128gcm body)",
				len(j.Payload), len(j.Payload)-MaxPayload, MaxPayload, MaxBody)
		}
	}
	if err := CheckPayload(len(j.Payload)); err != nil {
		return invalid("payload: %v", err)
	}
	return nil
}

// checkAES128GCM checks the RFC 8188 header: salt(16) rs(4) idlen(1) keyid(idlen), then at least
// one record holding the 16-byte tag and the padding delimiter.
func checkAES128GCM(b []byte) error {
	const fixed = 16 + 4 + 1
	if len(b) < fixed {
		return invalid("ciphertext: not an aes128gcm body (%d bytes is shorter than its header)", len(b))
	}
	rs := binary.BigEndian.Uint32(b[16:20])
	idlen := int(b[20])
	if rs < 18 {
		return invalid("ciphertext: not an aes128gcm body (record size %d is below 18)", rs)
	}
	if len(b) < fixed+idlen+17 {
		return invalid("ciphertext: not an aes128gcm body (%d bytes leaves no record after the header)", len(b))
	}
	return nil
}
