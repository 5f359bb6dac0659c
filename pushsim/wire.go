package pushsim

import (
	"net"
	"sync/atomic"
)

// countingListener counts the bytes that cross its connections, TLS records and handshakes
// included: what a sender costs the network per push, measured where the push service sees it.
type countingListener struct {
	net.Listener
	in, out atomic.Uint64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.l.in.Add(uint64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.l.out.Add(uint64(n))
	return n, err
}
