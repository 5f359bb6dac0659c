package dispatch

import (
	"context"
	"sync"
	"time"
)

// Redis error backoff: every loop waits this long after a failed call, doubling up to the
// maximum, so a lost Redis costs a log line every few seconds instead of a spinning CPU.
const (
	redisRetryMin = 100 * time.Millisecond
	redisRetryMax = 5 * time.Second
)

// stopper is the stop signal every loop embeds: shutdown closes done once; the loop's own
// goroutine turns it into a context with untilClosed.
type stopper struct {
	done chan struct{}
	once sync.Once
}

func newStopper() stopper { return stopper{done: make(chan struct{})} }

// shutdown tells the loop to stop; it returns at once. The loop's goroutine is waited for
// through the WaitGroup given to start, so that Run can stop several loops together and then
// wait for all of them.
func (s *stopper) shutdown() { s.once.Do(func() { close(s.done) }) }

// untilClosed returns a context that is cancelled when done is closed. The returned cancel
// must be called; it also waits for the watching goroutine, so nothing outlives the caller.
func untilClosed(done <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		<-exited
	}
}

// redisBackoff is how long one loop waits after a failed Redis call, doubling from redisRetryMin
// to redisRetryMax. The zero value is ready.
type redisBackoff struct{ next time.Duration }

// wait sleeps the current backoff and doubles it; false when ctx ended or stop (nil: never)
// was closed first.
func (b *redisBackoff) wait(ctx context.Context, stop <-chan struct{}) bool {
	b.next = max(b.next, redisRetryMin)
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, redisRetryMax)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// reset starts the next failure's backoff from the minimum again.
func (b *redisBackoff) reset() { b.next = 0 }

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// watchdogSlack is what a ticking loop's /livez bound allows beyond three periods: a round that
// waits for Redis (a dial, a read timeout, the backoff) still ticks within it.
const watchdogSlack = 30 * time.Second

// watchdogBound is the /livez bound of a loop that ticks every period.
func watchdogBound(period time.Duration) time.Duration { return 3*period + watchdogSlack }

// roundContext bounds one round of a watched loop to half its /livez bound. go-redis, given a
// Redis that does not answer (a partition drops packets rather than refusing them), retries
// each dial and each command for longer than that bound; without a deadline such a round
// would stop the loop's ticks and /livez would restart a pod whose only fault is Redis.
func roundContext(ctx context.Context, period time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, watchdogBound(period)/2)
}

// ticking runs round once a period until done is closed: the shape of the promoter, the
// reclaimer, the prober, the janitor and the budget loop. With atOnce the first round runs
// before the first tick. A failed round is logged and tried again after the Redis backoff; a
// good one resets the backoff. The loop registers with cfg.Health as what, and ticks at every
// round, failed or not: /livez sees a loop that stopped turning, never a Redis outage.
func ticking(done <-chan struct{}, period time.Duration, atOnce bool, cfg *Config, what string, round func(context.Context) error) {
	ctx, cancel := untilClosed(done)
	defer cancel()
	beat := cfg.Health.Loop(what, watchdogBound(period))
	defer beat.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	var backoff redisBackoff
	wait := !atOnce
	for {
		if wait {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		beat.Tick()
		wait = true
		rctx, cancelRound := roundContext(ctx, period)
		err := round(rctx)
		cancelRound()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			cfg.Logger.Warn("dispatch: "+what+" failed; retrying", "err", err)
			if !backoff.wait(ctx, nil) {
				return
			}
			wait = false
			continue
		}
		backoff.reset()
	}
}

// tickingLoop is a loop whose whole work is a round that ticking runs once a period, from start
// until shutdown: the promoter, the janitor, the prober and the statistics loop.
type tickingLoop struct {
	stopper
	cfg    *Config
	what   string // its name in the logs and on /livez
	period time.Duration
	atOnce bool // the first round runs at start rather than one period in
	round  func(context.Context) error
}

func newTickingLoop(cfg *Config, what string, period time.Duration, atOnce bool, round func(context.Context) error) *tickingLoop {
	return &tickingLoop{stopper: newStopper(), cfg: cfg, what: what, period: period, atOnce: atOnce, round: round}
}

// start runs the loop in a goroutine counted in wg.
func (l *tickingLoop) start(wg *sync.WaitGroup) {
	goCounted(wg, func() { ticking(l.done, l.period, l.atOnce, l.cfg, l.what, l.round) })
}

// goCounted runs fn in a goroutine counted in wg.
func goCounted(wg *sync.WaitGroup, fn func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		fn()
	}()
}
