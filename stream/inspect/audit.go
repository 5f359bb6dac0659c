package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/internal/scan"
)

// AuditReport says, for a list of job ids, how many terminal records each has. At quiescence
// every id must have exactly one; an id with none is either still on its way (NoneWhere says
// where) or lost ("nowhere").
type AuditReport struct {
	Total, ExactlyOne, None, MoreThanOne int
	// NoneWhere counts the ids without a terminal record by where they are: "intake",
	// "lane:<provider>" (unread), "pending" (read by a consumer, not finished), "delayed", or
	// "nowhere" (lost).
	NoneWhere map[string]int
	// Missing are the ids without a terminal record, Duplicated those with more than one.
	Missing    []string
	Duplicated []string
}

// Audit reads the ledger and the dead stream of every shard and reports how many terminal
// records each of ids has (a ledger or a dead record, INVALID_JOB included), and counts those
// records by outcome code (the ledger's and the dead stream's codes), in the same reads. Every
// shard means those the Inspector reads and any a larger shard count left (auditShards). It
// reads whole streams: an operator's tool, not a hot path. Records trimmed past the streams'
// bounds (the workers' stream.Options.ResultsMaxLen, DeadMaxLen: Store.TrimRecords) are gone
// and their ids report as missing.
func (s *Inspector) Audit(ctx context.Context, ids []string) (AuditReport, map[string]int, error) {
	rep := AuditReport{Total: len(ids), NoneWhere: map[string]int{}}
	byCode := map[string]int{}
	if err := s.ks.VerifyShards(ctx); err != nil {
		return rep, byCode, err
	}
	shards, err := s.auditShards(ctx)
	if err != nil {
		return rep, byCode, err
	}
	want := make(map[string]int, len(ids))
	for _, id := range ids {
		want[id] = 0
	}
	for _, shard := range shards {
		k := s.Keys(shard)
		for _, st := range []string{k.Results, k.Dead} {
			err := s.scanStream(ctx, st, func(_ string, f map[string]any) {
				if id, ok := f["id"].(string); ok {
					if _, ok := want[id]; ok {
						want[id]++
						code, _ := f["code"].(string)
						byCode[code]++
					}
				}
			})
			if err != nil {
				return rep, byCode, err
			}
		}
	}
	var missing []string
	for _, id := range ids {
		switch n := want[id]; {
		case n == 0:
			missing = append(missing, id)
		case n == 1:
			rep.ExactlyOne++
		default:
			rep.MoreThanOne++
			rep.Duplicated = append(rep.Duplicated, id)
		}
	}
	rep.None = len(missing)
	rep.Missing = missing
	if len(missing) == 0 {
		return rep, byCode, nil
	}
	where, err := s.locate(ctx, shards, missing)
	if err != nil {
		return rep, byCode, err
	}
	for _, id := range missing {
		w := where[id]
		if w == "" {
			w = "nowhere"
		}
		rep.NoneWhere[w]++
	}
	return rep, byCode, nil
}

// locate finds where each of ids is waiting on shards: delayed, a lane, the intake, pending, or
// a campaign's list ("campaign", a recipient not expanded into a lane yet).
func (s *Inspector) locate(ctx context.Context, shards []int, ids []string) (map[string]string, error) {
	look := make(map[string]bool, len(ids))
	for _, id := range ids {
		look[id] = true
	}
	where := map[string]string{}
	for _, shard := range shards {
		k := s.Keys(shard)
		members, err := s.c.ZRange(ctx, k.Delayed, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("inspect: audit delayed: %w", err)
		}
		for _, m := range members {
			if look[m] && where[m] == "" {
				where[m] = "delayed"
			}
		}
		if err := s.locateQueued(ctx, shard, look, where); err != nil {
			return nil, err
		}
		lanes, err := s.ks.Lanes(ctx, shard)
		if err != nil {
			return nil, err
		}
		streams := map[string]string{k.Intake: "intake", k.BulkIntake: "intake"}
		for _, p := range lanes {
			for _, c := range job.Classes {
				streams[k.LaneOf(p, c)] = stream.LaneName(p, c)
			}
		}
		for st, name := range streams {
			pending, err := s.pendingIDs(ctx, st)
			if err != nil {
				return nil, err
			}
			err = s.scanStream(ctx, st, func(entryID string, f map[string]any) {
				raw, _ := f["job"].(string)
				id := jobID(raw)
				if !look[id] || where[id] != "" {
					return
				}
				if pending[entryID] {
					where[id] = "pending"
				} else {
					where[id] = name
				}
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return where, nil
}

// locateQueued marks the recipients among look that wait in a campaign's list on shard.
func (s *Inspector) locateQueued(ctx context.Context, shard int, look map[string]bool, where map[string]string) error {
	base := stream.KeysFor(s.o.Prefix, shard).Base + "campaign:"
	lists, err := scan.Keys(ctx, s.c, scan.GlobEscape(base)+"*:p:*")
	if err != nil {
		return err
	}
	for _, list := range lists {
		campaign, _, ok := strings.Cut(strings.TrimPrefix(list, base), ":p:")
		if !ok {
			continue
		}
		for start := int64(0); ; start += 1000 {
			els, err := s.c.LRange(ctx, list, start, start+999).Result()
			if err != nil {
				return fmt.Errorf("inspect: audit %s: %w", list, err)
			}
			for _, el := range els {
				n, _, _ := strings.Cut(el, "\t")
				if id := campaign + "/" + n; look[id] && where[id] == "" {
					where[id] = "campaign"
				}
			}
			if len(els) < 1000 {
				break
			}
		}
	}
	return nil
}

// CampaignRecipientIDs are the job ids of campaign id's recipients, 1 to the number added: what
// Audit checks to tell that every recipient of the campaign has its one terminal record. Added counts
// the recipients a worker has numbered, so those of an add entry still in the intake are not
// among them. ErrNoCampaign when the campaign's shard holds nothing of it (neither its create
// nor a recipient has been taken), so that a mistyped id is not a campaign with no one to check.
func (s *Inspector) CampaignRecipientIDs(ctx context.Context, id string) ([]string, error) {
	k := stream.CampaignKeysFor(s.o.Prefix, stream.ShardOf(id, s.o.Shards), id)
	added, err := s.c.HGet(ctx, k.Hash, "added").Int64()
	if errors.Is(err, redis.Nil) {
		var n int64
		if n, err = s.c.Exists(ctx, k.Hash).Result(); err == nil && n == 0 {
			return nil, ErrNoCampaign
		}
	}
	if err != nil {
		return nil, fmt.Errorf("inspect: campaign %s: %w", id, err)
	}
	ids := make([]string, added)
	for i := range ids {
		ids[i] = job.RecipientJobID(id, int64(i+1))
	}
	return ids, nil
}

// jobID is the id of a raw job, "" when it has none.
func jobID(raw string) string {
	id, _ := job.PeekID([]byte(raw))
	return id
}

// scanStream calls fn for every entry of the stream at key, reading 1000 entries a round trip.
func (s *Inspector) scanStream(ctx context.Context, key string, fn func(id string, f map[string]any)) error {
	start := "-"
	for {
		msgs, err := s.c.XRangeN(ctx, key, start, "+", 1000).Result()
		if err != nil {
			return fmt.Errorf("inspect: read %s: %w", key, err)
		}
		for _, m := range msgs {
			fn(m.ID, m.Values)
		}
		if len(msgs) < 1000 {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// pendingIDs are the entry ids of the stream at key pending in the workers' group.
func (s *Inspector) pendingIDs(ctx context.Context, key string) (map[string]bool, error) {
	out := map[string]bool{}
	start := "-"
	for {
		p, err := s.c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: stream.Group, Start: start, End: "+", Count: 1000}).Result()
		if err != nil {
			if strings.HasPrefix(err.Error(), "NOGROUP") {
				return out, nil
			}
			return nil, fmt.Errorf("inspect: pending of %s: %w", key, err)
		}
		for _, x := range p {
			out[x.ID] = true
		}
		if len(p) < 1000 {
			return out, nil
		}
		start = "(" + p[len(p)-1].ID
	}
}
