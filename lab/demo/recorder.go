package demo

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/lab/demoreport"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// recorder collects what the worker reports (every attempt, every breaker change) into
// one-second buckets per provider.
type recorder struct {
	start time.Time

	mu       sync.Mutex
	queued   int                                 // guarded by mu
	accepted map[string][]int                    // guarded by mu; provider -> accepted per second
	codes    map[string]map[taxonomy.Code]int    // guarded by mu; provider -> outcome -> attempts
	lat      map[string][]time.Duration          // guarded by mu; enqueue -> accepted answer
	recent   map[string][]sample                 // guarded by mu; the last seconds, for the live table
	breakers map[string][]demoreport.BreakerSpan // guarded by mu
	state    map[string]limits.State             // guarded by mu
	fault    time.Duration                       // guarded by mu; 0: none yet
}

type sample struct {
	at  time.Time
	lat time.Duration
}

func newRecorder(start time.Time) *recorder {
	r := &recorder{start: start, accepted: map[string][]int{}, codes: map[string]map[taxonomy.Code]int{},
		lat: map[string][]time.Duration{}, recent: map[string][]sample{},
		breakers: map[string][]demoreport.BreakerSpan{}, state: map[string]limits.State{}}
	for _, p := range providerOrder {
		r.codes[p] = map[taxonomy.Code]int{}
		r.breakers[p] = []demoreport.BreakerSpan{{Provider: p, State: limits.Closed.String()}}
	}
	return r
}

func (r *recorder) addEnqueued(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queued += n
}

func (r *recorder) enqueued() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queued
}

func (r *recorder) faultAt(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fault = max(t.Sub(r.start), time.Millisecond)
}

// attempt is dispatch.Config.OnAttempt.
func (r *recorder) attempt(a dispatch.Attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.codes[a.Provider] == nil {
		r.codes[a.Provider] = map[taxonomy.Code]int{}
	}
	r.codes[a.Provider][a.Code]++
	if a.Code != taxonomy.Accepted {
		return
	}
	sec := max(0, int(a.At.Sub(r.start)/time.Second))
	s := r.accepted[a.Provider]
	for len(s) <= sec {
		s = append(s, 0)
	}
	s[sec]++
	r.accepted[a.Provider] = s
	d := a.At.Sub(a.Enqueued)
	r.lat[a.Provider] = append(r.lat[a.Provider], d)
	r.recent[a.Provider] = append(r.recent[a.Provider], sample{a.At, d})
}

// breaker is dispatch.Config.OnBreakerChange: it runs under the breaker's lock, and only
// records.
func (r *recorder) breaker(provider string, _, to limits.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Since(r.start)
	spans := r.breakers[provider]
	if n := len(spans); n > 0 {
		spans[n-1].To = max(now, spans[n-1].From+time.Millisecond)
	}
	r.breakers[provider] = append(spans, demoreport.BreakerSpan{Provider: provider, State: to.String(), From: now})
	r.state[provider] = to
}

// tableRow is one provider's line of the live table.
type tableRow struct {
	provider   string
	perSec     float64
	p50, p99   time.Duration
	accepted   int
	other      map[taxonomy.Code]int
	breaker    string
	hasLatency bool
}

// snapshot is the live table at now: the rate over the last 3 seconds, the latency over the
// last 10.
func (r *recorder) snapshot(now time.Time) []tableRow {
	r.mu.Lock()
	defer r.mu.Unlock()
	var rows []tableRow
	for _, p := range providerOrder {
		recent := r.recent[p]
		for len(recent) > 0 && now.Sub(recent[0].at) > 10*time.Second {
			recent = recent[1:]
		}
		r.recent[p] = recent
		row := tableRow{provider: p, other: map[taxonomy.Code]int{}, breaker: r.state[p].String()}
		var lats []time.Duration
		for _, s := range recent {
			if now.Sub(s.at) <= 3*time.Second {
				row.perSec++
			}
			lats = append(lats, s.lat)
		}
		row.perSec /= 3
		if len(lats) > 0 {
			slices.Sort(lats)
			row.p50, row.p99, row.hasLatency = cli.Quantile(lats, 50), cli.Quantile(lats, 99), true
		}
		for c, n := range r.codes[p] {
			if c == taxonomy.Accepted {
				row.accepted = n
			} else {
				row.other[c] = n
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// report turns the run into demoreport's model.
func (r *recorder) report(end time.Time, o Options, redisURL string) demoreport.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	dur := end.Sub(r.start)
	secs := int(dur / time.Second)
	rep := demoreport.Report{
		Title:     "webpush-gateway demo: provider isolation under a fault",
		Generated: end.UTC().Truncate(time.Second),
		Step:      time.Second,
		Duration:  time.Duration(secs) * time.Second,
		Setup: []string{
			fmt.Sprintf("%d jobs/s for %s across fcm 72%%, autopush 19%%, apple 6%%, wns 3%%, a self-hosted service 2%%", o.Rate, o.Duration),
			"Redis: " + redisURL + "; push services: pushsim over TLS and HTTP/2 on loopback; registry: the shipped registry.yaml",
			fmt.Sprintf("%d jobs enqueued", r.queued),
		},
	}
	if r.fault > 0 {
		rep.Fault = demoreport.Window{From: r.fault, Label: "fault: " + o.Fault.label}
	}
	for _, p := range providerOrder {
		s := slices.Clone(r.accepted[p])
		for len(s) < secs {
			s = append(s, 0)
		}
		rates := make([]float64, secs)
		for i := range secs {
			rates[i] = float64(s[i])
		}
		rep.Series = append(rep.Series, demoreport.Series{Provider: p, Rate: rates})
		spans := slices.Clone(r.breakers[p])
		spans[len(spans)-1].To = 0
		rep.Breakers = append(rep.Breakers, spans...)
		sum := demoreport.ProviderSummary{Provider: p, Outcomes: map[string]int{}}
		for c, n := range r.codes[p] {
			sum.Outcomes[string(c)] = n
		}
		lats := slices.Clone(r.lat[p])
		sum.Sent = len(lats)
		if len(lats) > 0 {
			slices.Sort(lats)
			sum.P50, sum.P99 = cli.Quantile(lats, 50), cli.Quantile(lats, 99)
		}
		rep.Providers = append(rep.Providers, sum)
	}
	return rep
}
