package bench

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/webpush-gateway/webpush-gateway/ece"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// sendFloor is the encryption floor plus the send itself: each message encrypted (RFC 8291)
// and written as one HTTP/2 request over TLS to pushsim with x/net/http2's framer, HEADERS
// and DATA in one write, one message at a time with no queue, the answer read before the next.
// Its CPU is the sending goroutine's own thread (locked to it), so that pushsim, which runs in
// this process, is not counted: what it shows is the physical cost of a push, below which no
// gateway can go.
func (env *runEnv) sendFloor() (Row, error) {
	row := Row{Name: contenderSendFloor, What: "ece.Encrypt plus one HTTP/2 request over TLS per message (x/net/http2's framer, one write, no queue; the sending thread's CPU)"}
	n := min(env.o.Messages, 5000)
	signer, err := vapid.NewSigner(vapid.SignerOptions{Subject: vapidSubject})
	if err != nil {
		return row, err
	}
	type target struct {
		keys      *ece.Keys
		authority string
		path      string
	}
	targets := make([]target, 0, min(n, len(env.subs)))
	for _, s := range env.subs[:min(n, len(env.subs))] {
		k, err := ece.ParseKeys(s.Keys.P256dh, s.Keys.Auth)
		if err != nil {
			return row, err
		}
		u, err := url.Parse(s.Endpoint)
		if err != nil {
			return row, err
		}
		targets = append(targets, target{keys: k, authority: u.Host, path: u.RequestURI()})
	}
	env.sim.Reset()
	conns := map[string]*floorConn{}
	defer func() {
		for _, c := range conns {
			_ = c.tc.Close()
		}
	}()
	payload := []byte(env.payload)
	var body []byte

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	wall0 := time.Now()
	for i := range n {
		t := targets[i%len(targets)]
		c := conns[t.authority]
		if c == nil {
			if c, err = dialFloor(env, t.authority); err != nil {
				return row, err
			}
			conns[t.authority] = c
		}
		if body, err = ece.AppendEncrypt(body[:0], t.keys, payload, ece.Options{}); err != nil {
			return row, err
		}
		auth, err := signer.Header(env.key, "https://"+t.authority, 0)
		if err != nil {
			return row, err
		}
		status, err := c.post(t.authority, t.path, auth, body)
		if err != nil {
			return row, fmt.Errorf("message %d: %w", i, err)
		}
		if status == 201 {
			row.Delivered++
		} else {
			if row.Failures == nil {
				row.Failures = map[string]int{}
			}
			row.Failures[strconv.Itoa(status)]++
		}
	}
	wall := time.Since(wall0)
	cpu := threadCPU() - cpu0
	row.Messages = n
	row.CPUPerMsg = float64(cpu.Microseconds()) / float64(n)
	row.MsgsPerSec = float64(n) / wall.Seconds()
	row.BytesPerMsg = float64(len(body))
	row.Floor = true
	return row, nil
}

// threadCPU is the calling thread's user and system CPU (Linux's RUSAGE_THREAD).
func threadCPU() time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if syscall.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// floorConn is one HTTP/2 connection written by hand: requests one at a time, each one write.
type floorConn struct {
	tc     *tls.Conn
	fr     *http2.Framer // reads from tc, writes to out
	out    bytes.Buffer
	henc   *hpack.Encoder
	hbuf   bytes.Buffer
	stream uint32
	status int // of the answer being read, when its HEADERS did not end the stream
	// The send windows (RFC 9113, section 6.9).
	connWindow, initialWindow int64
}

func dialFloor(env *runEnv, authority string) (*floorConn, error) {
	host, _, err := net.SplitHostPort(authority)
	if err != nil {
		host = authority
	}
	tc, err := tls.Dial("tcp", env.sim.Addr(), &tls.Config{
		ServerName: host, RootCAs: env.sim.CertPool(), NextProtos: []string{"h2"},
		DynamicRecordSizingDisabled: true,
	})
	if err != nil {
		return nil, err
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		_ = tc.Close()
		return nil, fmt.Errorf("pushsim negotiated %q, not h2", p)
	}
	c := &floorConn{tc: tc, stream: 1, connWindow: 65535, initialWindow: 65535}
	c.fr = http2.NewFramer(&c.out, tc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.out.WriteString(http2.ClientPreface)
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0}); err != nil {
		return nil, err
	}
	if err := c.fr.WriteWindowUpdate(0, 1<<30); err != nil {
		return nil, err
	}
	return c, c.flush()
}

func (c *floorConn) flush() error {
	_, err := c.tc.Write(c.out.Bytes())
	c.out.Reset()
	return err
}

// post writes one request, HEADERS and DATA in one write, and reads until its answer.
func (c *floorConn) post(authority, path, auth string, body []byte) (int, error) {
	for c.connWindow < int64(len(body)) || c.initialWindow < int64(len(body)) {
		if _, err := c.readFrame(0); err != nil {
			return 0, err
		}
	}
	id := c.stream
	c.stream += 2
	c.hbuf.Reset()
	for _, f := range [...]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: authority}, {Name: ":path", Value: path},
		{Name: "ttl", Value: "60"}, {Name: "content-encoding", Value: "aes128gcm"},
		{Name: "content-type", Value: "application/octet-stream"},
		{Name: "authorization", Value: auth}, {Name: "content-length", Value: strconv.Itoa(len(body))},
	} {
		if err := c.henc.WriteField(f); err != nil {
			return 0, err
		}
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true}); err != nil {
		return 0, err
	}
	if err := c.fr.WriteData(id, true, body); err != nil {
		return 0, err
	}
	c.connWindow -= int64(len(body))
	if err := c.flush(); err != nil {
		return 0, err
	}
	for {
		status, err := c.readFrame(id)
		if err != nil || status != 0 {
			return status, err
		}
	}
}

// readFrame reads one frame and answers what the connection needs answered; for the HEADERS
// that end stream id it returns the status.
func (c *floorConn) readFrame(id uint32) (int, error) {
	f, err := c.fr.ReadFrame()
	if err != nil {
		return 0, err
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return 0, nil
		}
		if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
			c.initialWindow = int64(v)
		}
		if err := c.fr.WriteSettingsAck(); err != nil {
			return 0, err
		}
		return 0, c.flush()
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.connWindow += int64(f.Increment)
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			if err := c.fr.WritePing(true, f.Data); err != nil {
				return 0, err
			}
			return 0, c.flush()
		}
	case *http2.GoAwayFrame:
		return 0, fmt.Errorf("pushsim sent GOAWAY (%v)", f.ErrCode)
	case *http2.RSTStreamFrame:
		if f.StreamID == id {
			return 0, fmt.Errorf("pushsim reset the stream (%v)", f.ErrCode)
		}
	case *http2.MetaHeadersFrame:
		if f.StreamID == id {
			status, err := strconv.Atoi(f.PseudoValue("status"))
			if err != nil {
				return 0, errors.New("an answer without a status")
			}
			if f.StreamEnded() {
				return status, nil
			}
			c.status = status
		}
	case *http2.DataFrame:
		if f.StreamID == id && f.StreamEnded() {
			return c.status, nil
		}
	}
	return 0, nil
}
