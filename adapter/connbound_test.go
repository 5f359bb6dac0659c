package adapter_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// openProxy forwards TCP connections to target and counts them: how many were opened in all,
// and how many are open now (a connection counts until the sender's side has closed it).
func openProxy(t *testing.T, target string) (addr string, opened, open *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	opened, open = new(atomic.Int64), new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			opened.Add(1)
			open.Add(1)
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					open.Add(-1)
					return
				}
				defer up.Close()
				go func() { io.Copy(c, up); c.Close() }()
				io.Copy(up, c) // until the sender closes its side
				open.Add(-1)
			}()
		}
	}()
	return ln.Addr().String(), opened, open
}

// boundHarness is a Sender whose fallback reaches pushsim, through proxies, under many host
// names: n one-off hosts through one proxy, and one host that sends again and again through
// another.
type boundHarness struct {
	*harness
	sender         *adapter.Sender
	oneOff         []job.Subscription
	hot            job.Subscription
	oneOffOpen     *atomic.Int64
	hotOpened      *atomic.Int64
	oneOffOpenedIn *atomic.Int64
}

func newBoundHarness(t *testing.T, n int) *boundHarness {
	t.Helper()
	h := newHarness(t, harnessOptions{})
	oneOffProxy, oneOffOpened, oneOffOpen := openProxy(t, h.sim.Addr())
	hotProxy, hotOpened, _ := openProxy(t, h.sim.Addr())
	b := &boundHarness{harness: h, oneOffOpen: oneOffOpen, hotOpened: hotOpened, oneOffOpenedIn: oneOffOpened}
	specs := []string{"hot.push.example.net:443=" + hotProxy}
	for i := range n {
		host := fmt.Sprintf("h%05d.push.example.net", i)
		specs = append(specs, host+":443="+oneOffProxy)
		b.oneOff = append(b.oneOff, h.subscribeWith(t, pushsim.Generic, host, h.key))
	}
	b.hot = h.subscribeWith(t, pushsim.Generic, "hot.push.example.net", h.key)
	connectTo, err := adapter.ParseConnectTo(specs)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := providers.Parse("registry.yaml", []byte(reuseRegistry))
	if err != nil {
		t.Fatal(err)
	}
	b.sender, err = adapter.NewSender(adapter.Config{Registry: reg, Signer: h.signer, ConnectTo: connectTo, RootCAs: h.sim.CertPool()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.sender.Close)
	return b
}

func (b *boundHarness) send(t *testing.T, sub job.Subscription) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out := b.sender.Send(ctx, &adapter.Message{Subscription: sub, Payload: []byte("hi"), TTL: 60, Key: b.key}); out.Code != taxonomy.Accepted {
		t.Errorf("send: %s %s", out.Code, out.Detail)
	}
}

// waitAtMost polls until v is at most limit (a closed connection reaches the proxy's side as
// an end of stream a moment later), or fails after a few seconds with what it was.
func waitAtMost(t *testing.T, what string, v *atomic.Int64, limit int64) {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for v.Load() > limit {
		if time.Now().After(end) {
			t.Fatalf("%s: %d open, want at most %d", what, v.Load(), limit)
		}
		time.Sleep(10 * time.Millisecond) // polling a count kept by another goroutine
	}
}

// Connections to the fallback's hosts stay within FallbackIdleConns once their requests are
// over, HTTP/2 ones included, long before the idle timeout; a host that sends again keeps its
// connection through a stream of one-off hosts; and no send fails because a connection was
// closed under it, with sends to many hosts at once.
func TestFallbackIdleConnectionsAreBounded(t *testing.T) {
	const n = 200
	b := newBoundHarness(t, n)
	b.send(t, b.hot)
	b.send(t, b.hot) // used again: kept ahead of the one-off hosts
	var wg sync.WaitGroup
	work := make(chan job.Subscription)
	for range 16 {
		wg.Go(func() {
			for s := range work {
				b.send(t, s)
			}
		})
	}
	// The host that sends again does so every 100 ms, well within FallbackIdleTTL, while the
	// one-off hosts come and go.
	hotDone := make(chan struct{})
	hotStopped := make(chan struct{})
	go func() {
		defer close(hotStopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-hotDone:
				return
			case <-tick.C:
				b.send(t, b.hot)
			}
		}
	}()
	for _, s := range b.oneOff {
		work <- s
	}
	close(work)
	wg.Wait()
	close(hotDone)
	<-hotStopped
	if got := b.oneOffOpenedIn.Load(); got < n {
		t.Fatalf("%d connections to %d one-off hosts: the test needs one each", got, n)
	}
	waitAtMost(t, "one-off hosts' connections after their sends", b.oneOffOpen, adapter.FallbackIdleConns)
	if got := b.hotOpened.Load(); got != 1 {
		t.Errorf("the host that sends again opened %d connections, want 1 (kept through %d one-off hosts)", got, n)
	}

	// Again, 16 at a time over hosts whose connections were closed: every send is answered.
	work = make(chan job.Subscription)
	for range 16 {
		wg.Go(func() {
			for s := range work {
				b.send(t, s)
			}
		})
	}
	for round := range 3 {
		for i, s := range b.oneOff {
			if i%3 == round {
				work <- s
			}
		}
	}
	close(work)
	wg.Wait()
	waitAtMost(t, "after the second pass", b.oneOffOpen, adapter.FallbackIdleConns)
}
