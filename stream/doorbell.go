package stream

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// maxBellReply bounds a reply on the doorbell's connections: one intake entry of the largest
// size allowed, and room for its id and the framing.
const maxBellReply = job.MaxEntryBytes + 4<<10

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

	once sync.Once
	c    redis.UniversalClient // built on first use; nil when from is of no known kind
}

func (d *doorbell) client() redis.UniversalClient {
	d.once.Do(func() { d.c = cappedClient(d.from) })
	return d.c
}

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
	d.once.Do(func() {}) // a doorbell never used builds no client
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
		return &cappedConn{Conn: conn, max: maxBellReply}, nil
	}
}

// cappedConn fails a Read once the reply to the last command written has passed max bytes.
// go-redis writes a command and then reads its whole reply on one connection at a time, so
// the count restarts at every Write.
type cappedConn struct {
	net.Conn
	max  int
	read int
}

func (c *cappedConn) Write(b []byte) (int, error) {
	c.read = 0
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
	c.read += n
	return n, err
}
