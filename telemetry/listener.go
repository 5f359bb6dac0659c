package telemetry

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"time"
)

// The listener's share of the process's file descriptors. The listener is unauthenticated and
// by default on every interface, so whoever can reach it can open connections; each costs a
// descriptor, and the descriptors are what the worker's Redis connections and push connections
// need too. So the listener holds at most ListenerConns(RLIMIT_NOFILE) connections at once and
// the rest of the limit stays in reserve for the worker: with the soft limit L (Go raises it to
// the hard limit when the process starts), the cap is L/listenerShare, at least
// minListenerConns and at most maxListenerConns.
//
// When the cap is reached, an idle connection is closed to make room for a new one, so idle
// keep-alive clients cannot lock out a probe or a scrape: the one idle longest since its last
// answer or, when none has been answered, the one waiting longest for its first request once it
// has had freshGrace to send it. While there is none, one new connection waits, accepted but
// unserved, and the others in the kernel's accept queue, where they cost the process nothing.
// The listener so holds at most its cap plus one descriptors.
const (
	listenerShare    = 16
	minListenerConns = 16
	maxListenerConns = 256
	// freshGrace is how long a new connection may wait to send its first request before it
	// may be closed to make room: a reconnecting flood cannot close a probe's connection before
	// the server has read it, and a client that connects and sends nothing holds its place no
	// longer.
	freshGrace = time.Second
)

// ListenerConns is how many connections the listener holds at once under a descriptor limit
// of nofile (0: the limit could not be read, and the cap is maxListenerConns).
func ListenerConns(nofile uint64) int {
	if nofile == 0 {
		return maxListenerConns
	}
	return int(min(max(nofile/listenerShare, minListenerConns), maxListenerConns))
}

// boundedListener holds at most max accepted connections open at once (see ListenerConns).
// Its ConnState hook must be the server's, so that it knows which connections are idle.
type boundedListener struct {
	net.Listener
	max int

	mu    sync.Mutex
	cond  *sync.Cond                // signalled when a connection ends or becomes idle, and on Close
	conns map[*boundedConn]struct{} // open connections; guarded by mu
	// served holds the connections idle since an answer, fresh those that have sent no request
	// yet; longest idle at the front. Guarded by mu.
	served, fresh list.List
	closed        bool // guarded by mu
}

func newBoundedListener(ln net.Listener, max int) *boundedListener {
	l := &boundedListener{Listener: ln, max: max, conns: make(map[*boundedConn]struct{})}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// victimLocked is the connection to close to make room: the one idle longest since an answer,
// else the one waiting longest for its first request once it has had freshGrace to send it.
// With none, it returns when one of the fresh may be taken (zero when none is fresh). l.mu must
// be held.
func (l *boundedListener) victimLocked(now time.Time) (*boundedConn, time.Time) {
	if e := l.served.Front(); e != nil {
		return e.Value.(*boundedConn), time.Time{}
	}
	e := l.fresh.Front()
	if e == nil {
		return nil, time.Time{}
	}
	c := e.Value.(*boundedConn)
	if ripe := c.since.Add(freshGrace); now.Before(ripe) {
		return nil, ripe
	}
	return c, time.Time{}
}

// Accept accepts a connection, then makes room for it: it closes the connection idle longest
// or, when every one is serving a request, waits until one is done or idle, holding the new
// connection unserved (later ones wait in the kernel's accept queue). Only the server's Serve
// goroutine calls it, so at most max connections are served and one more waits.
func (l *boundedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	for len(l.conns) >= l.max && !l.closed {
		victim, ripe := l.victimLocked(time.Now())
		if victim != nil {
			l.forgetLocked(victim)
			l.mu.Unlock()
			_ = victim.Conn.Close()
			l.mu.Lock()
			continue
		}
		var wake *time.Timer
		if !ripe.IsZero() {
			wake = time.AfterFunc(time.Until(ripe), l.broadcast)
		}
		l.cond.Wait()
		if wake != nil {
			wake.Stop()
		}
	}
	if l.closed {
		l.mu.Unlock()
		_ = c.Close()
		return nil, net.ErrClosed
	}
	bc := &boundedConn{Conn: c, l: l}
	l.conns[bc] = struct{}{}
	l.mu.Unlock()
	return bc, nil
}

func (l *boundedListener) broadcast() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cond.Broadcast()
}

func (l *boundedListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// connState is the server's ConnState hook: a new connection and one between requests (both
// without a whole request header read, the server's StateNew and StateIdle) may be closed to
// make room; one serving a request may not. So a client that sends its header slowly holds a
// place only until the listener is full.
func (l *boundedListener) connState(c net.Conn, s http.ConnState) {
	bc, ok := c.(*boundedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.conns[bc]; !open {
		return
	}
	switch s {
	case http.StateNew:
		l.listLocked(bc, &l.fresh)
	case http.StateIdle:
		l.listLocked(bc, &l.served)
	case http.StateActive:
		l.unlistLocked(bc)
	case http.StateHijacked, http.StateClosed:
		l.forgetLocked(bc)
	}
}

func (l *boundedListener) listLocked(c *boundedConn, in *list.List) {
	l.unlistLocked(c)
	c.in, c.elem, c.since = in, in.PushBack(c), time.Now()
	l.cond.Signal()
}

func (l *boundedListener) unlistLocked(c *boundedConn) {
	if c.in != nil {
		c.in.Remove(c.elem)
		c.in, c.elem = nil, nil
	}
}

// forgetLocked stops counting c. l.mu must be held.
func (l *boundedListener) forgetLocked(c *boundedConn) {
	if _, open := l.conns[c]; !open {
		return
	}
	delete(l.conns, c)
	l.unlistLocked(c)
	l.cond.Signal()
}

// counts are how many connections the listener holds, and how many of them are idle.
func (l *boundedListener) counts() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns), l.served.Len() + l.fresh.Len()
}

// boundedConn is an accepted connection; closing it makes room.
type boundedConn struct {
	net.Conn
	l    *boundedListener
	in   *list.List    // l.served or l.fresh while idle, else nil; guarded by l.mu
	elem *list.Element // c's element of in; guarded by l.mu
	// since is when c was listed; guarded by l.mu
	since time.Time
}

func (c *boundedConn) Close() error {
	c.l.mu.Lock()
	c.l.forgetLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
