package pushsim

import (
	"net/http"
	"sync"
	"time"
)

// DefaultMaxDeliveries is how many answers pushsim keeps when Config.MaxDeliveries is 0.
const DefaultMaxDeliveries = 100_000

// Delivery is one request pushsim answered (or, under a Stall or Reset fault, did not): what a
// test asserts on to see what the push service saw.
type Delivery struct {
	// Seq numbers answers from 1 in the order they were recorded; it keeps counting across
	// Reset, so a poller's "since" stays valid.
	Seq      uint64 `json:"seq"`
	Provider string `json:"provider"`
	Host     string `json:"host"` // canonical: lower case, no :443
	// Endpoint is the subscription's endpoint, or https://<Host header><request URI> when the
	// request matched none.
	Endpoint string `json:"endpoint"`
	// Status is the HTTP status sent; 0 when none was (Stall, Reset, a client that left).
	Status int `json:"status"`
	// Code is the outcome the gateway's classifier must reach: the answering fixture's want.code,
	// ACCEPTED, or TRANSPORT_ERROR when no answer was sent.
	Code string `json:"code"`
	// Answer names the fixture answered with ("autopush/errno-110"), "plain" for the few answers
	// no fixture holds, or "" when none was sent.
	Answer string `json:"answer"`
	// Fault is the injected fault that decided this answer ("fail", "stall", ...), if any.
	Fault     string `json:"fault,omitempty"`
	Body      []byte `json:"body,omitempty"`      // request body as received (up to the size limit + 1)
	Plaintext []byte `json:"plaintext,omitempty"` // decrypted payload of an accepted push
	// Declarative is set when Apple's service took a push whose payload is a valid
	// declarative push message (a broken one is refused: see checkDeclarative).
	Declarative bool        `json:"declarative,omitempty"`
	Header      http.Header `json:"header"`  // request headers as received
	Claims      Claims      `json:"claims"`  // VAPID claims, once the signature verified
	TTL         int         `json:"ttl"`     // TTL applied, after the provider's clamp
	Urgency     string      `json:"urgency"` // effective: "normal" when none was sent
	Topic       string      `json:"topic"`
	JobID       string      `json:"job_id,omitempty"` // the X-Job-Id request header
	At          time.Time   `json:"at"`               // Config.Now when the request arrived
	Proto       string      `json:"proto"`            // "HTTP/2.0" or "HTTP/1.1"
}

// Stats counts what pushsim answered since Start or the last Reset.
type Stats struct {
	Requests      uint64                       `json:"requests"`
	Retained      int                          `json:"retained"` // deliveries held in memory
	Dropped       uint64                       `json:"dropped"`  // oldest deliveries forgotten to stay under MaxDeliveries
	InFlight      int64                        `json:"in_flight"`
	Subscriptions int                          `json:"subscriptions"`
	Codes         map[string]map[string]uint64 `json:"codes"` // provider -> code -> answers
	// BytesIn and BytesOut are what crossed the push listener's connections (TLS records and
	// handshakes included), senders to pushsim and back. Unlike the rest they are not zeroed by
	// Reset: subtract two readings.
	BytesIn  uint64 `json:"bytes_in"`
	BytesOut uint64 `json:"bytes_out"`
	// Tokens is how many distinct VAPID JWTs (token and key) arrived: the signatures the senders
	// made, as far as the push service can tell.
	Tokens uint64 `json:"tokens"`
}

// deliveryLog keeps the newest max deliveries in a ring. Seq is contiguous, so "since N" is an
// index computation, not a scan.
type deliveryLog struct {
	mu       sync.Mutex
	max      int                          // immutable
	buf      []Delivery                   // guarded by mu; ring once len(buf) == max
	start    int                          // guarded by mu; index of the oldest entry
	seq      uint64                       // guarded by mu; last Seq handed out
	dropped  uint64                       // guarded by mu
	requests uint64                       // guarded by mu
	codes    map[string]map[string]uint64 // guarded by mu
}

func newDeliveryLog(max int) *deliveryLog {
	return &deliveryLog{max: max, codes: map[string]map[string]uint64{}}
}

func (l *deliveryLog) add(d Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	d.Seq = l.seq
	l.requests++
	byCode := l.codes[d.Provider]
	if byCode == nil {
		byCode = map[string]uint64{}
		l.codes[d.Provider] = byCode
	}
	byCode[d.Code]++
	if len(l.buf) < l.max {
		l.buf = append(l.buf, d)
		return
	}
	l.buf[l.start] = d
	l.start = (l.start + 1) % l.max
	l.dropped++
}

// since returns the retained deliveries with Seq > after, oldest first, optionally only those to
// one endpoint.
func (l *deliveryLog) since(after uint64, endpoint string) []Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []Delivery{}
	n := len(l.buf)
	if n == 0 {
		return out
	}
	oldest := l.buf[l.start].Seq
	skip := 0
	if after >= oldest {
		skip = int(min(after-oldest+1, uint64(n)))
	}
	for i := skip; i < n; i++ {
		d := l.buf[(l.start+i)%n]
		if endpoint == "" || d.Endpoint == endpoint {
			out = append(out, d)
		}
	}
	return out
}

func (l *deliveryLog) stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	codes := make(map[string]map[string]uint64, len(l.codes))
	for p, m := range l.codes {
		c := make(map[string]uint64, len(m))
		for k, v := range m {
			c[k] = v
		}
		codes[p] = c
	}
	return Stats{Requests: l.requests, Retained: len(l.buf), Dropped: l.dropped, Codes: codes}
}

func (l *deliveryLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf, l.start, l.dropped, l.requests = nil, 0, 0, 0
	l.codes = map[string]map[string]uint64{}
}

// Deliveries returns every retained delivery, oldest first. Treat them as read-only: headers and
// plaintexts are shared with the server's record.
func (s *Server) Deliveries() []Delivery { return s.log.since(0, "") }

// DeliveriesFor returns the retained deliveries to one endpoint, oldest first.
func (s *Server) DeliveriesFor(endpoint string) []Delivery { return s.log.since(0, endpoint) }

// DeliveriesSince returns the retained deliveries with Seq > after, to endpoint ("" for all):
// what a poller asks for with the last Seq it saw.
func (s *Server) DeliveriesSince(after uint64, endpoint string) []Delivery {
	return s.log.since(after, endpoint)
}

// Stats returns the answer counts per provider and code since Start or the last Reset.
func (s *Server) Stats() Stats {
	st := s.log.stats()
	st.InFlight = s.inFlight.Load()
	st.Subscriptions = s.subs.len()
	st.BytesIn, st.BytesOut = s.wire.in.Load(), s.wire.out.Load()
	st.Tokens = s.verified.count()
	return st
}

// Reset forgets recorded deliveries and counts (the byte counts excepted) and clears every fault.
// Subscriptions stay: the upstream that holds them would not forget them either.
func (s *Server) Reset() {
	s.log.reset()
	s.faults.clear()
	s.verified.reset()
}
