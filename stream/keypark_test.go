package stream

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestKeyParksThroughTheHeartbeat: a park one replica hands its heartbeat is what every
// replica's next beat and the operators' read (Keyspace.KeyParks); a shorter park of the same
// sender leaves it; it ends on its own at its time, and the hash expires with its last park.
func TestKeyParksThroughTheHeartbeat(t *testing.T) {
	env := newEnv(t)
	a := env.store(t, "replica-a", Options{})
	b := env.store(t, "replica-b", Options{})
	t0 := time.UnixMilli(1_800_000_000_000)
	day := t0.Add(24 * time.Hour)
	park := KeyPark{Provider: "fcm", Key: "a", Until: day, Reason: "RATE_LIMITED 429, Retry-After 24h0m0s", By: "replica-a", At: t0}
	if _, err := a.Heartbeat(env.ctx, t0, time.Minute, "", park); err != nil {
		t.Fatal(err)
	}
	// A shorter park of the same sender, and one of another provider's sender.
	short := park
	short.Until, short.Reason = t0.Add(time.Minute), "shorter"
	other := KeyPark{Provider: "wns", Key: "a", Until: t0.Add(time.Hour), At: t0, By: "replica-b"}
	beat, err := b.Heartbeat(env.ctx, t0.Add(time.Second), time.Minute, "", short, other)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]KeyPark{park, other}, beat.KeyParks); d != "" {
		t.Errorf("parks after the second beat (-want +got):\n%s", d)
	}
	insp := NewKeyspace(env.c, Options{})
	got, err := insp.KeyParks(env.ctx, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]KeyPark{park}, got); d != "" {
		t.Errorf("parks two hours in, after wns's ended (-want +got):\n%s", d)
	}
	if got, err = insp.KeyParks(env.ctx, day); err != nil || len(got) != 0 {
		t.Errorf("parks at the Retry-After's end: %v, %v; want none", got, err)
	}
	if n, _ := env.c.Exists(env.ctx, keyParksKey("")).Result(); n != 0 {
		t.Error("the parks hash outlived its last park")
	}
}
