package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job" // "job" names one job in this package
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// Campaigns, in the worker: intake takes a campaign's create entry and its batches of
// recipients (each routed to its provider's list of the campaign, the message never copied);
// the expansion loop moves recipients from those lists into the providers' lanes as jobs, as
// the lanes take them, the lists of the running campaigns taking turns; a lane holds back a
// paused campaign's jobs and ends a cancelled one's unsent. A list is expanded only while its
// provider's lane is under Config.CampaignLaneDepth and the provider is not paused, so a
// stalled provider keeps its recipients in the campaign's list (subscriptions only) while the
// others go on.

const (
	// expandRounds bounds the expansion calls (each of at most stream.CampaignChunk
	// recipients) for one list in one round, so that one round does not hold up the loop's
	// other work; the next round goes on.
	expandRounds = 40
	// drainRounds bounds the calls that end a cancelled campaign's waiting recipients (each of
	// at most stream.CampaignChunk) in one round.
	drainRounds = 20
	// campaignStateStale is how old a campaign's state the lanes may act on: a pause or a
	// cancel is seen by every lane within about this long.
	campaignStateStale = 2 * time.Second
	// transactionalCampaignLead is how far a transactional campaign may be ahead of its
	// provider's other transactional jobs: its expansion stops while the transactional lane
	// holds this long's work at the provider's rate (or two of the loop's periods, if those are
	// longer), so a login code written behind it waits about that long, not the lane depth's
	// worth, and the lane, refilled every round, does not run dry.
	transactionalCampaignLead = 250 * time.Millisecond
)

// campaignFeeder is the expansion loop, and the campaigns' states and messages the lanes read.
type campaignFeeder struct {
	cfg    *Config
	ops    CampaignStore
	limits *fleetLimits

	mu sync.Mutex
	// states are the states last read of the campaigns active on each shard, by shard and id,
	// with when; guarded by mu.
	states map[campaignRef]campaignSeen
	// messages are the campaigns' messages as the lanes read them, each once: a campaign's
	// message never changes. Bounded, the least recently used forgotten first.
	messages *lru.Cache[campaignRef, string]
	// turn counts the expansion's rounds (round), whose order of turns it sets on every shard
	// (expandInTurns); only the expansion loop's goroutine touches it.
	turn int
}

// maxCampaignMessages bounds the messages a worker keeps.
const maxCampaignMessages = 1024

type campaignRef struct {
	shard int
	id    string
}

type campaignSeen struct {
	state string
	at    time.Time
}

// newCampaignFeeder is the feeder of cfg's campaigns; nil when it has none.
func newCampaignFeeder(cfg *Config, limits *fleetLimits) *campaignFeeder {
	if cfg.Campaigns == nil {
		return nil
	}
	messages, _ := lru.New[campaignRef, string](maxCampaignMessages) // errors only for a size < 1
	return &campaignFeeder{cfg: cfg, ops: cfg.Campaigns, limits: limits, states: map[campaignRef]campaignSeen{}, messages: messages}
}

// state is campaign id's state on shard: as the expansion loop last read it, or, for a
// campaign that loop does not look at (its lists are empty) or read too long ago, as Redis has
// it now, kept for campaignStateStale. "" when the campaign has none (not created, or Redis did
// not answer: the job goes on as any other).
func (f *campaignFeeder) state(ctx context.Context, shard int, id string) string {
	if f == nil {
		return ""
	}
	ref := campaignRef{shard, id}
	f.mu.Lock()
	s, ok := f.states[ref]
	f.mu.Unlock()
	if ok && time.Since(s.at) <= campaignStateStale {
		return s.state
	}
	look, err := f.ops.Look(ctx, shard, id)
	if err != nil {
		f.cfg.Logger.Warn("dispatch: campaign state not read; its job goes on", "shard", shard, "campaign", id, "err", err)
		return ""
	}
	f.seen(ref, look)
	return look.State
}

// seen keeps what a look at a campaign found.
func (f *campaignFeeder) seen(ref campaignRef, look stream.CampaignLook) {
	f.mu.Lock()
	f.states[ref] = campaignSeen{state: look.State, at: time.Now()}
	f.mu.Unlock()
	if look.HasMessage {
		f.messages.Add(ref, look.Message)
	}
}

// message is campaign id's message on shard, read from Redis once; ok is false when the
// campaign has none (never created, or gone), or when f is nil.
func (f *campaignFeeder) message(ctx context.Context, shard int, id string) (msg string, ok bool, err error) {
	if f == nil {
		return "", false, nil
	}
	ref := campaignRef{shard, id}
	if msg, ok := f.messages.Get(ref); ok {
		return msg, true, nil
	}
	look, err := f.ops.Look(ctx, shard, id)
	if err != nil {
		return "", false, err
	}
	f.seen(ref, look)
	return look.Message, look.HasMessage, nil
}

// round expands, drains and settles every active campaign of every shard once.
func (f *campaignFeeder) round(ctx context.Context) error {
	f.turn++ // once a round, whatever the shards: each shard's order of turns moves on by one
	var errs []error
	for s := 0; s < f.cfg.Store.Shards(); s++ {
		if err := f.shard(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (f *campaignFeeder) shard(ctx context.Context, shard int) error {
	active, err := f.ops.Active(ctx, shard)
	if err != nil {
		return err
	}
	now := time.Now()
	f.mu.Lock()
	for ref, s := range f.states {
		if ref.shard == shard && now.Sub(s.at) > campaignStateStale {
			delete(f.states, ref)
		}
	}
	for _, a := range active {
		f.states[campaignRef{shard, a.ID}] = campaignSeen{state: a.State, at: now}
	}
	f.mu.Unlock()
	// One campaign's failure does not keep the others of the shard waiting: the round goes on
	// and reports every error.
	var errs []error
	var running []stream.ActiveCampaign
	for _, a := range active {
		switch a.State {
		case stream.CampaignCanceled:
			if err := f.drain(ctx, shard, a); err != nil {
				errs = append(errs, fmt.Errorf("campaign %s: %w", a.ID, err))
			}
		case stream.CampaignRunning:
			running = append(running, a)
		}
	}
	errs = append(errs, f.expandInTurns(ctx, shard, running)...)
	return errors.Join(errs...)
}

// drain ends what waits in cancelled campaign a's lists, a chunk a call, for at most
// drainRounds calls.
func (f *campaignFeeder) drain(ctx context.Context, shard int, a stream.ActiveCampaign) error {
	for range drainRounds {
		_, left, ok, err := f.ops.Drain(ctx, shard, a.ID, a.Providers, f.cfg.Now())
		if err != nil || !ok || left == 0 {
			return err
		}
	}
	return nil
}

// campaignList is one provider's list of a running campaign: campaigns[c] and its provider,
// the class of the lane it goes to, and that lane's depth for it (laneDepth).
type campaignList struct {
	c        int
	provider string
	pl       *providerLimits
	class    jobfmt.Class
	depth    int
	waiting  bool
}

// expandInTurns moves what the lanes can take of the running campaigns' lists, a chunk a call,
// the lists taking turns: each turn gives every list one call, so a small campaign goes into a
// lane beside a big one rather than after it, and a paced campaign's tokens go to each of its
// providers in turn rather than all to its first. The order of the turns moves on at each
// round (f.turn): a lane with room for less than a chunk, or a pace of less than a chunk a
// round, is not always the same list's. A campaign whose lists are all empty is taken off the
// active ones.
func (f *campaignFeeder) expandInTurns(ctx context.Context, shard int, running []stream.ActiveCampaign) []error {
	if len(running) == 0 {
		return nil
	}
	empty := make([]bool, len(running))  // no list of the campaign has recipients left
	failed := make([]bool, len(running)) // an expansion of the campaign failed this round
	var lists []campaignList
	for i := range running {
		c := (f.turn + i) % len(running)
		a := running[c]
		class := a.Class
		if class == "" {
			class = jobfmt.ClassBulk
		}
		empty[c] = true
		for j := range a.Providers {
			p := a.Providers[(f.turn+j)%len(a.Providers)]
			pl := f.limits.get(p)
			if pl == nil || pl.paused.Load() {
				// A provider this replica does not run, or one an operator paused: its recipients
				// wait in the campaign's list, not in a lane.
				empty[c] = false
				continue
			}
			depth, waiting := f.laneDepth(class, pl)
			lists = append(lists, campaignList{c: c, provider: p, pl: pl, class: class, depth: depth, waiting: waiting})
		}
	}
	var errs []error
	for range expandRounds {
		if len(lists) == 0 {
			break
		}
		more := lists[:0] // the lists that moved a whole chunk and have more
		for _, l := range lists {
			if failed[l.c] {
				continue // Redis refused the campaign once this round: its next round tries again
			}
			a := running[l.c]
			x, err := f.ops.Expand(ctx, shard, a.ID, l.provider, l.class, stream.CampaignChunk, l.depth, l.waiting)
			if err != nil {
				errs = append(errs, fmt.Errorf("campaign %s: %w", a.ID, err))
				failed[l.c] = true
				continue
			}
			if x.Moved > 0 {
				l.pl.arrivals.Add(int64(x.Moved))
			}
			if x.Left > 0 {
				empty[l.c] = false
			}
			if x.Moved == stream.CampaignChunk && x.Left > 0 {
				more = append(more, l)
			}
		}
		lists = more
	}
	for c, a := range running {
		if !empty[c] || failed[c] {
			continue
		}
		if _, err := f.ops.Settle(ctx, shard, a.ID, a.Providers); err != nil {
			errs = append(errs, fmt.Errorf("campaign %s: %w", a.ID, err))
		}
	}
	return errs
}

// laneDepth is how many entries the provider's lane of class may hold and still take a
// campaign's recipients: the lane depth; and for the transactional lane, which the provider's
// other transactional jobs wait in too, transactionalCampaignLead's worth of entries waiting to
// be read (waiting: those in flight are ahead of no one, and counting them would hold a slow
// provider's campaign under its rate).
func (f *campaignFeeder) laneDepth(class jobfmt.Class, pl *providerLimits) (depth int, waiting bool) {
	depth = f.cfg.CampaignLaneDepth
	if class != jobfmt.ClassTransactional {
		return depth, false
	}
	lead := max(transactionalCampaignLead, 2*f.cfg.CampaignEvery)
	return min(depth, max(1, int(pl.provider().Rate*lead.Seconds()))), true
}

// createCampaign takes a campaign's create entry: the campaign is created (or the entry is
// dead-lettered with why it cannot be).
func (in *intake) createCampaign(ctx context.Context, e stream.Entry, raw string) error {
	cfg := in.cfg
	ops := in.campaigns
	now := cfg.Now()
	c, err := jobfmt.DecodeCampaign(raw, now)
	if err != nil {
		return in.dead(ctx, e, "", invalidReason(err), raw, true)
	}
	if _, ok := cfg.Keys[c.VAPIDKey]; !ok {
		return in.dead(ctx, e, c.ID, fmt.Sprintf("create_campaign.vapid_key: no key named %q is configured", c.VAPIDKey), raw, false)
	}
	if ahead := c.SendAt.Sub(now); ahead > cfg.MaxScheduleAhead {
		return in.dead(ctx, e, c.ID, fmt.Sprintf("create_campaign.send_at: %s is %s ahead; at most %s (run --max-schedule-ahead)",
			c.SendAt.UTC().Format(time.RFC3339Nano), ahead.Round(time.Second), cfg.MaxScheduleAhead), raw, false)
	}
	if ops == nil {
		return in.dead(ctx, e, c.ID, "this worker's store cannot hold campaigns", raw, false)
	}
	if home := stream.CampaignShard(c.ID, cfg.Store.Shards()); home != e.Shard && e.Shard < cfg.Store.Shards() {
		return in.dead(ctx, e, c.ID, fmt.Sprintf("create_campaign: campaign %s lives on shard %d, not %d: write its entries to that shard's intake", c.ID, home, e.Shard), raw, false)
	}
	var v stream.CreateVerdict
	err = in.health.retry(ctx, in.done, e.Shard, telemetry.OpWrite, "create campaign", false, cfg.Now, func(ctx context.Context) (err error) {
		v, err = ops.Create(ctx, e, c, raw, now)
		return err
	})
	switch {
	case err != nil:
	case v == stream.CreateNotOwner:
		in.notOwner(e)
	case v == stream.CreateConflict:
		cfg.Logger.Info("dispatch: campaign create refused: another campaign has the id", "shard", e.Shard, "campaign", c.ID)
		cfg.Metrics.DeadLetter(telemetry.DeadInvalidJob)
	case v == stream.Created:
		cfg.Logger.Info("dispatch: campaign created", "shard", e.Shard, "campaign", c.ID, "class", string(c.Class), "rate", c.Rate)
	}
	return err
}

// addRecipients takes a batch of a campaign's recipients: each is routed to its provider's
// list of the campaign, or dead-lettered with its reason.
func (in *intake) addRecipients(ctx context.Context, e stream.Entry, raw string) error {
	cfg := in.cfg
	id, batch, rs, err := jobfmt.DecodeRecipients(raw)
	if err != nil {
		return in.dead(ctx, e, "", invalidReason(err), raw, true)
	}
	if in.campaigns == nil {
		return in.dead(ctx, e, "", "this worker's store cannot hold campaigns", raw, false)
	}
	if home := stream.CampaignShard(id, cfg.Store.Shards()); home != e.Shard && e.Shard < cfg.Store.Shards() {
		return in.dead(ctx, e, "", fmt.Sprintf("add_recipients: campaign %s lives on shard %d, not %d: write its entries to that shard's intake", id, home, e.Shard), raw, false)
	}
	routed := make([]stream.RoutedRecipient, len(rs))
	dead := 0
	for i, r := range rs {
		rr := stream.RoutedRecipient{Key: r.Key, Compact: r.Compact}
		if r.Invalid != nil {
			rr.Invalid, rr.Compact = invalidReason(r.Invalid), r.Raw
		} else if route, err := cfg.registry().ResolveParsed(r.Subscription.Endpoint, r.Parsed.URL(r.Subscription.Endpoint)); err != nil {
			rr.Invalid, rr.Compact = jobfmt.EndpointReason(err), r.Raw
		} else {
			rr.Provider = route.Provider.ID
			if route.Unknown {
				cfg.Metrics.UnknownAuthority()
			}
		}
		if rr.Invalid != "" {
			dead++
		}
		routed[i] = rr
	}
	var first int64
	err = in.health.retry(ctx, in.done, e.Shard, telemetry.OpWrite, "add recipients", false, cfg.Now, func(ctx context.Context) (err error) {
		first, err = in.campaigns.Add(ctx, e, id, batch, routed, cfg.Now())
		return err
	})
	switch {
	case err != nil:
	case first == 0:
		in.notOwner(e)
	case first < 0:
		cfg.Logger.Debug("dispatch: copy of a batch of recipients already added; acknowledged", "shard", e.Shard, "campaign", id, "batch", batch)
	default:
		for range dead {
			cfg.Metrics.DeadLetter(telemetry.DeadInvalidJob)
		}
		cfg.Logger.Debug("dispatch: campaign recipients added", "shard", e.Shard, "campaign", id, "count", len(rs), "invalid", dead)
	}
	return err
}

// campaignCheck is what a campaign's state makes of its recipient's lane entry before the
// send: held back while the campaign is paused, ended CANCELED unsent once it is cancelled;
// nil to go on.
func (t *turn) campaignCheck(ctx context.Context, now time.Time) *nextState {
	j := t.job
	if j == nil || j.Campaign == "" {
		return nil
	}
	switch t.l.campaigns.state(ctx, t.e.Shard, j.Campaign) {
	case stream.CampaignPaused:
		if _, ok := t.holdElement(); !ok {
			// A job of its own that names the campaign: not one of its recipients, it is
			// sent as any other.
			return nil
		}
		return &nextState{kind: holdBack}
	case stream.CampaignCanceled:
		return &nextState{kind: toLedger, result: stream.Result{ID: j.ID, Provider: t.l.provider, Attempt: t.attempt,
			Code: string(taxonomy.Canceled), Detail: "campaign canceled before it was sent", At: now}}
	}
	return nil
}

// holdElement is the recipient of a campaign's job as the campaign's lists keep it.
func (t *turn) holdElement() (string, bool) {
	j := t.job
	num, ok := strings.CutPrefix(j.ID, j.Campaign+"/")
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || n < 1 {
		return "", false
	}
	sub, err := json.Marshal(j.Subscription)
	if err != nil {
		return "", false
	}
	return stream.RecipientElement(n, j.Recipient, string(sub)), true
}
