package telemetry

import (
	"container/list"
	"net"
	"net/http"
	"sync"
)

// The listener's share of the process's file descriptors. The listener is unauthenticated and
// by default on every interface, so whoever can reach it can open connections; each costs a
// descriptor, and the descriptors are what the worker's Redis connections and push connections
// need too. So the listener holds at most ListenerConns(RLIMIT_NOFILE) connections at once and
// the rest of the limit stays in reserve for the worker: with the soft limit L (Go raises it to
// the hard limit when the process starts), the cap is L/listenerShare, at least
// minListenerConns and at most maxListenerConns.
//
// When the cap is reached, the connection that has been idle longest (no request on it since it
// was opened, or since its last answer) is closed to make room for a new one, so idle
// keep-alive clients cannot lock out a probe or a scrape; when every connection is serving a
// request, one new connection waits, accepted but unserved, and the others in the kernel's
// accept queue, where they cost the process nothing, until one is done. The listener so holds
// at most its cap plus one descriptors.
const (
	listenerShare    = 16
	minListenerConns = 16
	maxListenerConns = 256
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

	mu     sync.Mutex
	cond   *sync.Cond                     // signalled when a connection ends or becomes idle, and on Close
	conns  map[*boundedConn]struct{}      // open connections; guarded by mu
	idle   list.List                      // idle connections, longest idle at the front; guarded by mu
	elems  map[*boundedConn]*list.Element // each idle connection's element; guarded by mu
	closed bool                           // guarded by mu
}

func newBoundedListener(ln net.Listener, max int) *boundedListener {
	l := &boundedListener{Listener: ln, max: max, conns: make(map[*boundedConn]struct{}), elems: make(map[*boundedConn]*list.Element)}
	l.cond = sync.NewCond(&l.mu)
	return l
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
		if e := l.idle.Front(); e != nil {
			victim := e.Value.(*boundedConn)
			l.forgetLocked(victim)
			l.mu.Unlock()
			_ = victim.Conn.Close()
			l.mu.Lock()
			continue
		}
		l.cond.Wait()
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
	case http.StateNew, http.StateIdle:
		if _, listed := l.elems[bc]; !listed {
			l.elems[bc] = l.idle.PushBack(bc)
		}
		l.cond.Signal()
	case http.StateActive:
		if e, listed := l.elems[bc]; listed {
			l.idle.Remove(e)
			delete(l.elems, bc)
		}
	case http.StateHijacked, http.StateClosed:
		l.forgetLocked(bc)
	}
}

// forgetLocked stops counting c. l.mu must be held.
func (l *boundedListener) forgetLocked(c *boundedConn) {
	if _, open := l.conns[c]; !open {
		return
	}
	delete(l.conns, c)
	if e, listed := l.elems[c]; listed {
		l.idle.Remove(e)
		delete(l.elems, c)
	}
	l.cond.Signal()
}

// counts are how many connections the listener holds, and how many of them are idle.
func (l *boundedListener) counts() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns), l.idle.Len()
}

// boundedConn is an accepted connection; closing it makes room.
type boundedConn struct {
	net.Conn
	l *boundedListener
}

func (c *boundedConn) Close() error {
	c.l.mu.Lock()
	c.l.forgetLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
