// Package limits holds the admission controls that keep one push service from taking the
// capacity another needs:
//
//   - Bucket: the request rate a push service meters (x/time/rate), cut multiplicatively on
//     throttling and recovered additively toward the configured rate;
//   - Slots: the requests one provider keeps in flight in this process, with a share for
//     retries and a cap per recipient;
//   - Breaker: the ratio breaker of one provider, on gobreaker/v2's two-step breaker with a
//     rolling window, half-open probes and excluded outcomes;
//   - HostBreaker: a consecutive-failure breaker for every host, bounded to MaxHosts;
//   - HostLimits: a ratio breaker (a Breaker) and a 429 throttle for each host of a lane whose
//     hosts are client-supplied, bounded to MaxHosts, so one host's 5xx and 429 answers neither
//     pause nor slow the lane's other hosts (its doc says which limits are per provider and
//     which per host);
//   - ProvenHosts: the client-supplied hosts seen answering, bounded to MaxHosts, so a lane can
//     give the hosts never seen answering only a small part of its capacity.
//
// One meaning of zero, here as in every configuration of this project (its Go structs,
// registry.yaml and the flags): a cap that may be switched off is switched off by 0; a setting
// that cannot be off (a size, a ratio, a cooldown) takes its documented default (the Default*
// constants) when it is 0.
//
// Every limit takes its time from the caller (a now argument) so tests step a clock instead of
// sleeping. Breaker is the exception: gobreaker reads time.Now itself, so its tests, and those
// of HostLimits, whose hosts' breakers are Breakers, run in a testing/synctest bubble whose
// fake clock they step with time.Sleep.
package limits

import (
	"errors"
	"time"
)

// orDefault gives a setting its default def when it is zero (or negative, which none of the
// settings it is used for can mean).
func orDefault[T int | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// ErrNoCapacity is returned by TryAcquire when every slot is taken.
var ErrNoCapacity = errors.New("limits: no free slot")
