package inspect

import (
	"context"
	"errors"
	"time"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// Campaigns as an operator reads them (`gateway-worker campaign status` and `campaign ls`,
// whose --json prints the statuses as they are), and what became of a campaign's create entry.

// CampaignList is the status of every campaign of every shard, by id. It reads each
// campaign's hash on every shard: an operator's listing, not something to poll.
func (s *Inspector) CampaignList(ctx context.Context, now time.Time) ([]CampaignStatus, error) {
	ids, err := s.CampaignIDs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]CampaignStatus, 0, len(ids))
	for _, id := range ids {
		st, err := s.Campaign(ctx, id, now)
		if err != nil {
			return nil, err
		}
		out = append(out, *st)
	}
	return out, nil
}

// CampaignRefusal is the reason of the dead record a worker wrote for a create entry of
// campaign id at or after since (by Redis's clock), "" when there is none: the create was
// refused (a vapid_key no worker has, a send_at past the horizon, another campaign with the
// id). Only the records written since then are read.
func (s *Inspector) CampaignRefusal(ctx context.Context, id string, since time.Time) (string, error) {
	dead, err := s.DeadList(ctx, DeadFilter{Since: since}, 0)
	if err != nil {
		return "", err
	}
	for _, d := range dead {
		if d.ID == id && job.KindOf(d.Job) == job.KindCreateCampaign {
			return d.Reason, nil
		}
	}
	return "", nil
}

// AwaitCampaign waits up to wait for a worker to take the create entry of campaign id written
// at since (by Redis's clock): the campaign's status once it is created, or the reason of the
// entry's dead record once it was refused; neither when wait ran out first.
func (s *Inspector) AwaitCampaign(ctx context.Context, id string, since time.Time, wait time.Duration) (*CampaignStatus, string, error) {
	deadline := time.Now().Add(wait)
	for {
		st, err := s.Campaign(ctx, id, time.Now())
		if err == nil && st.HasMessage {
			return st, "", nil
		}
		if err != nil && !errors.Is(err, ErrNoCampaign) {
			return nil, "", err
		}
		if reason, err := s.CampaignRefusal(ctx, id, since); err != nil || reason != "" {
			return nil, reason, err
		}
		if !time.Now().Before(deadline) {
			return nil, "", nil
		}
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
		}
	}
}
