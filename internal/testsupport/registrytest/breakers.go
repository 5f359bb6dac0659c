package registrytest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// BreakerLog records every breaker change a worker reports through its OnBreakerChange hook,
// with the wall-clock time of each, for tests that wait for a provider's breaker to open or
// close and check the order it went through. The zero value is ready to use.
type BreakerLog struct {
	mu      sync.Mutex
	changes []BreakerChange // guarded by mu
}

// BreakerChange is one change of a provider's breaker, from From to To, reported at At.
type BreakerChange struct {
	Provider string
	From, To limits.State
	At       time.Time
}

// Hook is the worker's OnBreakerChange: it appends under its own lock and returns, as a hook
// called under the breaker's lock must.
func (b *BreakerLog) Hook(provider string, from, to limits.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes = append(b.changes, BreakerChange{provider, from, to, time.Now()})
}

// Of returns the changes of one provider, oldest first.
func (b *BreakerLog) Of(provider string) []BreakerChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []BreakerChange
	for _, c := range b.changes {
		if c.Provider == provider {
			out = append(out, c)
		}
	}
	return out
}

// Reached reports whether provider's breaker has entered state to.
func (b *BreakerLog) Reached(provider string, to limits.State) bool {
	for _, c := range b.Of(provider) {
		if c.To == to {
			return true
		}
	}
	return false
}

// State is provider's breaker state after the last change reported (Closed when none was).
func (b *BreakerLog) State(provider string) limits.State {
	cs := b.Of(provider)
	if len(cs) == 0 {
		return limits.Closed
	}
	return cs[len(cs)-1].To
}

// OpenedIn reports whether provider's breaker opened in [from, to).
func (b *BreakerLog) OpenedIn(provider string, from, to time.Time) bool {
	for _, c := range b.Of(provider) {
		if c.To == limits.Open && !c.At.Before(from) && c.At.Before(to) {
			return true
		}
	}
	return false
}

// Summary lists the changes of every provider with their time after since, for a test's log.
func (b *BreakerLog) Summary(since time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var parts []string
	for _, c := range b.changes {
		parts = append(parts, fmt.Sprintf("%+.1fs %s %v->%v", c.At.Sub(since).Seconds(), c.Provider, c.From, c.To))
	}
	return strings.Join(parts, ", ")
}
