package inspect

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// The operator's side of campaigns: where a campaign's recipients are, and its pause, resume
// and cancel. The worker's side, and the layout of a campaign's keys, are stream's
// (campaign.go there).

var (
	//go:embed campaign_state.lua
	campaignStateLua    string
	campaignStateScript = redis.NewScript(campaignStateLua)
)

// ErrNoCampaign says no campaign has the id.
var ErrNoCampaign = errors.New("inspect: no such campaign")

// CampaignStatus is where a campaign's recipients are, summed over the shards.
type CampaignStatus struct {
	ID    string `json:"id"`
	State string `json:"state"` // running, paused, canceled; "pending" before its create entry, unless paused or cancelled
	// HasMessage says its create entry has been taken: it has its message.
	HasMessage bool   `json:"created"`
	Class      string `json:"class,omitempty"`
	// Rate is the pace in messages a second (0: none); SendAt when it may start.
	Rate   float64    `json:"rate"`
	SendAt *time.Time `json:"send_at,omitempty"`
	// Added recipients; Queued wait in the campaign's lists; InLanes were expanded into lanes
	// and have no terminal record yet (in a lane, in flight or waiting to retry).
	Added   int64 `json:"added"`
	Queued  int64 `json:"queued"`
	InLanes int64 `json:"in_lanes"`
	// Finished counts terminal records by outcome code; Done is their sum.
	Finished map[string]int64 `json:"finished"`
	Done     int64            `json:"done"`
	// QueuedBy is Queued per provider.
	QueuedBy map[string]int64 `json:"queued_by_provider"`
	Created  time.Time        `json:"created_at"`
	Started  *time.Time       `json:"started_at,omitempty"`
	// Left estimates the time until every recipient has its record, from the rate since the
	// start (and the pace, when slower); nil when there is nothing to estimate from.
	Left *time.Duration `json:"left_ns,omitempty"`
}

// Campaign is the status of campaign id, ErrNoCampaign when no shard knows it.
func (s *Inspector) Campaign(ctx context.Context, id string, now time.Time) (*CampaignStatus, error) {
	home := stream.ShardOf(id, s.o.Shards)
	st := &CampaignStatus{ID: id, Finished: map[string]int64{}, QueuedBy: map[string]int64{}}
	found := false
	for shard := 0; shard < s.Shards(); shard++ {
		k := stream.CampaignKeysFor(s.o.Prefix, shard, id)
		h, err := s.c.HGetAll(ctx, k.Hash).Result()
		if err != nil {
			return nil, fmt.Errorf("inspect: campaign %s: %w", id, err)
		}
		if len(h) == 0 {
			continue
		}
		found = true
		for f, v := range h {
			if code, ok := strings.CutPrefix(f, "code:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				st.Finished[code] += n
				st.Done += n
			}
		}
		if shard != home {
			continue // only a record's count can land on another shard (a replayed recipient)
		}
		st.State = h["state"]
		_, st.HasMessage = h["message"]
		st.Class = h["class"]
		st.Rate, _ = strconv.ParseFloat(h["rate"], 64)
		st.Added, _ = strconv.ParseInt(h["added"], 10, 64)
		if v, _ := strconv.ParseInt(h["send_at"], 10, 64); v > 0 {
			t := time.UnixMilli(v)
			st.SendAt = &t
		}
		if v, _ := strconv.ParseInt(h["created_at"], 10, 64); v > 0 {
			st.Created = time.UnixMilli(v)
		}
		if v, _ := strconv.ParseInt(h["started_at"], 10, 64); v > 0 {
			t := time.UnixMilli(v)
			st.Started = &t
		}
		expanded, _ := strconv.ParseInt(h["expanded"], 10, 64)
		deadAdded, _ := strconv.ParseInt(h["dead_added"], 10, 64)
		canceledQueued, _ := strconv.ParseInt(h["canceled_queued"], 10, 64)
		pipe := s.c.Pipeline()
		lens := map[string]*redis.IntCmd{}
		for _, p := range providersOf(h["providers"]) {
			lens[p] = pipe.LLen(ctx, k.ListOf(p))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("inspect: campaign %s: %w", id, err)
		}
		for p, c := range lens {
			if c.Val() > 0 {
				st.QueuedBy[p] = c.Val()
			}
			st.Queued += c.Val()
		}
		// Every recipient expanded ends with one record; those that never reached a lane
		// (refused when added, cancelled while queued) are counted apart.
		st.InLanes = max(0, expanded-(st.Done-deadAdded-canceledQueued))
		if st.State == "" {
			st.State = "pending"
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %s", ErrNoCampaign, id)
	}
	st.InLanes = max(0, min(st.InLanes, st.Added-st.Done-st.Queued))
	st.Left = estimateLeft(st, now)
	return st, nil
}

func estimateLeft(st *CampaignStatus, now time.Time) *time.Duration {
	rest := st.Queued + st.InLanes
	if rest == 0 || st.State != stream.CampaignRunning {
		return nil
	}
	rate := 0.0
	if st.Started != nil && now.After(*st.Started) {
		sent := st.Done - st.Finished["INVALID_JOB"]
		if sent > 0 {
			rate = float64(sent) / now.Sub(*st.Started).Seconds()
		}
	}
	if st.Rate > 0 && (rate == 0 || st.Rate < rate) {
		rate = st.Rate
	}
	if rate <= 0 {
		return nil
	}
	d := time.Duration(float64(rest) / rate * float64(time.Second))
	if st.SendAt != nil && st.SendAt.After(now) {
		d += st.SendAt.Sub(now)
	}
	return &d
}

// CampaignIDs lists every campaign of every shard, by id.
func (s *Inspector) CampaignIDs(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for shard := 0; shard < s.Shards(); shard++ {
		ids, err := s.c.ZRange(ctx, stream.CampaignKeysFor(s.o.Prefix, shard, "").All, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("inspect: campaigns: %w", err)
		}
		for _, id := range ids {
			seen[id] = true
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// SetCampaignState pauses (stream.CampaignPaused), resumes (stream.CampaignRunning) or
// cancels (stream.CampaignCanceled) campaign id. A cancelled campaign cannot be resumed.
// Cancelling only marks it: CancelCampaign also drains its waiting recipients.
func (s *Inspector) SetCampaignState(ctx context.Context, id, state string) error {
	if err := job.CheckCampaignID(id); err != nil {
		return fmt.Errorf("inspect: campaign id: %w", err)
	}
	k := stream.CampaignKeysFor(s.o.Prefix, stream.ShardOf(id, s.o.Shards), id)
	n, err := campaignStateScript.Run(ctx, s.c, []string{k.Hash, k.Active}, id, state).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("inspect: campaign %s: %w", id, err)
	case n < 0:
		return fmt.Errorf("%w: %s", ErrNoCampaign, id)
	case n == 0:
		return fmt.Errorf("inspect: campaign %s is canceled; it cannot be %s", id, map[string]string{stream.CampaignRunning: "resumed", stream.CampaignPaused: "paused"}[state])
	}
	return nil
}

// CancelCampaign cancels campaign id and gives every recipient waiting in its lists a
// CANCELED record, freeing them; it returns how many waiting recipients the cancel ended, its
// own drain's and those a worker's expansion loop drained beside it once the state changed
// (the campaign's count of them, before and after). The recipients already in a lane get
// theirs from the worker that reads them (within about a second), and those in flight finish:
// the ledger has the record of each. A campaign cancelled before ends none.
func (s *Inspector) CancelCampaign(ctx context.Context, id string, now time.Time) (int64, error) {
	shard := stream.ShardOf(id, s.o.Shards)
	k := stream.CampaignKeysFor(s.o.Prefix, shard, id)
	before, err := s.c.HMGet(ctx, k.Hash, "state", "canceled_queued").Result()
	if err != nil {
		return 0, fmt.Errorf("inspect: campaign %s: %w", id, err)
	}
	if err := s.SetCampaignState(ctx, id, stream.CampaignCanceled); err != nil {
		return 0, err
	}
	if st, _ := before[0].(string); st == stream.CampaignCanceled {
		return 0, nil
	}
	from, _ := before[1].(string)
	for {
		// The providers again each round: a batch may have brought a list of another.
		providers, err := s.c.HGet(ctx, k.Hash, "providers").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("inspect: campaign %s: %w", id, err)
		}
		_, left, ok, err := s.ks.DrainCampaign(ctx, shard, id, providersOf(providers), now)
		if err != nil {
			return 0, err
		}
		if !ok || left == 0 {
			after, err := s.c.HGet(ctx, k.Hash, "canceled_queued").Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				return 0, fmt.Errorf("inspect: campaign %s: %w", id, err)
			}
			was, _ := strconv.ParseInt(from, 10, 64)
			return after - was, nil
		}
	}
}

// providersOf are the providers a campaign's hash lists a list for in its field "providers",
// as stream's campaigns write it (a comma between two).
func providersOf(field string) []string {
	if field == "" {
		return nil
	}
	return strings.Split(field, ",")
}
