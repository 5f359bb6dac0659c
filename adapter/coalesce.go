package adapter

import (
	"encoding/binary"
	"net"
	"sync"
)

// coalescingConn sits between an HTTP/2 client connection's framer and TLS, so that frames
// which are sure to be followed at once by more frames of the same requests go out in one TLS
// record write with them. The HTTP/2 client flushes after a request's header block and again
// after its DATA: written as they come, a lone push costs two records and two system calls,
// and requests ready at the same moment each pay their own.
//
// Writes are held back only while the held bytes carry the header block of a request (one that
// did not end the stream) whose DATA has not been written yet, and only while both that
// stream's and the connection's flow-control windows are open: then the client writes the DATA
// without waiting for anything from the server (the adapter's bodies are in memory, see
// budgetedTransport.RoundTrip), and that write carries the held bytes out. Any other frame (a
// PING, a SETTINGS acknowledgement, a WINDOW_UPDATE, a reset), a window that is closed or a
// held run past one TLS record sends everything at once. No frame ever waits for a timer.
//
// Once a header block has gone out, its stream is waited for no more: the server may answer
// on the header block alone, upon which the client stops the body and, after the server's
// reset, writes nothing more on the stream. A held stream is given up too when the server's
// frames say the client may not write its DATA: a GOAWAY (the client drops the streams it
// leaves unprocessed without writing to them), and any frame of the server on the stream. Should
// that leave held bytes with nothing to carry them out, they are written at once, by a
// goroutine of their own: the read loop must not wait behind a write, which may itself be
// waiting for the server to read while the server waits for the client to read.
//
// The windows are followed from the frames themselves: the server's SETTINGS and WINDOW_UPDATE
// are read here before the client sees them, and the client's DATA written here, so once the
// client's read loop has caught up the two views agree; until then a window this view thinks
// open may still be closed to the client, which finds it open as soon as its read loop
// catches up, without anything from the server.
type coalescingConn struct {
	net.Conn

	wmu  sync.Mutex // serialises writes; the HTTP/2 client holds its own write lock too
	held []byte     // written by the client, not yet to TLS; guarded by wmu
	werr error      // the error of a write of held bytes the client did not make; guarded by wmu
	out  frameScanner

	// The flow-control state the writer and the reader share.
	mu      sync.Mutex
	initial int64            // the server's SETTINGS_INITIAL_WINDOW_SIZE
	conn    int64            // the connection's send window
	pending map[uint32]int64 // streams whose header block is held, by id: their send window
	holding bool             // bytes are held
	freeing bool             // a goroutine is on its way to write the held bytes
	in      frameScanner
	setting [6]byte // a SETTINGS entry read in part
	nset    int
	winbuf  [4]byte // a WINDOW_UPDATE's increment read in part
}

// maxHeld is how much is held before it goes out regardless: one TLS record's plaintext.
const maxHeld = 16 << 10

// HTTP/2 frame types and flags (RFC 9113, section 6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4

	settingInitialWindowSize = 0x4
)

// clientPrefaceLen is the length of the connection preface a client sends before its first
// frame ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").
const clientPrefaceLen = 24

func newCoalescingConn(c net.Conn) *coalescingConn {
	return &coalescingConn{
		Conn:    c,
		initial: 65535, // RFC 9113, section 6.9.2: until the server's SETTINGS say otherwise
		conn:    65535,
		pending: make(map[uint32]int64),
		out:     frameScanner{skip: clientPrefaceLen},
	}
}

// frameScanner follows frame boundaries in one direction of the byte stream.
type frameScanner struct {
	skip   int     // preface bytes still to pass over
	hdr    [9]byte // the frame header being read
	nhdr   int
	remain int // payload bytes of the current frame not yet seen
	typ    byte
	flags  byte
	stream uint32
	length int
}

// next feeds p to the scanner. For every complete frame header it calls onHeader; for every
// run of payload bytes, onPayload with the offset of the run within the frame's payload. It
// returns whether p ended on a frame boundary.
func (s *frameScanner) next(p []byte, onHeader func(s *frameScanner), onPayload func(s *frameScanner, off int, b []byte)) bool {
	for len(p) > 0 {
		if s.skip > 0 {
			n := min(s.skip, len(p))
			s.skip -= n
			p = p[n:]
			continue
		}
		if s.remain > 0 {
			n := min(s.remain, len(p))
			if onPayload != nil {
				onPayload(s, s.length-s.remain, p[:n])
			}
			s.remain -= n
			p = p[n:]
			continue
		}
		n := copy(s.hdr[s.nhdr:], p)
		s.nhdr += n
		p = p[n:]
		if s.nhdr < len(s.hdr) {
			break
		}
		s.nhdr = 0
		s.length = int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2])
		s.typ, s.flags = s.hdr[3], s.hdr[4]
		s.stream = binary.BigEndian.Uint32(s.hdr[5:]) & 0x7fffffff
		s.remain = s.length
		onHeader(s)
	}
	return s.skip == 0 && s.nhdr == 0 && s.remain == 0
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	c.mu.Lock()
	flush := false
	c.out.next(p, func(s *frameScanner) {
		switch s.typ {
		case frameHeaders:
			// A header block that leaves the stream open is followed by its DATA; one split
			// into CONTINUATION frames is written whole before the client flushes.
			if s.flags&flagEndStream == 0 {
				c.pending[s.stream] = c.initial
			} else {
				delete(c.pending, s.stream)
			}
		case frameContinuation:
		case frameData:
			c.conn -= int64(s.length)
			if w, ok := c.pending[s.stream]; ok {
				c.pending[s.stream] = w - int64(s.length)
			}
			if s.flags&flagEndStream != 0 {
				delete(c.pending, s.stream)
			}
		case frameRSTStream:
			delete(c.pending, s.stream)
			flush = true
		default:
			flush = true
		}
	}, nil)
	hold := !flush && c.holdable() && len(c.held)+len(p) <= maxHeld
	c.holding = hold
	if !hold {
		clear(c.pending) // every header block held goes out now
	}
	c.mu.Unlock()
	if hold {
		c.held = append(c.held, p...)
		return len(p), nil
	}
	if len(c.held) == 0 {
		return c.Conn.Write(p)
	}
	c.held = append(c.held, p...)
	n, err := c.Conn.Write(c.held)
	// The held bytes were reported written already; what the caller learns is about p.
	written := max(0, n-(len(c.held)-len(p)))
	c.held = c.held[:0]
	if cap(c.held) > maxHeld {
		c.held = nil
	}
	return written, err
}

// holdable reports whether a held write is sure to be carried out by a DATA frame the client
// writes without waiting: some stream's header block is held, and every such stream may send.
// c.mu must be held.
func (c *coalescingConn) holdable() bool {
	if len(c.pending) == 0 || c.conn <= 0 {
		return false
	}
	for _, w := range c.pending {
		if w <= 0 {
			return false
		}
	}
	return true
}

func (c *coalescingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.in.next(p[:n], c.onReadHeader, c.onReadPayload)
		if c.holding && !c.holdable() && !c.freeing {
			c.freeing = true
			go c.writeHeld()
		}
		c.mu.Unlock()
	}
	return n, err
}

// writeHeld writes the held bytes if nothing the client is sure to write will carry them out.
func (c *coalescingConn) writeHeld() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	c.freeing = false
	send := c.holding && !c.holdable()
	if send {
		c.holding = false
		clear(c.pending)
	}
	c.mu.Unlock()
	if !send || len(c.held) == 0 || c.werr != nil {
		return
	}
	if _, err := c.Conn.Write(c.held); err != nil {
		// The client reads the connection's failure on its own, and meets this error at its
		// next write.
		c.werr = err
	}
	c.held = c.held[:0]
}

// onReadHeader gives up the held streams the server's frames say the client may not write
// DATA on (see coalescingConn). c.mu is held.
func (c *coalescingConn) onReadHeader(s *frameScanner) {
	c.nset = 0
	switch s.typ {
	case frameHeaders, frameData, frameRSTStream:
		delete(c.pending, s.stream)
	case frameGoAway:
		clear(c.pending)
	}
}

// onReadPayload follows the payloads that move the send windows. c.mu is held.
func (c *coalescingConn) onReadPayload(s *frameScanner, off int, b []byte) {
	switch {
	case s.typ == frameSettings && s.flags&flagAck == 0 && s.stream == 0:
		for len(b) > 0 {
			n := copy(c.setting[c.nset:], b)
			c.nset += n
			b = b[n:]
			if c.nset < len(c.setting) {
				return
			}
			c.nset = 0
			if binary.BigEndian.Uint16(c.setting[:2]) == settingInitialWindowSize {
				v := int64(binary.BigEndian.Uint32(c.setting[2:]))
				delta := v - c.initial
				c.initial = v
				for id, w := range c.pending {
					c.pending[id] = w + delta
				}
			}
		}
	case s.typ == frameWindowUpdate && s.length == 4:
		copy(c.winbuf[off:], b)
		if off+len(b) < 4 {
			return
		}
		inc := int64(binary.BigEndian.Uint32(c.winbuf[:]) & 0x7fffffff)
		if s.stream == 0 {
			c.conn += inc
		} else if w, ok := c.pending[s.stream]; ok {
			c.pending[s.stream] = w + inc
		}
	}
}

// Close is the inner connection's: it must not wait for a write under way, which it is there
// to end. Held bytes are dropped with the connection, as a reset would drop them.
func (c *coalescingConn) Close() error { return c.Conn.Close() }
