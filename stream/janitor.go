package stream

import (
	_ "embed"

	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed clean_consumer.lua
	cleanConsumerLua    string
	cleanConsumerScript = redis.NewScript(cleanConsumerLua)
)

// CleanConsumers deletes the consumers of stream's group that have no pending entries and have
// been idle longer than idle; this consumer is never deleted. Every restarted worker is a new
// consumer, so without this the group's consumer list grows forever. Each deletion re-checks
// its conditions atomically in a script.
func (s *Store) CleanConsumers(ctx context.Context, shard int, stream string, idle time.Duration) (removed []string, err error) {
	_ = shard // every key of the call is the stream itself; shard is kept for symmetry with the callers
	consumers, err := s.c.XInfoConsumers(ctx, stream, Group).Result()
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOGROUP") || strings.Contains(err.Error(), "no such key") {
			return nil, nil
		}
		return nil, fmt.Errorf("stream: list consumers of %s: %w", stream, err)
	}
	for _, c := range consumers {
		if c.Name == s.o.Consumer || c.Pending != 0 || c.Idle <= idle {
			continue
		}
		ok, err := s.runBool(ctx, cleanConsumerScript, "clean consumer", []string{stream},
			Group, c.Name, idle.Milliseconds(), s.o.Consumer)
		if err != nil {
			return removed, err
		}
		if ok {
			removed = append(removed, c.Name)
		}
	}
	return removed, nil
}
