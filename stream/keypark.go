package stream

import (
	_ "embed"

	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed keypark.lua
	keyParkLua    string
	keyParkScript = redis.NewScript(keyParkLua)
)

// KeyPark is a sender (one VAPID key name on one provider) that a push service asked to wait
// longer than a retry can (a RATE_LIMITED answer whose Retry-After passes the retry policy's
// cap): every replica's lanes of the provider hold that key's jobs in the delayed set until
// Until, and send the provider's other keys' jobs as before. It ends on its own at Until.
type KeyPark struct {
	Provider string    `json:"provider"`
	Key      string    `json:"key"`
	Until    time.Time `json:"-"`
	Reason   string    `json:"reason,omitempty"`
	By       string    `json:"by,omitempty"` // the replica that learnt it
	At       time.Time `json:"at"`
}

// keyParkJSON is a KeyPark as the hash holds it: Until in unix ms, which the script compares.
type keyParkJSON struct {
	KeyPark
	UntilMs int64 `json:"until_ms"`
}

// keyParksKey is the HASH of the parked senders under prefix: "<provider>/<key>" -> JSON. It
// shares the heartbeat's "{hb}" slot: one for the fleet, whatever the number of shards.
func keyParksKey(prefix string) string {
	return orDefaultPrefix(prefix) + ":{hb}:keypause"
}

// keyParks records parks (any number, none included) at now and returns every park in force,
// by provider and key.
func keyParks(ctx context.Context, c redis.Scripter, prefix string, now time.Time, parks []KeyPark) ([]KeyPark, error) {
	args := []any{ms(now)}
	for _, p := range parks {
		b, err := json.Marshal(keyParkJSON{KeyPark: p, UntilMs: ms(p.Until)})
		if err != nil {
			return nil, err
		}
		args = append(args, p.Provider+"/"+p.Key, string(b))
	}
	v, err := keyParkScript.Run(ctx, c, []string{keyParksKey(prefix)}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("stream: key parks: %w", err)
	}
	out := make([]KeyPark, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		var p keyParkJSON
		if json.Unmarshal([]byte(v[i+1]), &p) != nil || p.Provider == "" || p.Key == "" {
			continue // not written by a worker
		}
		p.Until = time.UnixMilli(p.UntilMs)
		out = append(out, p.KeyPark)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Provider != out[j].Provider {
			return out[i].Provider < out[j].Provider
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

// KeyParks lists the senders parked at now (KeyPark), by provider and key.
func (s *Keyspace) KeyParks(ctx context.Context, now time.Time) ([]KeyPark, error) {
	return keyParks(ctx, s.c, s.o.Prefix, now, nil)
}
