package dispatch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/ece"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// TestMessageCarriesTheDecodesParse: the message a lane sends carries the parse its decode of
// the entry made (job.Parsed), so that the adapter neither parses the endpoint nor the keys
// again.
func TestMessageCarriesTheDecodesParse(t *testing.T) {
	u := newUnitLane(t, "apple")
	var (
		mu   sync.Mutex
		seen []*adapter.Message
	)
	u.sender.answer = func(_ context.Context, m *adapter.Message) taxonomy.Outcome {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m)
		return taxonomy.Outcome{Code: taxonomy.Accepted, Status: 201, Provider: "apple"}
	}
	u.deliver(t, u.entry("a", 0, time.Second, "web.push.apple.com"), false)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("%d sends, want 1", len(seen))
	}
	m := seen[0]
	if m.Parsed.URL(m.Subscription.Endpoint) == nil {
		t.Error("the message carries no parse of its endpoint")
	}
	if m.Parsed.Keys(m.Subscription.Keys) == nil {
		t.Error("the message carries no parse of its keys")
	}
}

// BenchmarkLaneJobParses is the parse work one job costs a lane, from its entry to the keys
// its send encrypts to: the decode, the host breaker's routing (hostKey), the adapter's routing
// and the keys. "again" is each stage parsing the endpoint and the keys for itself, as they
// did before job.Parsed; "parsed" is the stages taking the decode's parse.
func BenchmarkLaneJobParses(b *testing.B) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reg, err := providers.Parse("registry.yaml", []byte(unitRegistry))
	if err != nil {
		b.Fatal(err)
	}
	l := &lane{laneParams: laneParams{cfg: &Config{Registry: reg}}}
	raw := string(job("job-000123456", unitSub("web.push.apple.com"), strings.Repeat("x", 256), "ttl", 3600, "urgency", "normal"))
	e := laneEntry(raw, 0, now.Add(-time.Second))
	b.Run("again", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lj, err := parseLaneEntry(e, now)
			if err != nil {
				b.Fatal(err)
			}
			sub := lj.job.Subscription
			if _, err := reg.Resolve(sub.Endpoint); err != nil { // hostKey
				b.Fatal(err)
			}
			if _, err := reg.Resolve(sub.Endpoint); err != nil { // adapter.Sender.Send
				b.Fatal(err)
			}
			if _, err := ece.ParseKeys(sub.Keys.P256dh, sub.Keys.Auth); err != nil { // the encryption
				b.Fatal(err)
			}
		}
	})
	b.Run("parsed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lj, err := parseLaneEntry(e, now)
			if err != nil {
				b.Fatal(err)
			}
			sub := lj.job.Subscription
			_ = l.hostKey(lj.job)
			if _, err := reg.ResolveParsed(sub.Endpoint, lj.job.Parsed.URL(sub.Endpoint)); err != nil {
				b.Fatal(err)
			}
			if lj.job.Parsed.Keys(sub.Keys) == nil {
				b.Fatal("no parse of the keys")
			}
		}
	})
}
