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

// Heartbeat records this replica (its consumer name) as alive at now, forgets replicas whose
// last heartbeat is more than staleAfter before now, and returns the consumer names of the
// live ones, this one included. One script call: one round trip, and no replica can see a list
// that misses itself. It runs even when Redis is out of memory.
//
// Every replica passes its own clock: clocks must agree to well within staleAfter (NTP does).
// A replica that dies stops counting staleAfter after its last heartbeat; one that shuts down
// cleanly calls Leave and stops counting at once.
func (s *Store) Heartbeat(ctx context.Context, now time.Time, staleAfter time.Duration) (live []string, err error) {
	if s.o.Consumer == "" {
		return nil, errors.New("stream: Options.Consumer is empty; a heartbeating Store needs a consumer name")
	}
	if staleAfter <= 0 {
		return nil, fmt.Errorf("stream: heartbeat: staleAfter %s is not positive", staleAfter)
	}
	live, err = heartbeatScript.Run(ctx, s.c, []string{ReplicasKey(s.o.Prefix)},
		s.o.Consumer, ms(now), durMs(staleAfter)).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("stream: heartbeat: %w", err)
	}
	return live, nil
}

// Leave removes this replica from the live set, so the others take its share of every rate at
// their next heartbeat instead of staleAfter later. Call it on clean shutdown, after the last
// send.
func (s *Store) Leave(ctx context.Context) error {
	if s.o.Consumer == "" {
		return nil
	}
	if err := s.c.ZRem(ctx, ReplicasKey(s.o.Prefix), s.o.Consumer).Err(); err != nil {
		return fmt.Errorf("stream: leave: %w", err)
	}
	return nil
}
