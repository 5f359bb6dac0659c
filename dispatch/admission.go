package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// hostWaitMax is the longest a delivery to a throttled host waits in the lane for that host's
// own token; a longer wait goes back to the delayed set instead, so a throttled host never
// holds slots the lane's other hosts could use.
const hostWaitMax = 250 * time.Millisecond

// errHostWait says a host's own token is further off than hostWaitMax.
var errHostWait = errors.New("dispatch: host throttled")

// admission is a delivery that the breakers let through, waiting to be told how it went: the
// provider's breaker, or in a lane of client-supplied hosts (the fallback lane) the host's own
// breaker and throttle; and for an unknown host, the host breaker.
type admission struct {
	done   func(limits.Result) // the provider's breaker; nil in a per-host lane
	bucket *limits.Bucket      // the provider's bucket, throttled by a RATE_LIMITED answer
	permit limits.HostPermit   // the host's, in a per-host lane
	// host is the unknown host the delivery goes to ("" for a listed provider's), and hosts
	// the breaker that learns whether it answered.
	host  string
	hosts *limits.HostBreaker
}

// end tells the breakers how the delivery went at now: out is nil when nothing was sent (it
// counts neither way and gives a half-open probe's place back).
func (a *admission) end(now time.Time, out *taxonomy.Outcome) {
	result, limited, retryAfter := limits.Excluded, false, time.Duration(0)
	if out != nil {
		result, limited = breakerResult(*out), out.Code == taxonomy.RateLimited
		if limited || out.Code == taxonomy.ProviderDown {
			retryAfter = out.RetryAfter // the host asked for a pause; only its own jobs wait
		}
		if a.host != "" {
			a.hosts.Record(a.host, hostResult(*out), now)
		}
	}
	if a.done == nil {
		a.permit.Done(now, result, limited, retryAfter)
		return
	}
	a.done(result)
	if limited {
		a.bucket.Throttle(now)
	}
}

// passBreakers asks the breakers whether a delivery may go now. In a lane of listed providers
// the provider's ratio breaker decides (a provider is one service). In the fallback lane every
// client-supplied host has its own breaker and 429 throttle (limits.HostLimits), so one bad
// host neither pauses nor slows the others; a delivery to a throttled host waits here for the
// host's own token only up to hostWaitMax. When the delivery may not go, retryIn says when to
// try it again (0: the lane is stopping, leave it where it is).
func (l *lane) passBreakers(stop context.Context, host string) (a admission, retryIn time.Duration, err error) {
	cfg := l.cfg
	hl := l.lim.hostLimits()
	if hl == nil {
		done, err := l.lim.breaker().Allow()
		if err != nil { // open, or half-open with every probe out
			return admission{}, max(l.lim.breaker().OpenFor(), putBackDelay(cfg.Rand())), err
		}
		return admission{done: done, bucket: l.lim.bucket}, 0, nil
	}
	now := cfg.Now()
	p, wait, err := hl.Admit(host, now)
	if err == nil && wait > hostWaitMax {
		p.Cancel(now)
		err = errHostWait
	}
	if err != nil {
		return admission{}, max(wait, putBackDelay(cfg.Rand())), err
	}
	if wait > 0 {
		sleep(stop, wait)
		if stop.Err() != nil {
			p.Cancel(cfg.Now())
			return admission{}, 0, stop.Err()
		}
	}
	return admission{permit: p}, 0, nil
}

// hostKey is the host breaker's key for an endpoint, or "" when the host breaker does not
// guard it. It guards the hosts no registry entry lists (the fallback lane's self-hosted and
// unknown services), which share one lane, so one dead host among them would otherwise hold
// the lane's slots for a timeout each. A listed provider's hosts are guarded by its ratio
// breaker, which pauses the lane without spending attempts; a host breaker there would turn a
// stalled provider's jobs into CIRCUIT_OPEN retries and keep its half-open probes from
// reaching it for the host cooldown.
func (l *lane) hostKey(endpoint string) string {
	route, err := l.cfg.registry().Resolve(endpoint)
	if err != nil || !route.Unknown {
		return "" // intake refused unroutable endpoints; a registry reload may differ, and the adapter says so
	}
	return route.Authority
}

// tokenWait counts a delivery as queued for its provider's token (see providerLimits.readable)
// from join, when it takes its slot, until it has the token or leaves without needing one.
// Owned by the delivery's goroutine.
type tokenWait struct {
	pl   *providerLimits
	left bool
}

func (t *tokenWait) join(pl *providerLimits) {
	t.pl = pl
	pl.queued.Add(1)
}

// leave ends the count; once only, however often it is called.
func (t *tokenWait) leave() {
	if !t.left {
		t.left = true
		t.pl.queued.Add(-1)
	}
}
