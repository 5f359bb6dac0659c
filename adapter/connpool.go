package adapter

import (
	"container/list"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// The bounds on connections no request is using, per provider transport. A connection costs
// a descriptor, a TLS state and, for HTTP/2, a read loop with its buffers. The listed providers
// (FCM, Autopush, Apple, WNS, a self-hosted service the registry names) are reached at a few
// hosts, each with long-lived multiplexed connections worth keeping. The fallback takes every
// client-supplied host the registry does not list: most are seen once, and a client can make up
// as many as it likes, so it keeps few idle connections and not for long.
//
// The bound holds for HTTP/2 too. net/http's MaxIdleConns counts an HTTP/2 connection in its
// idle list, but dropping it from there does not close it: the HTTP/2 pool closes a connection
// only after IdleConnTimeout without streams. So each transport's connections are counted at
// the dialer, and when a dial finds more than the cap open, the connections of the hosts no
// request is using are closed, least recently used first, hosts used once before hosts used
// again. A worker's idle connections are at most the sum of its providers' caps; connections
// in use are bounded by the providers' in-flight caps.
const (
	// ListedIdleConns is the most connections a listed provider's transport keeps open beyond
	// those in use.
	ListedIdleConns = 32
	// ListedIdleTTL is how long a listed provider's connection is kept without a request.
	ListedIdleTTL = 90 * time.Second
	// FallbackIdleConns is the most connections the fallback's transport keeps open beyond
	// those in use.
	FallbackIdleConns = 32
	// FallbackIdleTTL is how long a fallback connection is kept without a request: long enough
	// for a burst of pushes to one host to share it, short because of what a one-off host costs
	// after its connection is closed: the HTTP/2 client leaves a connection that carried
	// a single request, closed soon after it, in its pool (with its buffers) for the lesser of
	// 5 s and IdleConnTimeout, so the memory of closed one-off hosts' connections is this long
	// times the rate new hosts come at.
	FallbackIdleTTL = 2 * time.Second
)

// dyingWait bounds how long a request waits for its host's closed connections to leave the
// HTTP pools before it is sent anyway.
const dyingWait = time.Second

// connBudget counts the connections of one transport by host and closes those of idle hosts
// when there are more than max. It is race-free against the HTTP pools: a host is idle only
// while no request of the transport's RoundTrip is under way for it, and a request for a host
// whose connections the budget is closing waits until the pools have closed them too (the
// pool's own Close of a connection comes after it stops handing the connection out), so no
// request is ever sent on a connection the budget closed.
type connBudget struct {
	max int

	mu    sync.Mutex
	hosts map[string]*hostConns // by dial address "host:port"; guarded by mu
	open  int                   // connections not yet closed; guarded by mu
	// once and again hold the idle hosts with open connections, most recent at the front:
	// once those whose connection has carried one request, again the others. Guarded by mu.
	once, again list.List
}

// hostConns is the state of one host.
type hostConns struct {
	key      string
	conns    map[*trackedConn]struct{} // open connections
	inFlight int                       // requests under way
	reused   bool                      // a request came while a connection was open
	dying    map[*trackedConn]struct{} // connections the budget closed that the pools still hold
	gone     chan struct{}             // closed when dying empties; nil while it is empty
	in       *list.List                // once or again while idle with open connections, else nil
	elem     *list.Element             // h's element of in
}

func newConnBudget(max int) *connBudget {
	return &connBudget{max: max, hosts: make(map[string]*hostConns)}
}

// host returns key's state, created when absent. b.mu must be held.
func (b *connBudget) host(key string) *hostConns {
	h := b.hosts[key]
	if h == nil {
		h = &hostConns{key: key, conns: make(map[*trackedConn]struct{}), dying: make(map[*trackedConn]struct{})}
		b.hosts[key] = h
	}
	return h
}

// begin marks a request for key under way, after any connection of key the budget is closing
// has left the pools. end must follow. The pools close a connection soon after the budget
// does (its read loop fails at once); should one not within dyingWait, it is let go, so that
// a host is never held up for longer.
func (b *connBudget) begin(ctx context.Context, key string) error {
	waited := false
	for {
		b.mu.Lock()
		h := b.host(key)
		if len(h.dying) > 0 && waited {
			b.forget(h)
		}
		if len(h.dying) == 0 {
			h.inFlight++
			if len(h.conns) > 0 {
				h.reused = true
			}
			b.unlist(h)
			b.mu.Unlock()
			return nil
		}
		gone := h.gone
		b.mu.Unlock()
		t := time.NewTimer(dyingWait)
		select {
		case <-gone:
		case <-t.C:
			waited = true
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// end marks a request for key over: its host becomes idle when it was the last one.
func (b *connBudget) end(key string) {
	b.mu.Lock()
	h := b.hosts[key]
	h.inFlight--
	b.settle(h)
	victims := b.trim()
	b.mu.Unlock()
	closeAll(victims)
}

// settle files h after a change: listed when idle with open connections, dropped when nothing
// is left of it. b.mu must be held.
func (b *connBudget) settle(h *hostConns) {
	switch {
	case h.inFlight > 0:
		b.unlist(h)
	case len(h.conns) > 0:
		b.unlist(h)
		h.in = &b.once
		if h.reused {
			h.in = &b.again
		}
		h.elem = h.in.PushFront(h)
	case len(h.dying) == 0:
		b.unlist(h)
		delete(b.hosts, h.key)
	}
}

func (b *connBudget) unlist(h *hostConns) {
	if h.in != nil {
		h.in.Remove(h.elem)
		h.in, h.elem = nil, nil
	}
}

// forget stops waiting for the pools to close h's dying connections. b.mu must be held.
func (b *connBudget) forget(h *hostConns) {
	for c := range h.dying {
		c.state = connClosed
		delete(h.dying, c)
	}
	if h.gone != nil {
		close(h.gone)
		h.gone = nil
	}
}

// trim takes idle hosts' connections away, least recently used first and hosts used once
// first, until at most max are open or no host is idle, and returns them for closing. b.mu must
// be held; the caller closes the victims after unlocking.
func (b *connBudget) trim() []*trackedConn {
	var victims []*trackedConn
	for b.open > b.max {
		e := b.once.Back()
		if e == nil {
			e = b.again.Back()
		}
		if e == nil {
			break
		}
		h := e.Value.(*hostConns)
		b.unlist(h)
		for c := range h.conns {
			delete(h.conns, c)
			c.state = connEvicted
			b.open--
			h.dying[c] = struct{}{}
			victims = append(victims, c)
		}
		if h.gone == nil {
			h.gone = make(chan struct{})
		}
	}
	return victims
}

func closeAll(cs []*trackedConn) {
	for _, c := range cs {
		_ = c.Conn.Close()
	}
}

// track counts a new connection to key, trims, and returns the connection to hand out.
func (b *connBudget) track(key string, nc net.Conn) *trackedConn {
	c := &trackedConn{Conn: nc, b: b}
	b.mu.Lock()
	h := b.host(key)
	c.h = h
	h.conns[c] = struct{}{}
	b.open++
	b.settle(h)
	victims := b.trim()
	b.mu.Unlock()
	closeAll(victims)
	return c
}

// closed is the pools' Close of c.
func (b *connBudget) closed(c *trackedConn) error {
	b.mu.Lock()
	h := c.h
	switch c.state {
	case connOpen:
		c.state = connClosed
		delete(h.conns, c)
		b.open--
		b.settle(h)
		b.mu.Unlock()
		return c.Conn.Close()
	case connEvicted:
		c.state = connClosed
		delete(h.dying, c)
		if len(h.dying) == 0 {
			close(h.gone)
			h.gone = nil
			b.settle(h)
		}
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	return c.Conn.Close() // net.ErrClosed, as a second Close of any net.Conn
}

// Open is how many of the transport's connections are open.
func (b *connBudget) Open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

type connState uint8

const (
	connOpen connState = iota
	connEvicted
	connClosed
)

// trackedConn is a connection the budget counts: its Close is the pools' (the budget closes
// the inner connection directly).
type trackedConn struct {
	net.Conn
	b     *connBudget
	h     *hostConns // immutable
	state connState  // guarded by b.mu
}

func (c *trackedConn) Close() error { return c.b.closed(c) }

// budgetedTransport is a provider's transport with its connection budget: every request is
// counted against its host for as long as it is under way, to its response body's Close.
type budgetedTransport struct {
	h1     *http.Transport // the dials, HTTP/1.1, and the handing of h2 connections to h2
	h2     *h2Pool
	budget *connBudget
	proxy  *Proxy // the dialer's; nil when direct
}

// errBodyNotInMemory refuses a request whose body could make a coalescingConn wait: the
// adapter's bodies are byte slices, which the HTTP/2 client writes without pausing.
var errBodyNotInMemory = errors.New("adapter: a request body must be in memory (GetBody set)")

func (t *budgetedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		_ = req.Body.Close()
		return nil, errBodyNotInMemory
	}
	key := requestAddr(req)
	if err := t.budget.begin(req.Context(), key); err != nil {
		return nil, err
	}
	resp, err := t.h1.RoundTrip(req)
	if err != nil {
		t.budget.end(key)
		return nil, err
	}
	resp.Body = &endOnClose{ReadCloser: resp.Body, end: func() { t.budget.end(key) }}
	return resp, nil
}

// CloseIdleConnections closes the connections no request is using, HTTP/1.1 and HTTP/2.
func (t *budgetedTransport) CloseIdleConnections() {
	t.h1.CloseIdleConnections()
	t.h2.closeIdle()
}

// requestAddr is the address net/http dials for req, in the dialer's form.
func requestAddr(req *http.Request) string {
	port := req.URL.Port()
	if port == "" {
		port = "443"
		if req.URL.Scheme == "http" {
			port = "80"
		}
	}
	return normalizeAuthority(net.JoinHostPort(req.URL.Hostname(), port))
}

// endOnClose calls end once, at the body's first Close.
type endOnClose struct {
	io.ReadCloser
	once sync.Once
	end  func()
}

func (b *endOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.end)
	return err
}
