package stream

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"
)

// maxBellReply bounds a reply on the doorbell's connections: one intake entry of the largest
// size allowed, and room for its id and the framing.
const maxBellReply = MaxEntryBytes + 4<<10

// errReplyTooLarge is what a doorbell connection's Read returns once a reply passes
// maxBellReply; go-redis then drops the connection, and with it the rest of the reply.
var errReplyTooLarge = errors.New("stream: reply larger than the doorbell allows")

// doorbell is the client ReadIntake waits with: a plain XREAD of the next entry, on
// connections that refuse any reply larger than maxBellReply. An entry within the limits
// arrives as usual; a larger one fails the read part way, which says just as well that
// something arrived, and the intake script then dead-letters it where it lies. So no entry
// larger than maxBellReply ever reaches the worker whole.
type doorbell struct {
	from redis.UniversalClient // the client whose options it copies
	c    redis.UniversalClient // nil when from is of no known kind; immutable after newDoorbell
}

// newDoorbell copies from's options at once: go-redis writes to a client's options as its
// connections come up, so they must be read before the client is in use (New is called
// before it is).
func newDoorbell(from redis.UniversalClient) *doorbell {
	return &doorbell{from: from, c: cappedClient(from)}
}

func (d *doorbell) client() redis.UniversalClient { return d.c }

// wait blocks until stream holds an entry after id, or block passes (false).
func (d *doorbell) wait(ctx context.Context, stream, id string, args *redis.XReadArgs) (bool, error) {
	c := d.client()
	if c == nil {
		c = d.from
	}
	args.Streams = []string{stream, id}
	err := c.XRead(ctx, args).Err()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case errors.Is(err, errReplyTooLarge):
		return true, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

func (d *doorbell) close() error {
	if d.c == nil {
		return nil
	}
	return d.c.Close()
}

// cappedClient is a client with c's options whose connections cap every reply (cappedConn),
// or nil for a kind of client it does not know.
func cappedClient(c redis.UniversalClient) redis.UniversalClient {
	switch c := c.(type) {
	case *redis.Client: // single node, and Sentinel's failover client, whose dialer finds the master
		o := *c.Options()
		o.Dialer = capDialer(o.Dialer)
		return redis.NewClient(&o)
	case *redis.ClusterClient:
		o := *c.Options()
		base := o.Dialer
		if base == nil {
			base = redis.NewDialer(&redis.Options{DialTimeout: o.DialTimeout, TLSConfig: o.TLSConfig})
		}
		o.Dialer = capDialer(base)
		return redis.NewClusterClient(&o)
	}
	return nil
}

func capDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &cappedConn{Conn: conn, max: maxBellReply, num: -1}, nil
	}
}

// cappedConn fails a Read that would hand go-redis the length of a bulk string longer than max
// (the "$<n>" or "=<n>" of RESP: go-redis allocates n bytes as soon as it has read the length),
// or more than max bytes of one reply in all. go-redis writes a command and then reads its
// whole reply on one connection at a time, so the counts restart at every Write. A payload
// that happens to hold "$" and many digits fails the read too: to the doorbell that only means
// "something arrived", which it did.
type cappedConn struct {
	net.Conn
	max  int
	read int // bytes of the current reply so far
	num  int // the value of the digits after the last '$' or '=', -1 outside a length
}

func (c *cappedConn) Write(b []byte) (int, error) {
	c.read, c.num = 0, -1
	return c.Conn.Write(b)
}

func (c *cappedConn) Read(b []byte) (int, error) {
	if c.read >= c.max {
		return 0, errReplyTooLarge
	}
	if len(b) > c.max-c.read {
		b = b[:c.max-c.read]
	}
	n, err := c.Conn.Read(b)
	for _, ch := range b[:n] {
		switch {
		case ch == '$' || ch == '=':
			c.num = 0
		case c.num >= 0 && ch >= '0' && ch <= '9':
			c.num = c.num*10 + int(ch-'0')
			if c.num > c.max {
				return 0, errReplyTooLarge // before go-redis sees the whole length
			}
		default:
			c.num = -1
		}
	}
	c.read += n
	return n, err
}
