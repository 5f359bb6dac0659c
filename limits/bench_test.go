package limits_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// The per-delivery cost of the limits on a lane's hot path. Run with -benchmem.

// hostNames are n distinct host:port names, push0.example:443 on.
func hostNames(n int) []string {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("push%d.example:443", i)
	}
	return hosts
}

func BenchmarkBreakerAllowDone(b *testing.B) {
	br := limits.NewBreaker("p", limits.BreakerConfig{}, nil)
	for b.Loop() {
		done, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(limits.Success)
	}
}

func BenchmarkBreakerAllowDoneParallel(b *testing.B) {
	br := limits.NewBreaker("p", limits.BreakerConfig{}, nil)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			done, err := br.Allow()
			if err != nil {
				b.Error(err)
				return
			}
			done(limits.Success)
		}
	})
}

// A full table of hosts, a quarter of them skipped: Allow is a map lookup under a mutex.
func BenchmarkHostBreakerAllow(b *testing.B) {
	h := limits.NewHostBreaker(limits.HostBreakerConfig{})
	hosts := hostNames(4096)
	for i := range hosts {
		n := 1
		if i%4 == 0 {
			n = 3
		}
		for range n {
			h.Record(hosts[i], limits.TransportFailed, t0)
		}
	}
	now := t0.Add(time.Second)
	i := 0
	for b.Loop() {
		h.Allow(hosts[i%len(hosts)], now)
		i++
	}
}

// Transport failures on ever new hosts: every Record evicts the least recently failing.
func BenchmarkHostBreakerRecordEvict(b *testing.B) {
	h := limits.NewHostBreaker(limits.HostBreakerConfig{MaxHosts: 4096})
	hosts := hostNames(8192)
	i := 0
	for b.Loop() {
		h.Record(hosts[i%len(hosts)], limits.TransportFailed, t0)
		i++
	}
}

func BenchmarkSlotsTryAcquireRelease(b *testing.B) {
	s := limits.NewSlots(limits.SlotsConfig{Cap: 64})
	for b.Loop() {
		if err := s.TryAcquire(false, "recipient-1"); err != nil {
			b.Fatal(err)
		}
		s.Release(false, "recipient-1")
	}
}

func BenchmarkSlotsTryAcquireReleaseParallel(b *testing.B) {
	s := limits.NewSlots(limits.SlotsConfig{Cap: 1 << 20})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.TryAcquire(true, "recipient-1"); err != nil {
				b.Error(err)
				return
			}
			s.Release(true, "recipient-1")
		}
	})
}

// The per-send cost of HostLimits on the fallback lane's hot path, Admit then Done, with a full
// table of 4096 tracked hosts: for a host never tracked (every healthy one), for a tracked host
// (closed, failures in its window) and for a throttled one (its own token reserved).
func BenchmarkHostLimitsAdmitDone(b *testing.B) {
	full := func() *limits.HostLimits {
		h := limits.NewHostLimits(limits.HostLimitsConfig{Rate: 100, Burst: 20, MaxHosts: 4096})
		for i, host := range hostNames(4096) {
			p, _, _ := h.Admit(host, t0)
			p.Done(t0, limits.Failure, i == 0, 0)
		}
		return h
	}
	now := t0.Add(time.Second)
	tests := []struct{ name, host string }{
		{"untracked", "healthy.example:443"},
		{"tracked", "push1.example:443"},
		{"throttled", "push0.example:443"},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			h := full()
			for b.Loop() {
				p, _, err := h.Admit(tc.host, now)
				if err != nil {
					b.Fatal(err)
				}
				p.Done(now, limits.Success, false, 0)
			}
		})
	}
}

func BenchmarkHostLimitsAdmitDoneParallel(b *testing.B) {
	now := t0
	h := limits.NewHostLimits(limits.HostLimitsConfig{})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _, err := h.Admit("healthy.example:443", now)
			if err != nil {
				b.Error(err)
				return
			}
			p.Done(now, limits.Success, false, 0)
		}
	})
}

// Failures on ever new hosts: every Done starts tracking one and forgets the least recently
// failing; its bytes are what a tracked host costs.
func BenchmarkHostLimitsTrackEvict(b *testing.B) {
	now := t0
	h := limits.NewHostLimits(limits.HostLimitsConfig{MaxHosts: 4096})
	hosts := hostNames(8192)
	i := 0
	for b.Loop() {
		p, _, err := h.Admit(hosts[i%len(hosts)], now)
		if err != nil {
			b.Fatal(err)
		}
		p.Done(now, limits.Failure, false, 0)
		i++
	}
}
