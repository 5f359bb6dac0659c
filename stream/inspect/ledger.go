package inspect

import (
	"context"
	"strconv"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// Results calls fn with every ledger record of every shard, oldest first within a shard. It
// reads whole streams a thousand entries a round trip: for reports and the demo, not a hot
// path. Reading does not consume: the ledger is the upstream's to trim or read with its own
// group.
func (s *Inspector) Results(ctx context.Context, fn func(stream.Result)) error {
	for shard := range s.Shards() {
		err := s.scanStream(ctx, s.Keys(shard).Results, func(_ string, f map[string]any) {
			fn(stream.Result{
				ID: str(f["id"]), Provider: str(f["provider"]), Code: str(f["code"]),
				Status: atoi(f["status"]), Detail: str(f["detail"]), Attempt: atoi(f["attempt"]),
				Latency:  time.Duration(atoi(f["latency_ms"])) * time.Millisecond,
				At:       time.UnixMilli(int64(atoi(f["at"]))),
				Campaign: str(f["campaign"]), Recipient: str(f["recipient"]),
			})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// DeadRecords calls fn with every dead-letter record of every shard, oldest first within a
// shard; like Results, it is for reports.
func (s *Inspector) DeadRecords(ctx context.Context, fn func(stream.DeadRecord)) error {
	for shard := range s.Shards() {
		err := s.scanStream(ctx, s.Keys(shard).Dead, func(_ string, f map[string]any) {
			fn(stream.DeadRecord{
				ID: str(f["id"]), Code: str(f["code"]), Reason: str(f["reason"]), Attempt: atoi(f["attempt"]),
				Provider: str(f["provider"]), Job: str(f["job"]), At: time.UnixMilli(int64(atoi(f["at"]))),
				Campaign: str(f["campaign"]), Recipient: str(f["recipient"]),
			})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func atoi(v any) int {
	n, _ := strconv.Atoi(str(v))
	return n
}
