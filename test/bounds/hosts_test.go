package bounds_test

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// podLimitMiB is the memory limit of the worker's pod in deploy/ (512Mi); the worker must stay
// within half of it whatever hosts its clients name.
const podLimitMiB = 512

// TestTenThousandHostsStayWithinHalfThePodLimit sends one push to each of 10,000 distinct
// client-supplied hosts (all the fallback's) and holds the worker, after the sends, to its
// connection budget: at most FallbackIdleConns connections open to the push service, the
// descriptors and goroutines of those and no more, and at most half the pod's memory at the
// peak.
func TestTenThousandHostsStayWithinHalfThePodLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 TLS handshakes")
	}
	const hosts = 10_000
	rg := newRig(t)
	lines := make([][]byte, hosts)
	ids := make([]string, hosts)
	for i := range hosts {
		host := fmt.Sprintf("h%05d.push.example.net", i)
		sub, err := rg.sim.Subscribe(pushsim.Generic, host, rg.key)
		if err != nil {
			t.Fatal(err)
		}
		// One override a host: the worker dials each by its own name, with its own SNI,
		// certificate and connection, as it would distinct self-hosted services.
		rg.args = append(rg.args, "--connect-to", host+":443="+rg.sim.Addr())
		ids[i] = fmt.Sprintf("job-%05d", i)
		lines[i] = rg.job(ids[i], sub)
	}
	rg.start(0)
	addr := rg.httpAddr()
	rg.waitReady(addr)
	before := rg.usage(addr)
	t.Logf("before the sends: %s", before)

	start := time.Now()
	rg.enqueue(lines)
	rep := rg.waitDone(ids, 5*time.Minute)
	if rep.ExactlyOne != hosts {
		t.Fatalf("audit: %+v; want all %d jobs with exactly one terminal record", rep, hosts)
	}
	if got := len(rg.sim.Deliveries()); got < hosts {
		t.Fatalf("pushsim saw %d deliveries, want %d", got, hosts)
	}
	took := time.Since(start)
	after := rg.usage(addr)
	conns := rg.connsTo(rg.sim.Addr())
	t.Logf("after %d sends to %d hosts in %s: %s, %d connections open to the push service", hosts, hosts, took.Round(time.Millisecond), after, conns)

	if after.metricsErr != nil {
		t.Fatalf("GET /metrics after the sends: %v", after.metricsErr)
	}
	if conns > adapter.FallbackIdleConns {
		t.Errorf("%d connections open to the push service once every send is over, want at most FallbackIdleConns (%d)", conns, adapter.FallbackIdleConns)
	}
	// Each connection is one descriptor and one or two goroutines (HTTP/2's read loop,
	// HTTP/1's read and write loops); the slack is Redis's pool growing under the load.
	const slack = 48
	if limit := before.fds + adapter.FallbackIdleConns + slack; after.fds > limit {
		t.Errorf("%d descriptors after the sends, want at most %d (%d before, %d idle connections, %d slack)", after.fds, limit, before.fds, adapter.FallbackIdleConns, slack)
	}
	if limit := before.goroutines + 2*adapter.FallbackIdleConns + slack; after.goroutines > limit {
		t.Errorf("%.0f goroutines after the sends, want at most %.0f", after.goroutines, limit)
	}
	if limit := int64(podLimitMiB/2) << 10; after.hwmKiB > limit || after.rssKiB > limit {
		t.Errorf("RSS %d MiB, peak %d MiB: want both within half the pod limit, %d MiB", after.rssKiB>>10, after.hwmKiB>>10, podLimitMiB/2)
	}
}

// waitReady waits for /readyz to answer 200.
func (rg *rig) waitReady(addr string) {
	rg.t.Helper()
	end := time.Now().Add(30 * time.Second)
	for {
		if st, _, err := get("http://" + addr + "/readyz"); err == nil && st == 200 {
			return
		}
		if time.Now().After(end) {
			rg.t.Fatal("the worker was not ready within 30 s")
		}
		time.Sleep(100 * time.Millisecond) // polling the worker's readiness
	}
}

// connsTo counts the worker's TCP sockets connected to addr, from /proc: the descriptors it
// holds whose socket's remote end is addr.
func (rg *rig) connsTo(addr string) int {
	rg.t.Helper()
	pid := rg.w.Pid()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		rg.t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		rg.t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", p)
	n := 0
	for _, file := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if i == 0 || len(f) < 10 {
				continue
			}
			// f[2] is the remote address:port in hex, f[9] the socket's inode.
			if strings.HasSuffix(f[2], want) && inodes[f[9]] {
				n++
			}
		}
	}
	return n
}
