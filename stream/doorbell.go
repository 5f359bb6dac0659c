package stream

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// maxBellReply bounds a reply on the doorbell's connections: one intake entry of the largest
// size allowed, and room for its id and the framing.
const maxBellReply = job.MaxEntryBytes + 4<<10

// errReplyTooLarge is what a doorbell connection's Read returns once a reply passes
// maxBellReply; go-redis then drops the connection, and with it the rest of the reply.
var errReplyTooLarge = errors.New("stream: reply larger than the doorbell allows")

// waitIntake is the doorbell: it blocks until stream holds an entry after id, or block passes
// (false). It is a plain XREAD of the next entry on s.bell, whose connections, when Open made
// it, refuse any reply larger than maxBellReply (target.doorbell). An entry within the limits
// arrives as usual; a larger one fails the read part way, which says just as well that
// something arrived, and the intake script then dead-letters it where it lies. So no entry
// larger than maxBellReply ever reaches the worker whole.
func (s *Store) waitIntake(ctx context.Context, stream, id string, block time.Duration) (bool, error) {
	err := s.bell.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, id}, Count: 1, Block: block}).Err()
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

// doorbell is the client waitIntake waits on: one of the target's kind whose connections cap
// every reply (cappedConn). A cluster client dials through the clients of its nodes, so each
// of them gets the hook; and it routes by the command's key alone, since its routing policies
// come from COMMAND, whose reply is far over the cap (go-redis would ask for it again before
// every command, and lose the connection each time).
func (t *target) doorbell(pool int) redis.UniversalClient {
	if t.cluster == nil {
		c := t.client(pool)
		c.AddHook(replyCap{})
		return c
	}
	o := *t.cluster
	o.DisableRoutingPolicies = true
	c := (&target{cluster: &o}).client(pool).(*redis.ClusterClient)
	c.OnNewNode(func(n *redis.Client) { n.AddHook(replyCap{}) })
	return c
}

// replyCap is the go-redis hook that wraps each new connection in a cappedConn.
type replyCap struct{}

func (replyCap) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &cappedConn{Conn: conn, max: maxBellReply, num: -1}, nil
	}
}

func (replyCap) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (replyCap) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
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
				c.read = c.max             // and every later Read of this reply fails too
				return 0, errReplyTooLarge // before go-redis sees the whole length
			}
		default:
			c.num = -1
		}
	}
	c.read += n
	return n, err
}
