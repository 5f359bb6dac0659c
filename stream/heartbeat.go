package stream

import (
	_ "embed"

	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed heartbeat.lua
	heartbeatLua    string
	heartbeatScript = redis.NewScript(heartbeatLua)
)

// Beat is what a heartbeat learned: the consumer names of the live replicas, this one
// included, the providers an operator paused (Pause) and the senders parked (KeyPark).
type Beat struct {
	Live     []string
	Paused   []string
	KeyParks []KeyPark
}

// Heartbeat records this replica (its consumer name) as alive at now with its state (published
// for `gateway-worker status`; any JSON), forgets replicas whose last heartbeat is more than
// staleAfter before now, and returns the live ones and the paused providers. One script call:
// one round trip, and no replica can see a list that misses itself. It runs even when Redis is
// out of memory. A second call (which runs out of memory too) records parks, the senders this
// replica learnt to park since its last beat, and returns every park in force; its failure
// fails the beat too, so the caller hands the same parks to the next one.
//
// Every replica passes its own clock: clocks must agree to well within staleAfter (NTP does).
// A replica that dies stops counting staleAfter after its last heartbeat; one that shuts down
// cleanly calls Leave and stops counting at once.
func (s *Store) Heartbeat(ctx context.Context, now time.Time, staleAfter time.Duration, state string, parks ...KeyPark) (Beat, error) {
	if s.o.Consumer == "" {
		return Beat{}, errors.New("stream: Options.Consumer is empty; a heartbeating Store needs a consumer name")
	}
	if staleAfter <= 0 {
		return Beat{}, fmt.Errorf("stream: heartbeat: staleAfter %s is not positive", staleAfter)
	}
	if state == "" {
		state = "{}"
	}
	v, err := heartbeatScript.Run(ctx, s.c, []string{ReplicasKey(s.o.Prefix), StatesKey(s.o.Prefix), PausedKey(s.o.Prefix)},
		s.o.Consumer, ms(now), durMs(staleAfter), state).Slice()
	if err != nil {
		return Beat{}, fmt.Errorf("stream: heartbeat: %w", err)
	}
	if len(v) != 2 {
		return Beat{}, fmt.Errorf("stream: heartbeat: unexpected reply %v", v)
	}
	kp, err := keyParks(ctx, s.c, s.o.Prefix, now, parks)
	if err != nil {
		return Beat{}, fmt.Errorf("stream: heartbeat: %w", err)
	}
	return Beat{Live: stringsOf(v[0]), Paused: stringsOf(v[1]), KeyParks: kp}, nil
}

// stringsOf is a reply's array of strings.
func stringsOf(x any) []string {
	a, _ := x.([]any)
	out := make([]string, 0, len(a))
	for _, v := range a {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Leave removes this replica from the live set, so the others take its share of every rate at
// their next heartbeat instead of staleAfter later. Call it on clean shutdown, after the last
// send.
func (s *Store) Leave(ctx context.Context) error {
	if s.o.Consumer == "" {
		return nil
	}
	pipe := s.c.TxPipeline() // both keys share the {hb} tag
	pipe.ZRem(ctx, ReplicasKey(s.o.Prefix), s.o.Consumer)
	pipe.HDel(ctx, StatesKey(s.o.Prefix), s.o.Consumer)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("stream: leave: %w", err)
	}
	return nil
}
