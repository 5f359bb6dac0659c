package inspect

import (
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestHeartbeatCarriesStatesAndPauses: a replica's published state is listed with it while it
// is live and goes with it when it goes stale or leaves; the providers an operator paused come
// back with every beat until resumed.
func TestHeartbeatCarriesStatesAndPauses(t *testing.T) {
	const stale = 5 * time.Second
	env := newEnv(t)
	a := env.store(t, "replica-a", stream.Options{})
	b := env.store(t, "replica-b", stream.Options{})
	if _, err := a.Heartbeat(env.ctx, t0, stale, `{"breakers":{"fcm":"closed"}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Heartbeat(env.ctx, t0, stale, `{"breakers":{"fcm":"open"}}`); err != nil {
		t.Fatal(err)
	}
	reps, err := inspectorOf(a).Replicas(env.ctx, t0, stale)
	if err != nil || len(reps) != 2 || string(reps[1].State) != `{"breakers":{"fcm":"open"}}` || !reps[0].LastSeen.Equal(t0) {
		t.Fatalf("Replicas = %+v, %v", reps, err)
	}
	if err := inspectorOf(a).PauseProvider(env.ctx, Pause{Provider: "autopush", Reason: "incident 42", By: "ops", At: t0}); err != nil {
		t.Fatal(err)
	}
	beat, err := b.Heartbeat(env.ctx, t0.Add(time.Second), stale, `{}`)
	if err != nil || len(beat.Paused) != 1 || beat.Paused[0] != "autopush" {
		t.Fatalf("Heartbeat after a pause = %+v, %v", beat, err)
	}
	ps, err := inspectorOf(a).Pauses(env.ctx)
	if err != nil || len(ps) != 1 || ps[0].Reason != "incident 42" || ps[0].By != "ops" || !ps[0].At.Equal(t0) {
		t.Fatalf("Pauses = %+v, %v", ps, err)
	}
	// a goes stale: b's next beat forgets it and its state.
	if _, err := b.Heartbeat(env.ctx, t0.Add(stale+2*time.Second), stale, `{}`); err != nil {
		t.Fatal(err)
	}
	if n := env.c.HLen(env.ctx, "wp:{hb}:states").Val(); n != 1 {
		t.Errorf("%d states after a went stale, want 1", n)
	}
	if ok, err := inspectorOf(a).ResumeProvider(env.ctx, "autopush"); !ok || err != nil {
		t.Fatalf("Resume = %v, %v", ok, err)
	}
	if ok, _ := inspectorOf(a).ResumeProvider(env.ctx, "autopush"); ok {
		t.Error("a second Resume found a pause")
	}
	if err := b.Leave(env.ctx); err != nil {
		t.Fatal(err)
	}
	if reps, _ := inspectorOf(a).Replicas(env.ctx, t0.Add(stale+2*time.Second), stale); len(reps) != 0 {
		t.Errorf("Replicas after the last one left = %+v", reps)
	}
}
