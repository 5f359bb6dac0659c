package job

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func testSub() string {
	return `{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}`
}

func TestKindOf(t *testing.T) {
	for raw, want := range map[string]Kind{
		validJob("a"):                     KindJob,
		` { "create_campaign": {}}`:       KindCreateCampaign,
		`{"add_recipients":{}}`:           KindAddRecipients,
		`{"id":"x","create_campaign":{}}`: KindJob, // not first: a job, which Decode refuses
		`[]`:                              KindJob,
		``:                                KindJob,
	} {
		if got := KindOf(raw); got != want {
			t.Errorf("KindOf(%q) = %v, want %v", raw, got, want)
		}
	}
}

// TestDecodeCampaign: a campaign's message is checked by the job rules, its class is bulk
// unless it says otherwise, and each recipient's job, made of it, decodes with the campaign's
// values and the recipient's own.
func TestDecodeCampaign(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c, err := DecodeCampaign(`{"create_campaign":{"id":"spring-1","payload":"hi","ttl":60,"urgency":"high","topic":"sale","rate":12.5,"send_at":"2026-12-01T10:00:00Z"}}`, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "spring-1" || c.Class != ClassBulk || c.TTL != 60 || c.Rate != 12.5 || !c.SendAt.Equal(now.Add(10*time.Hour)) || c.VAPIDKey != DefaultVAPIDKey {
		t.Errorf("campaign %+v", c)
	}
	raw := CampaignJob(c, 7, "user \"7\"", testSub())
	j, err := DecodeString(raw, now)
	if err != nil {
		t.Fatalf("the recipient's job %s: %v", raw, err)
	}
	if j.ID != "spring-1/7" || j.Campaign != "spring-1" || j.Recipient != `user "7"` || string(j.Payload) != "hi" ||
		j.Class != ClassBulk || j.Urgency != "high" || j.Topic != "sale" || j.TTL != 60 || j.Subscription.Endpoint != testEndpoint {
		t.Errorf("recipient job %+v", j)
	}
	if !j.SendAt.IsZero() {
		t.Error("a recipient's job carries the campaign's send_at: the campaign waits for it, not each job")
	}
	tx, err := DecodeCampaign(`{"create_campaign":{"id":"otp","notification":{"title":"Code","navigate":"https://x.example/"},"class":"transactional"}}`, now)
	if err != nil || tx.Class != ClassTransactional {
		t.Fatalf("transactional campaign: %+v, %v", tx, err)
	}
	if c, err := DecodeCampaign(`{"create_campaign":{"id":"n","payload":"x","class":null,"ttl":null}}`, now); err != nil || c.Class != ClassBulk || c.TTL != DefaultTTL {
		t.Fatalf("null class and ttl: %+v, %v; want the defaults (bulk, %d)", c, err, DefaultTTL)
	}

	for raw, want := range map[string]string{
		`{"create_campaign":{"payload":"x"}}`:                                   "create_campaign.id: required",
		`{"create_campaign":{"id":"a/b","payload":"x"}}`:                        "create_campaign.id: byte 1",
		`{"create_campaign":{"id":"a","ciphertext":"AAAA"}}`:                    "create_campaign.ciphertext: a campaign's payload is encrypted for each subscription",
		`{"create_campaign":{"id":"a","payload":"x","subscription":{}}}`:        `create_campaign: unknown field "subscription"`,
		`{"create_campaign":{"id":"a","payload":"x","rate":-1}}`:                "create_campaign.rate: must be a number from 0",
		`{"create_campaign":{"id":"a","payload":"x","ttl":-5}}`:                 "create_campaign.ttl: must be at least 0",
		`{"create_campaign":{"id":"a","payload":"x","class":"vip"}}`:            "create_campaign.class:",
		`{"create_campaign":{"id":"a","payload":"x","send_at":"tomorrow"}}`:     "create_campaign.send_at:",
		`{"create_campaign":{"id":"a","payload":"x"},"add_recipients":{}}`:      `exactly one member, "create_campaign"`,
		`{"create_campaign":{"id":"a","payload":"x","urgency":"now-please"}}`:   "create_campaign.urgency:",
		`{"create_campaign":{"id":"` + strings.Repeat("a", 65) + `"}}`:          "create_campaign.id: must be 1 to 64 characters",
		`{"create_campaign":[1]}`:                                               "create_campaign: must be an object",
		`{"create_campaign":{"id":"a","payload":"x","payload_encoding":"b64"}}`: "create_campaign.payload_encoding",
	} {
		_, err := DecodeCampaign(raw, now)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeCampaign(%s) = %v, want an error with %q", raw, err, want)
		}
	}
}

// TestDecodeRecipients: both shapes of a recipient; a bad one is marked with its reason and
// the others kept; a batch over the limit, or without its campaign, is refused whole.
func TestDecodeRecipients(t *testing.T) {
	sub := testSub()
	raw := `{"add_recipients":{"campaign":"c1","recipients":[` + sub + `,{"recipient":"u-2","subscription":` + sub + `},` +
		`{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `"}},{"recipient":"u-4"},{"recipient":"u-5","subscription":` + sub + `,"x":1}]}}`
	id, batch, rs, err := DecodeRecipients(raw)
	if err != nil || id != "c1" || batch != "" || len(rs) != 5 {
		t.Fatalf("DecodeRecipients: %q, %d, %v", id, len(rs), err)
	}
	if _, b, _, err := DecodeRecipients(`{"add_recipients":{"campaign":"c","batch":"run-1","recipients":[]}}`); err != nil || b != "run-1" {
		t.Errorf("batch id: %q, %v", b, err)
	}
	if rs[0].Invalid != nil || rs[0].Key != "" || rs[0].Subscription.Endpoint != testEndpoint || rs[0].Compact != sub {
		t.Errorf("plain recipient %+v", rs[0])
	}
	if rs[1].Invalid != nil || rs[1].Key != "u-2" || rs[1].Compact != sub {
		t.Errorf("wrapped recipient %+v", rs[1])
	}
	for i, want := range map[int]string{2: "subscription.keys.auth: required", 3: "subscription: required", 4: `unknown field "x"`} {
		if rs[i].Invalid == nil || !strings.Contains(rs[i].Invalid.Error(), want) {
			t.Errorf("recipient %d: %v, want %q", i, rs[i].Invalid, want)
			continue
		}
		if strings.Contains(rs[i].Invalid.Error(), "SECRET") {
			t.Errorf("recipient %d's reason quotes the endpoint: %v", i, rs[i].Invalid)
		}
	}
	many := make([]json.RawMessage, MaxRecipientsPerBatch+1)
	for i := range many {
		many[i] = json.RawMessage(`{}`) // the count is checked before any recipient
	}
	b, _ := json.Marshal(map[string]any{"add_recipients": map[string]any{"campaign": "c", "recipients": many}})
	for raw, want := range map[string]string{
		string(b):                              "add_recipients.recipients: 1001 in one batch; at most 1000",
		`{"add_recipients":{"recipients":[]}}`: "add_recipients.campaign: required",
		`{"add_recipients":{"campaign":"a b","recipients":[]}}`:                                         "add_recipients.campaign: byte 1",
		`{"add_recipients":{"campaign":"a","recipients":{}}}`:                                           "add_recipients.recipients: must be an array",
		`{"add_recipients":{"campaign":"a","recipients":[1]`:                                            "job:",
		`{"add_recipients":{"campaign":"a","batch":"` + strings.Repeat("b", 65) + `","recipients":[]}}`: "add_recipients.batch: must be at most 64",
	} {
		if _, _, _, err := DecodeRecipients(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeRecipients(%.80s) = %v, want %q", raw, err, want)
		}
	}
}

// FuzzDecodeCampaignEntries: neither decoder panics, a campaign that decodes makes recipient
// jobs that decode with its values, and a recipient marked valid has a subscription the job
// rules accept.
func FuzzDecodeCampaignEntries(f *testing.F) {
	sub := testSub()
	f.Add(`{"create_campaign":{"id":"a","payload":"hi","ttl":5,"rate":1}}`)
	f.Add(`{"create_campaign":{"id":"a","notification":{"title":"t","navigate":"https://x.example/"},"class":"bulk","send_at":1700000000000}}`)
	f.Add(`{"create_campaign":{"id":"a","payload":"AAEC","payload_encoding":"base64","topic":"t","urgency":"low","vapid_key":"k"}}`)
	f.Add(`{"add_recipients":{"campaign":"c","recipients":[` + sub + `,{"recipient":"r","subscription":` + sub + `}]}}`)
	f.Add(`{"add_recipients":{"campaign":"c","recipients":[1,null,"x",{}]}}`)
	f.Add("{\"create_campaign\":{\"id\":\"a\",\"payload\":\"\xff\"}}")
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw string) {
		if c, err := DecodeCampaign(raw, now); err == nil {
			j, err := DecodeString(CampaignJob(c, 1, "k", sub), now)
			if err != nil {
				t.Fatalf("campaign %+v decoded, its recipient's job does not: %v", c, err)
			}
			if j.Campaign != c.ID || j.Class != c.Class || j.TTL != c.TTL || j.VAPIDKey != c.VAPIDKey {
				t.Fatalf("recipient job %+v does not carry campaign %+v", j, c)
			}
		}
		if _, _, rs, err := DecodeRecipients(raw); err == nil {
			for _, r := range rs {
				if r.Invalid != nil {
					continue
				}
				if _, err := DecodeSubscription([]byte(r.Compact)); err != nil {
					t.Fatalf("recipient %q marked valid, its subscription is not: %v", r.Raw, err)
				}
			}
		}
	})
}

// TestWithMessageMakesTheRecipientsJob: a recipient's reference, as the expansion writes it
// (the job of a campaign without a message), joined with the campaign's message is the job
// CampaignJob makes; a campaign without message members leaves the reference as it is.
func TestWithMessageMakesTheRecipientsJob(t *testing.T) {
	c, err := DecodeCampaign(`{"create_campaign":{"id":"c","payload":"hi","ttl":60}}`, t0)
	if err != nil {
		t.Fatal(err)
	}
	sub := `{"endpoint":"https://push.example/x","keys":{"p256dh":"k","auth":"a"}}`
	ref := CampaignJob(&Campaign{ID: "c"}, 7, "r", sub)
	if got, want := WithMessage(ref, c.Message), CampaignJob(c, 7, "r", sub); got != want {
		t.Errorf("WithMessage = %s, want %s", got, want)
	}
	if got := WithMessage(ref, ""); got != ref {
		t.Errorf("WithMessage of no message = %s, want the reference", got)
	}
}
