package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// Pause is an operator's pause of a provider: every replica's lanes of it stop reading at their
// next heartbeat, and its jobs wait in Redis, spending nothing, until Resume.
type Pause struct {
	Provider string    `json:"provider"`
	Reason   string    `json:"reason,omitempty"`
	By       string    `json:"by,omitempty"`
	At       time.Time `json:"at"`
}

// PauseProvider records p. Pausing a paused provider replaces the record.
func (s *Inspector) PauseProvider(ctx context.Context, p Pause) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := s.c.HSet(ctx, stream.PausedKey(s.o.Prefix), p.Provider, b).Err(); err != nil {
		return fmt.Errorf("inspect: pause %s: %w", p.Provider, err)
	}
	return nil
}

// ResumeProvider removes provider's pause; false when it was not paused.
func (s *Inspector) ResumeProvider(ctx context.Context, provider string) (bool, error) {
	n, err := s.c.HDel(ctx, stream.PausedKey(s.o.Prefix), provider).Result()
	if err != nil {
		return false, fmt.Errorf("inspect: resume %s: %w", provider, err)
	}
	return n == 1, nil
}

// Pauses lists the paused providers, by provider id.
func (s *Inspector) Pauses(ctx context.Context) ([]Pause, error) {
	m, err := s.c.HGetAll(ctx, stream.PausedKey(s.o.Prefix)).Result()
	if err != nil {
		return nil, fmt.Errorf("inspect: pauses: %w", err)
	}
	out := make([]Pause, 0, len(m))
	for id, raw := range m {
		p := Pause{Provider: id}
		_ = json.Unmarshal([]byte(raw), &p) // a record written by hand still pauses
		p.Provider = id
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out, nil
}

// ReplicaState is one live replica as its last heartbeat described it.
type ReplicaState struct {
	Consumer string
	LastSeen time.Time
	// State is what the replica published (the worker: version and breaker state by provider).
	State json.RawMessage
}

// Worker is the state r published, as a worker publishes it; a replica that published none (or
// another kind of state) shows none.
func (r ReplicaState) Worker() stream.WorkerState {
	var w stream.WorkerState
	_ = json.Unmarshal(r.State, &w)
	if w.Breakers == nil {
		w.Breakers = map[string]string{}
	}
	return w
}

// Replicas lists the replicas whose heartbeat is at most staleAfter older than now, with the
// state each published, by consumer name.
func (s *Inspector) Replicas(ctx context.Context, now time.Time, staleAfter time.Duration) ([]ReplicaState, error) {
	pipe := s.c.TxPipeline()
	seen := pipe.ZRangeWithScores(ctx, stream.ReplicasKey(s.o.Prefix), 0, -1)
	states := pipe.HGetAll(ctx, stream.StatesKey(s.o.Prefix))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("inspect: replicas: %w", err)
	}
	var out []ReplicaState
	for _, z := range seen.Val() {
		name, _ := z.Member.(string)
		at := time.UnixMilli(int64(z.Score))
		if now.Sub(at) > staleAfter {
			continue
		}
		st := states.Val()[name]
		if st == "" {
			st = "{}"
		}
		out = append(out, ReplicaState{Consumer: name, LastSeen: at, State: json.RawMessage(st)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Consumer < out[j].Consumer })
	return out, nil
}
