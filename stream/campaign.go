package stream

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// A campaign lives on one shard, ShardOf(its id): its hash (the message, stored once, its
// options, state and counts), and one list per provider of the recipients waiting to be
// expanded into that provider's lane. docs/architecture.md, "Campaigns", has the layout.

var (
	//go:embed camp.lua
	campLua string

	//go:embed campaign_create.lua
	campaignCreateLua    string
	campaignCreateScript = redis.NewScript(fmt.Sprintf("local MAX_INVALID_JOB = %d\n", MaxInvalidJobBytes) + takeLua + campaignCreateLua)

	//go:embed campaign_add.lua
	campaignAddLua    string
	campaignAddScript = redis.NewScript(takeLua + campaignAddLua)

	//go:embed campaign_expand.lua
	campaignExpandLua    string
	campaignExpandScript = redis.NewScript(campaignExpandLua)

	//go:embed campaign_hold.lua
	campaignHoldLua    string
	campaignHoldScript = redis.NewScript(takeLua + campLua + campaignHoldLua)

	//go:embed campaign_drain.lua
	campaignDrainLua    string
	campaignDrainScript = redis.NewScript(campaignDrainLua)

	//go:embed campaign_settle.lua
	campaignSettleLua    string
	campaignSettleScript = redis.NewScript(campaignSettleLua)
)

// Campaign states, as the campaign's hash keeps them.
const (
	CampaignRunning  = "running"
	CampaignPaused   = "paused"
	CampaignCanceled = "canceled"
)

// CampaignKeys are the keys of one campaign on its shard.
type CampaignKeys struct {
	Shard int
	// Hash is the campaign: message, options, state and counts.
	Hash string
	// List is the prefix of its per-provider lists (List + provider id).
	List string
	// All is the shard's campaigns (ZSET id -> first seen, unix ms); Active those with
	// recipients to expand or drain (SET).
	All, Active string
	// Batches are the batch ids of the campaign's add entries taken so far (SET).
	Batches string
}

// ListOf is the campaign's list of recipients waiting for provider's lane.
func (k CampaignKeys) ListOf(provider string) string { return k.List + provider }

func campaignKeys(prefix string, shard int, id string) CampaignKeys {
	k := KeysFor(prefix, shard)
	return CampaignKeys{Shard: shard, Hash: k.Base + "campaign:" + id, List: k.Base + "campaign:" + id + ":p:",
		All: k.Base + "campaigns", Active: k.Base + "campaigns:active", Batches: k.Base + "campaign:" + id + ":batches"}
}

// CampaignShard is the shard a campaign lives on.
func CampaignShard(id string, shards int) int { return ShardOf(id, shards) }

// Campaigns are the worker's operations on campaigns: taking their intake entries, expanding
// recipients into lanes, holding back a paused campaign's, draining a cancelled one's. They
// use the Store's client and options.
type Campaigns struct{ s *Store }

// CampaignsOf is the campaign operations of s.
func CampaignsOf(s *Store) *Campaigns { return &Campaigns{s: s} }

// Keys are the keys of campaign id on shard.
func (c *Campaigns) Keys(shard int, id string) CampaignKeys {
	return campaignKeys(c.s.o.Prefix, shard, id)
}

// CreateVerdict is what Create did.
type CreateVerdict int

const (
	// CreateNotOwner: the entry is no longer pending for this consumer; nothing changed.
	CreateNotOwner CreateVerdict = iota
	// Created: the campaign exists now, running (or waiting for its send_at).
	Created
	// CreateCopy: the same campaign existed already; the entry was acknowledged.
	CreateCopy
	// CreateConflict: another campaign has the id; the entry was dead-lettered.
	CreateConflict
)

// Create makes campaign cp from its intake entry e (raw, for a dead record) and acknowledges
// the entry, in one script.
func (c *Campaigns) Create(ctx context.Context, e Entry, cp *job.Campaign, raw string, now time.Time) (CreateVerdict, error) {
	k := c.Keys(e.Shard, cp.ID)
	sendAt := int64(0)
	if !cp.SendAt.IsZero() {
		sendAt = cp.SendAt.UnixMilli()
	}
	args := []any{Group, c.s.o.Consumer, e.ID, cp.ID, ms(now), c.s.o.DeadMaxLen, raw,
		"message", cp.Message, "class", string(cp.Class), "vapid_key", cp.VAPIDKey, "ttl", cp.TTL,
		"send_at", sendAt, "rate", strconv.FormatFloat(cp.Rate, 'f', -1, 64)}
	n, err := campaignCreateScript.Run(ctx, c.s.c, []string{e.Stream, k.Hash, k.All, KeysFor(c.s.o.Prefix, e.Shard).Dead}, args...).Int64()
	if err != nil {
		return CreateNotOwner, fmt.Errorf("stream: create campaign: %w", err)
	}
	return CreateVerdict(n), nil
}

// RoutedRecipient is a recipient of a batch, routed: Provider is the provider whose lane it
// goes to, or Invalid says why it cannot be sent (its dead record's reason).
type RoutedRecipient struct {
	Provider string
	Invalid  string
	// Key is the upstream's recipient key, Compact the subscription's JSON (for an invalid
	// one, the recipient as given).
	Key, Compact string
}

// Add appends a batch of recipients to campaign id, each to its provider's list (or, when
// invalid, to the dead stream with its reason), and acknowledges the entry e, in one script.
// It returns the number the first recipient got (the others follow in order), 0 when the
// entry is no longer pending for this consumer (nothing changed), -1 when batch ("" for none)
// was added before: the entry is a copy, acknowledged with nothing added.
func (c *Campaigns) Add(ctx context.Context, e Entry, id, batch string, rs []RoutedRecipient, now time.Time) (int64, error) {
	k := c.Keys(e.Shard, id)
	sk := KeysFor(c.s.o.Prefix, e.Shard)
	idx := map[string]int{}
	var providers []string
	for _, r := range rs {
		if r.Invalid == "" {
			if _, ok := idx[r.Provider]; !ok {
				providers = append(providers, r.Provider)
				idx[r.Provider] = len(providers)
			}
		}
	}
	keys := []string{e.Stream, k.Hash, k.All, k.Active, sk.Dead, k.Batches}
	args := []any{Group, c.s.o.Consumer, e.ID, id, ms(now), c.s.o.DeadMaxLen, batch, len(providers)}
	for _, p := range providers {
		keys = append(keys, k.ListOf(p))
		args = append(args, p)
	}
	for _, r := range rs {
		if r.Invalid != "" {
			body := r.Compact
			if len(body) > MaxInvalidJobBytes {
				body = body[:MaxInvalidJobBytes]
			}
			args = append(args, 0, "", body, r.Invalid, r.Key)
			continue
		}
		args = append(args, idx[r.Provider], recipientJSON(r.Key), r.Compact, "", r.Key)
	}
	v, err := campaignAddScript.Run(ctx, c.s.c, keys, args...).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("stream: add recipients: %w", err)
	}
	switch {
	case len(v) < 1 || v[0] == 0:
		return 0, nil
	case v[0] == 2:
		return -1, nil
	}
	return v[1], nil
}

func recipientJSON(key string) string {
	if key == "" {
		return ""
	}
	b, _ := json.Marshal(key)
	return string(b)
}

// RecipientElement is recipient n of a campaign as its lists keep it.
func RecipientElement(n int64, key, compactSub string) string {
	return strconv.FormatInt(n, 10) + "\t" + recipientJSON(key) + "\t" + compactSub
}

// ActiveCampaign is a campaign with recipients to expand or drain, as the expansion loop sees
// it.
type ActiveCampaign struct {
	ID    string
	State string // "" when the campaign has recipients but no create entry yet
	Class job.Class
	// Providers are those the campaign has a list for.
	Providers []string
}

// Active lists the active campaigns of shard, with their states.
func (c *Campaigns) Active(ctx context.Context, shard int) ([]ActiveCampaign, error) {
	k := campaignKeys(c.s.o.Prefix, shard, "")
	ids, err := c.s.c.SMembers(ctx, k.Active).Result()
	if err != nil {
		return nil, fmt.Errorf("stream: active campaigns: %w", err)
	}
	sort.Strings(ids)
	pipe := c.s.c.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, c.Keys(shard, id).Hash, "state", "class", "providers")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("stream: active campaigns: %w", err)
	}
	out := make([]ActiveCampaign, 0, len(ids))
	for i, id := range ids {
		v := cmds[i].Val()
		str := func(i int) string { s, _ := v[i].(string); return s }
		out = append(out, ActiveCampaign{ID: id, State: str(0), Class: job.Class(str(1)), Providers: providersOf(str(2))})
	}
	return out, nil
}

// providersOf are the providers a campaign's hash lists a list for in its field "providers",
// in the hash's order (which the settle and drain scripts compare with theirs).
func providersOf(field string) []string {
	if field == "" {
		return nil
	}
	return strings.Split(field, ",")
}

// CampaignLook is what a lane reads of a campaign for its recipients' turns.
type CampaignLook struct {
	// State is the campaign's state ("" when it has none: not created, and neither paused nor
	// cancelled before its create came).
	State string
	// Message is the JSON members every recipient's job carries besides its own (the payload,
	// stored once); HasMessage says the campaign was created with one (it may be empty).
	Message    string
	HasMessage bool
}

// Look reads campaign id's state and message on shard.
func (c *Campaigns) Look(ctx context.Context, shard int, id string) (CampaignLook, error) {
	v, err := c.s.c.HMGet(ctx, c.Keys(shard, id).Hash, "state", "message").Result()
	if err != nil {
		return CampaignLook{}, fmt.Errorf("stream: campaign %s: %w", id, err)
	}
	var l CampaignLook
	l.State, _ = v[0].(string)
	l.Message, l.HasMessage = v[1].(string)
	return l, nil
}

// Expansion is what one Expand call did.
type Expansion struct {
	Moved int
	// Wait is how long before another call for this list is worth making (0: at once).
	Wait time.Duration
	// Why says why nothing moved: "not_created", "paused", "canceled", "scheduled", "full",
	// "paced", "empty"; "" when something did.
	Why string
	// Left is the list's length after.
	Left int64
}

// CampaignChunk is the most recipients one call of a campaign's scripts expands into a lane or
// ends (Expand, Drain): Redis runs nothing else while a script runs, so a large campaign is
// moved in calls of this many, each about a millisecond, between which the other calls go.
const CampaignChunk = 100

// Expand moves at most most recipients (and at most CampaignChunk) of campaign id from its
// list for provider into the provider's lane of class, as jobs made of the campaign's message,
// while that lane holds fewer than depth entries (with waiting, fewer than depth entries not
// yet read: those in flight left out) and the campaign's pace allows (campaign_expand.lua).
func (c *Campaigns) Expand(ctx context.Context, shard int, id, provider string, class job.Class, most, depth int, waiting bool) (Expansion, error) {
	most = min(most, CampaignChunk)
	group := ""
	if waiting {
		group = Group
	}
	k := c.Keys(shard, id)
	sk := KeysFor(c.s.o.Prefix, shard)
	lane := sk.LaneOf(provider, class)
	if err := c.s.ensureLane(ctx, lane); err != nil {
		return Expansion{}, err
	}
	v, err := campaignExpandScript.Run(ctx, c.s.c, []string{k.Hash, k.ListOf(provider), lane, sk.Jobs, sk.Dead}, id, provider, most, depth, group).Slice()
	if err != nil {
		return Expansion{}, fmt.Errorf("stream: expand campaign: %w", err)
	}
	if len(v) != 4 {
		return Expansion{}, errors.New("stream: expand campaign: unexpected reply")
	}
	moved, _ := v[0].(int64)
	wait, _ := v[1].(int64)
	why, _ := v[2].(string)
	left, _ := v[3].(int64)
	return Expansion{Moved: int(moved), Wait: time.Duration(wait) * time.Millisecond, Why: why, Left: left}, nil
}

// HeldJob is a lane entry of a paused campaign's recipient that Hold takes back.
type HeldJob struct {
	Campaign, Provider, JobID, Recipient, Job string
	// Element is the recipient as the campaign's lists keep it (RecipientElement).
	Element string
	Attempt int
	At      time.Time
}

// Hold takes lane entry e of a paused campaign's recipient back to the head of the campaign's
// list for its provider, unsent and with no record; or, as the campaign's hash has it now, ends
// it CANCELED (cancelled meanwhile), dead-letters it (the campaign has no such recipient) or
// only acks it (another attempt's accepted send recorded it): campaign_hold.lua. False when
// the entry is no longer pending for this consumer (nothing changed).
func (c *Campaigns) Hold(ctx context.Context, e Entry, h HeldJob) (bool, error) {
	k := c.Keys(e.Shard, h.Campaign)
	sk := KeysFor(c.s.o.Prefix, e.Shard)
	v, err := campaignHoldScript.Run(ctx, c.s.c, []string{e.Stream, sk.Jobs, k.ListOf(h.Provider), k.Hash, k.Active, sk.Results, sk.Dead},
		Group, e.ID, c.s.o.Consumer, h.JobID, h.Element, h.Campaign, h.Provider, h.Attempt, ms(h.At), h.Recipient, h.Job, c.s.o.DeadMaxLen).Int64()
	if err != nil {
		return false, fmt.Errorf("stream: hold campaign recipient: %w", err)
	}
	return v != 0, nil
}

// Drain gives at most CampaignChunk of a cancelled campaign's waiting recipients their
// CANCELED records and frees them; left is how many still wait. ok is false when the campaign
// is not cancelled (nothing changed).
func (c *Campaigns) Drain(ctx context.Context, shard int, id string, providers []string, now time.Time) (drained, left int64, ok bool, err error) {
	return drainCampaign(ctx, c.s.c, c.s.o.Prefix, shard, id, providers, now)
}

func drainCampaign(ctx context.Context, rc redis.UniversalClient, prefix string, shard int, id string, providers []string, now time.Time) (drained, left int64, ok bool, err error) {
	k := campaignKeys(prefix, shard, id)
	keys := []string{k.Hash, KeysFor(prefix, shard).Results, k.Active}
	args := []any{id, CampaignChunk, ms(now)}
	for _, p := range providers {
		keys = append(keys, k.ListOf(p))
		args = append(args, p)
	}
	v, err := campaignDrainScript.Run(ctx, rc, keys, args...).Int64Slice()
	if err != nil {
		return 0, 0, false, fmt.Errorf("stream: drain campaign: %w", err)
	}
	if v[0] < 0 {
		return 0, 0, false, nil
	}
	return v[0], v[1], true, nil
}

// Settle takes a running campaign whose lists are all empty off the shard's active campaigns
// (a later batch puts it back); true when it did.
func (c *Campaigns) Settle(ctx context.Context, shard int, id string, providers []string) (bool, error) {
	k := c.Keys(shard, id)
	keys := []string{k.Hash, k.Active}
	for _, p := range providers {
		keys = append(keys, k.ListOf(p))
	}
	n, err := campaignSettleScript.Run(ctx, c.s.c, keys, id, strings.Join(providers, ",")).Int64()
	if err != nil {
		return false, fmt.Errorf("stream: settle campaign: %w", err)
	}
	return n == 1, nil
}
