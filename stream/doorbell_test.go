package stream

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// chunkConn is a net.Conn that reads data in chunks of at most size bytes.
type chunkConn struct {
	net.Conn // nil: only Read and Write are used
	data     []byte
	size     int
}

func (c *chunkConn) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(b), c.size, len(c.data))
	copy(b, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *chunkConn) SetDeadline(time.Time) error      { return nil }
func (c *chunkConn) SetReadDeadline(time.Time) error  { return nil }
func (c *chunkConn) SetWriteDeadline(time.Time) error { return nil }

// TestCappedConnStopsBeforeALongLength: whatever the chunking, a reply announcing a bulk string
// longer than the cap fails before the whole length reaches the reader (go-redis would allocate
// it), while a reply within the cap reads through; every Write starts a new reply.
func TestCappedConnStopsBeforeALongLength(t *testing.T) {
	const max = 100
	entry := func(payload string) string {
		return "*1\r\n*2\r\n$4\r\nwp:i\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$3\r\njob\r\n$" + itoa(int64(len(payload))) + "\r\n" + payload + "\r\n"
	}
	cases := []struct {
		name  string
		reply string
		ok    bool
	}{
		{"small entry", entry("hello"), true},
		{"null reply", "*-1\r\n", true},
		{"long length announced", entry(strings.Repeat("x", 1000)), false},
		{"long verbatim length", "=1000\r\ntxt:" + strings.Repeat("x", 996) + "\r\n", false},
		{"reply longer than the cap in all", "*30\r\n" + strings.Repeat("$3\r\nabc\r\n", 30), false},
	}
	for _, c := range cases {
		for _, size := range []int{1, 2, 3, 7, 64, 4096} {
			conn := &cappedConn{Conn: &chunkConn{data: []byte(c.reply), size: size}, max: max, num: -1}
			if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
				t.Fatal(err)
			}
			var got []byte
			buf := make([]byte, 16)
			var err error
			for {
				var n int
				n, err = conn.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					break
				}
			}
			switch {
			case c.ok && !errors.Is(err, io.EOF):
				t.Errorf("%s, chunks of %d: %v after %d bytes; want the whole reply", c.name, size, err, len(got))
			case !c.ok && !errors.Is(err, errReplyTooLarge):
				t.Errorf("%s, chunks of %d: read %d bytes and %v; want errReplyTooLarge", c.name, size, len(got), err)
			case !c.ok && strings.Contains(string(got), "$1000\r") || strings.Contains(string(got), "=1000\r"):
				t.Errorf("%s, chunks of %d: the whole long length reached the reader", c.name, size)
			}
			if !c.ok {
				if n, err := conn.Read(buf); n != 0 || !errors.Is(err, errReplyTooLarge) {
					t.Errorf("%s, chunks of %d: the Read after the refusal gave %d bytes, %v; the rest of the reply must stay refused", c.name, size, n, err)
				}
			}
		}
	}
}
