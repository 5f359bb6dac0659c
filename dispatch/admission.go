package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job" // "job" names one job in this package
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// hostWaitMax is the longest a delivery to a throttled host waits in the lane for that host's
// own token; a longer wait goes back to the delayed set instead, so a throttled host never
// holds slots the lane's other hosts could use.
const hostWaitMax = 250 * time.Millisecond

// errHostWait says a host's own token is further off than hostWaitMax.
var errHostWait = errors.New("dispatch: host throttled")

// errKeyPaused says the delivery's sender (its VAPID key) is paused on the provider for longer
// than hostWaitMax: the job waits in the delayed set until the pause ends.
var errKeyPaused = errors.New("dispatch: sender paused by the provider")

// admission is a delivery that the breakers let through, waiting to be told how it went: the
// provider's breaker and its sender's throttle, or in a lane of client-supplied hosts (the
// fallback lane) the host's own breaker and throttle; and for an unknown host, the host breaker.
type admission struct {
	// proxy is the breaker of the egress proxy the delivery goes through; nil for direct.
	proxy  func(limits.Result)
	done   func(limits.Result) // the provider's breaker; nil in a per-host lane
	permit limits.HostPermit   // the host's, in a per-host lane
	// key is the delivery's sender (its VAPID key name) and sender that sender's throttle on the
	// provider, in a lane of a listed provider.
	key    string
	sender *limits.KeyThrottle
	// park, when set, hears of a RATE_LIMITED answer whose Retry-After is longer than the retry
	// policy can wait (Backoff.Cap, parkAfter): the sender is parked for the whole fleet.
	park      func(key string, until time.Time, reason string)
	parkAfter time.Duration
	// host is the unknown host the delivery goes to ("" for a listed provider's), and hosts
	// the breaker that learns whether it answered.
	host  string
	hosts *limits.HostBreaker
	// proven, in the fallback lane, learns whether the host answered: a good answer proves it,
	// no answer at all makes it unproven again.
	proven *limits.ProvenHosts
}

// end tells the breakers how the delivery went at now: out is nil when nothing was sent (it
// counts neither way and gives a half-open probe's place back). In a lane of a listed provider
// a RATE_LIMITED answer is its sender's (push services limit each VAPID key on its own): it
// pauses that sender, and counts neither toward the provider's breaker nor against its rate;
// the breaker keeps counting failures (5xx) and no answer.
func (a *admission) end(now time.Time, out *taxonomy.Outcome) {
	if a.proxy != nil {
		pr := limits.Excluded
		if out != nil {
			pr = proxyResult(*out)
		}
		a.proxy(pr)
	}
	result, limited, retryAfter := limits.Excluded, false, time.Duration(0)
	if out != nil {
		result, limited = breakerResult(*out), out.Code == taxonomy.RateLimited
		if limited || out.Code == taxonomy.ProviderDown {
			retryAfter = out.RetryAfter // the host asked for a pause; only its own jobs wait
		}
		if a.host != "" {
			a.hosts.Record(a.host, hostResult(*out), now)
			if a.proven != nil {
				switch {
				case out.Code == taxonomy.TransportError:
					a.proven.Forget(a.host)
				case result == limits.Success && out.Status > 0:
					a.proven.Prove(a.host)
				}
			}
		}
	}
	if a.done == nil {
		a.permit.Done(now, result, limited, retryAfter)
		return
	}
	switch {
	case limited:
		a.done(limits.Excluded)
		reason := fmt.Sprintf("%s %d, Retry-After %s", out.Code, out.Status, out.RetryAfter)
		until := a.sender.Limited(a.key, now, out.RetryAfter, reason)
		if a.park != nil && out.RetryAfter > a.parkAfter {
			a.park(a.key, until, reason)
		}
	default:
		a.done(result)
		if out != nil && out.Status > 0 {
			a.sender.Answered(a.key)
		}
	}
}

// passBreakers asks the breakers whether a delivery may go now. In a lane of listed providers
// the delivery's sender (key, its VAPID key name) must not be paused by the provider (a pause
// of up to hostWaitMax is waited here, a longer one puts the job back until it ends), then the
// provider's ratio breaker decides (a provider is one service). In the fallback lane every
// client-supplied host has its own breaker and 429 throttle (limits.HostLimits), so one bad
// host neither pauses nor slows the others; a delivery to a throttled host waits here for the
// host's own token only up to hostWaitMax. When the delivery may not go, retryIn says when to
// try it again (0: the lane is stopping, leave it where it is).
func (l *lane) passBreakers(stop context.Context, host, key string) (a admission, retryIn time.Duration, err error) {
	// The proxy's breaker first: while the proxy is down nothing the others could say matters,
	// and a job it refuses is put back without anyone judging the push service.
	var proxyDone func(limits.Result)
	if pb := l.lim.proxyBreaker(); pb != nil {
		done, err := pb.Allow()
		if err != nil {
			return admission{}, max(pb.OpenFor(), putBackDelay(l.cfg.Rand())), err
		}
		proxyDone = done
	}
	a, retryIn, err = l.passProviderBreakers(stop, host, key)
	if err != nil {
		if proxyDone != nil {
			proxyDone(limits.Excluded) // nothing went out: a half-open probe's place is given back
		}
		return a, retryIn, err
	}
	a.proxy = proxyDone
	return a, 0, nil
}

// passProviderBreakers is passBreakers past the proxy's breaker.
func (l *lane) passProviderBreakers(stop context.Context, host, key string) (a admission, retryIn time.Duration, err error) {
	cfg := l.cfg
	hl := l.lim.hostLimits()
	if hl == nil {
		if wait := l.lim.keys.Wait(key, cfg.Now()); wait > hostWaitMax {
			return admission{}, wait + putBackDelay(cfg.Rand()), errKeyPaused
		} else if wait > 0 {
			if sleep(stop, wait); stop.Err() != nil {
				return admission{}, 0, stop.Err()
			}
		}
		done, err := l.lim.breaker().Allow()
		if err != nil { // open, or half-open with every probe out
			return admission{}, max(l.lim.breaker().OpenFor(), putBackDelay(cfg.Rand())), err
		}
		return admission{done: done, key: key, sender: l.lim.keys, park: l.lim.parkKey, parkAfter: cfg.Backoff.Cap}, 0, nil
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

// hostKey is the host breaker's key for the endpoint of j, or "" when the host breaker does not
// guard it. It guards the hosts no registry entry lists (the fallback lane's self-hosted and
// unknown services), which share one lane, so one dead host among them would otherwise hold
// the lane's slots for a timeout each. A listed provider's hosts are guarded by its ratio
// breaker, which pauses the lane without spending attempts; a host breaker there would turn a
// stalled provider's jobs into CIRCUIT_OPEN retries and keep its half-open probes from
// reaching it for the host cooldown.
func (l *lane) hostKey(j *jobfmt.Job) string {
	endpoint := j.Subscription.Endpoint
	route, err := l.cfg.registry().ResolveParsed(endpoint, j.Parsed.URL(endpoint))
	if err != nil || !route.Unknown {
		return "" // intake refused unroutable endpoints; a registry reload may differ, and the adapter says so
	}
	return route.Authority
}
