package limits_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// The host tables keep a copy of each host's name, not the string they were given: the lane's
// host names are substrings of whole job entries (up to 64 KiB each), which a table that
// remembers thousands of hosts would otherwise keep alive.
func TestHostTablesDoNotKeepTheirCallersStrings(t *testing.T) {
	const hosts, entry = 200, 64 << 10
	now := time.Unix(1_750_000_000, 0)
	hl := limits.NewHostLimits(limits.HostLimitsConfig{MaxHosts: 4096})
	hb := limits.NewHostBreaker(limits.HostBreakerConfig{MaxHosts: 4096})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for i := range hosts {
		// A fresh entry each time, with the host's name inside it.
		raw := fmt.Sprintf("push-%d.example%s", i, strings.Repeat(" ", entry))
		host := raw[:strings.IndexByte(raw, ' ')]
		p, _, err := hl.Admit(host, now)
		if err != nil {
			t.Fatalf("Admit(%s): %v", host, err)
		}
		p.Done(now, limits.Failure, true, time.Minute) // a 429 with Retry-After: the host is tracked
		hb.Record(host, limits.TransportFailed, now)
	}
	if got := hl.Stats().Tracked; got != hosts {
		t.Fatalf("HostLimits tracks %d hosts, want %d", got, hosts)
	}
	if got := hb.Tracked(); got != hosts {
		t.Fatalf("HostBreaker tracks %d hosts, want %d", got, hosts)
	}
	// Kept entries would hold hosts*entry = 12.5 MiB; the names and the tables' own state hold
	// well under a tenth of that.
	if grown := heap() - before; grown > hosts*entry/10 {
		t.Errorf("the heap grew by %d KiB for %d tracked hosts: the tables keep their callers' strings", grown>>10, hosts)
	}
	runtime.KeepAlive(hl)
	runtime.KeepAlive(hb)
}
