package limits_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// Many goroutines on different hosts at once (run with -race): the healthy hosts are never
// refused nor made to wait while the others fail, answer 429 or come and go past MaxHosts.
func TestHostLimitsConcurrent(t *testing.T) {
	const rounds = 500
	tests := []struct {
		name     string
		maxHosts int
		// churn: goroutines failing on a new host every round, so the table keeps evicting.
		churn int
		// want: the counts once every goroutine is done; nil when eviction makes them vary.
		want *limits.HostStats
	}{
		// 4 failing hosts and 2 answering 429 (a failure too), all open; the 429 ones throttled.
		{"no eviction", 64, 0, &limits.HostStats{Tracked: 6, Open: 6, Throttled: 2}},
		{"eviction all along", 8, 4, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := limits.NewHostLimits(limits.HostLimitsConfig{Breaker: testBreakerConfig, Rate: 1000, Burst: 10, MaxHosts: tc.maxHosts})
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			report := func(err error) {
				select {
				case errs <- err:
				default:
				}
			}
			run := func(host func(round int) string, r limits.Result, rateLimited bool, healthy bool) {
				wg.Go(func() {
					for i := range rounds {
						now := t0.Add(time.Duration(i) * time.Microsecond)
						p, wait, err := h.Admit(host(i), now)
						if healthy && (err != nil || wait != 0) {
							report(fmt.Errorf("healthy %s, round %d: Admit = %v, %v", host(i), i, wait, err))
							return
						}
						if err != nil && !errors.Is(err, limits.ErrOpen) {
							report(fmt.Errorf("%s: Admit = %v", host(i), err))
							return
						}
						p.Done(now, r, rateLimited, 0)
					}
				})
			}
			for g := range 4 {
				run(func(int) string { return fmt.Sprintf("good%d:443", g) }, limits.Success, false, true)
				run(func(int) string { return fmt.Sprintf("bad%d:443", g) }, limits.Failure, false, false)
			}
			for g := range 4 { // two goroutines on each of two hosts answering 429
				run(func(int) string { return fmt.Sprintf("slow%d:443", g/2) }, limits.Failure, true, false)
			}
			for g := range tc.churn {
				run(func(i int) string { return fmt.Sprintf("churn%d-%d:443", g, i) }, limits.Failure, false, false)
			}
			stop := make(chan struct{})
			watched := make(chan struct{})
			go func() { // reads the counts and reconfigures while the others run
				defer close(watched)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					s := h.Stats()
					if s.Tracked > tc.maxHosts || s.Open < 0 || s.Open > s.Tracked || s.Throttled < 0 || s.Throttled > s.Tracked {
						report(fmt.Errorf("Stats = %+v with MaxHosts %d", s, tc.maxHosts))
						return
					}
					h.Configure(t0, float64(1000+i%2), 10)
				}
			}()
			wg.Wait()
			close(stop)
			<-watched
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			now := t0.Add(rounds * time.Microsecond)
			for g := range 4 {
				host := fmt.Sprintf("good%d:443", g)
				if st, r := h.State(host, now), h.Rate(host, now); st != limits.Closed || !math.IsInf(r, 1) {
					t.Errorf("%s: State %v, Rate %v; want closed with no rate of its own", host, st, r)
				}
			}
			if tc.want != nil {
				if diff := cmp.Diff(*tc.want, h.Stats()); diff != "" {
					t.Errorf("Stats (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// FuzzHostLimits runs a sequence of calls on four hosts with a table of three and checks the
// invariants after every call: the counts agree with the hosts' states, stay within MaxHosts,
// and a host that never failed is never tracked. Each byte is one call: bits 0-1 the host,
// bits 2-4 the call, bits 5-7 how far the clock moves first (in 700ms steps).
func FuzzHostLimits(f *testing.F) {
	f.Add([]byte{0x04, 0x04, 0x04, 0x04, 0xe0, 0x00, 0x18, 0x1c})
	f.Add([]byte{0x0c, 0x0d, 0x0e, 0x0f, 0x2c, 0x10, 0x11, 0x12, 0x13, 0xff, 0x1c, 0x1d})
	f.Add([]byte("the fallback lane's hosts are client-supplied, so anyone can point one at their own"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		h := limits.NewHostLimits(limits.HostLimitsConfig{
			Breaker: limits.BreakerConfig{FailureRatio: 0.5, Window: 2 * time.Second, MinSamples: 2, Cooldown: 3 * time.Second, Probes: 2},
			Rate:    50, Burst: 2, MaxHosts: 3,
		})
		hosts := []string{"a:443", "b:443", "c:443", "d:443"}
		hurt := map[string]bool{}
		var held []limits.HostPermit
		var heldHost []string
		now := t0
		for i, b := range ops {
			now = now.Add(time.Duration(b>>5) * 700 * time.Millisecond)
			host := hosts[b&3]
			op := (b >> 2) & 7
			switch op {
			case 0, 1, 2, 3, 4, 5:
				p, wait, err := h.Admit(host, now)
				switch {
				case err == nil && wait < 0:
					t.Fatalf("op %d: Admit(%s) = %v, nil", i, host, wait)
				case errors.Is(err, limits.ErrOpen) && h.State(host, now) == limits.Closed:
					t.Fatalf("op %d: Admit(%s) = ErrOpen with its breaker closed", i, host)
				case errors.Is(err, limits.ErrPaused) && wait <= 0:
					t.Fatalf("op %d: Admit(%s) = ErrPaused for %v", i, host, wait)
				case err != nil:
					continue
				}
				switch op {
				case 0:
					p.Done(now, limits.Success, false, 0)
				case 1:
					p.Done(now, limits.Failure, false, 0)
					hurt[host] = true
				case 2:
					p.Cancel(now)
				case 3:
					p.Done(now, limits.Failure, true, 0)
					hurt[host] = true
				case 4:
					p.Done(now, limits.Failure, true, time.Second)
					hurt[host] = true
				case 5:
					held = append(held, p)
					heldHost = append(heldHost, host)
				}
			case 6, 7: // end the oldest held permit, a success or a failure
				if len(held) == 0 {
					continue
				}
				r := limits.Success
				if op == 7 {
					r = limits.Failure
					hurt[heldHost[0]] = true
				}
				held[0].Done(now, r, false, 0)
				held, heldHost = held[1:], heldHost[1:]
			}
			open, limited := 0, 0
			for _, k := range hosts {
				st, r := h.State(k, now), h.Rate(k, now)
				if st != limits.Closed {
					open++
				}
				if !math.IsInf(r, 1) {
					limited++
				}
				if !hurt[k] && (st != limits.Closed || !math.IsInf(r, 1)) {
					t.Fatalf("op %d: %s never failed but is %v at rate %v", i, k, st, r)
				}
			}
			s := h.Stats()
			if s.Tracked > 3 || s.Open != open || s.Throttled < limited || s.Throttled > s.Tracked {
				t.Fatalf("op %d: Stats %+v; %d hosts not closed, %d with a rate of their own", i, s, open, limited)
			}
		}
	})
}
