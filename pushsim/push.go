package pushsim

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/ece"
	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// Body limits: RFC 8030 services must take 4096 bytes; WNS takes up to 5000.
const (
	maxBody    = 4096
	maxBodyWNS = 5000
)

// maxTTL is the longest TTL each service keeps a message; longer ones are clamped, not refused.
var maxTTL = map[string]int{
	FCM:      2_419_200, // 4 weeks (autopush-rs MAX_FCM_NOTIFICATION_TTL_SECS)
	Autopush: 2_592_000, // 30 days, echoed in the TTL response header
}

var urgencies = map[string]bool{"very-low": true, "low": true, "normal": true, "high": true}

// push runs the provider's checks on r, in the order Autopush runs them (subscription, VAPID,
// subscription state, headers, body), and returns the answer. It fills in what it learns in d.
func (s *Server) push(r *http.Request, provider string, now time.Time, d *Delivery) answer {
	if r.Method != http.MethodPost {
		return refusal(provider, reasonMethod)
	}
	sub, ok := s.subs.lookup(r.Host, r.RequestURI)
	if !ok {
		return refusal(provider, reasonNotFound)
	}
	d.Endpoint = sub.endpoint
	// One decision a push, for the signature and the body alike: a sampled push is checked
	// in full, the others skip the two costly steps (see Config.Sample).
	full := s.sampled()
	claims, why := s.checkVAPID(r.Header, sub, provider, r.Host, now, full)
	d.Claims = claims
	if why != noReason {
		return refusal(provider, why)
	}
	if sub.expired.Load() {
		return refusal(provider, reasonGone)
	}
	ttl, urgency, topic, why := checkHeaders(r.Header, provider)
	if why != noReason {
		return refusal(provider, why)
	}
	d.TTL, d.Urgency, d.Topic = ttl, urgency, topic

	limit := maxBody
	if provider == WNS {
		limit = maxBodyWNS
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		return noAnswer // the client went away mid-body
	}
	if !s.lean {
		d.Body = body
	}
	if len(body) > 0 && strings.TrimSpace(r.Header.Get("Content-Encoding")) != "aes128gcm" {
		return refusal(provider, reasonEncoding)
	}
	if len(body) > limit {
		return refusal(provider, reasonTooLarge)
	}
	if a, refused := bridgeRefusal(sub, body); refused {
		return a
	}
	if len(body) > 0 && full { // RFC 8030 allows a push without payload: a tickle
		plaintext, err := ece.Decrypt(body, sub.uaKey, sub.auth)
		if err != nil {
			return refusal(provider, reasonDecrypt)
		}
		if provider == Apple {
			meant, ok := checkDeclarative(plaintext)
			if meant && !ok {
				return badDeclarative
			}
			d.Declarative = meant
		}
		if !s.lean {
			d.Plaintext = plaintext
		}
	}
	return s.accepted(provider, canonicalHost(r.Host), ttl, now)
}

// checkHeaders validates TTL, Urgency and Topic; it returns the TTL the provider applies and
// the effective urgency.
func checkHeaders(h http.Header, provider string) (ttl int, urgency, topic string, why reason) {
	v := strings.TrimSpace(h.Get("TTL"))
	switch {
	case v == "":
		return 0, "", "", reasonTTLMissing
	case v[0] == '-' && digits(v[1:]):
		return 0, "", "", reasonTTLNegative
	case !digits(v):
		return 0, "", "", reasonTTLInvalid
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil { // digits, so only out of range: clamp like any long TTL
		n = math.MaxInt32
	}
	ttl = int(n)
	if m, ok := maxTTL[provider]; ok {
		ttl = min(ttl, m)
	}
	if provider == WNS && ttl == 0 && !strings.EqualFold(strings.TrimSpace(h.Get("X-WNS-Cache-Policy")), "no-cache") {
		return 0, "", "", reasonTTLNoCache
	}

	urgency = "normal"
	if vs, ok := h["Urgency"]; ok {
		if len(vs) != 1 || !urgencies[vs[0]] {
			return 0, "", "", reasonUrgency
		}
		urgency = vs[0]
	}
	if vs, ok := h["Topic"]; ok {
		topic = vs[0]
		if len(vs) != 1 || !validTopic(topic, provider) {
			return 0, "", "", reasonTopic
		}
	}
	return ttl, urgency, topic, noReason
}

// validTopic: at most 32 characters of the base64url alphabet (RFC 8030 section 5.4). Apple also
// refuses a length of 1 more than a multiple of 4, which no base64 encoding produces.
func validTopic(t, provider string) bool {
	if t == "" || len(t) > 32 {
		return false
	}
	for _, c := range []byte(t) {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return provider != Apple || len(t)%4 != 1
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// acceptedAnswers are each provider's success fixture, read once.
var acceptedAnswers = func() map[string]answer {
	m := make(map[string]answer, len(acceptedFixture))
	for p, name := range acceptedFixture {
		m[p] = fromFixture(fixtures.MustGet(p, name))
	}
	return m
}()

// accepted is the provider's success answer with fresh per-message ids.
func (s *Server) accepted(provider, host string, ttl int, now time.Time) answer {
	a := acceptedAnswers[provider]
	a.header = a.header.Clone()
	id := s.ids.Add(1)
	switch provider {
	case FCM:
		a.header.Set("Location", fmt.Sprintf("https://%s/0:%d%%7e%08x", FCMHost, now.UnixMicro(), uint32(id)))
	case Autopush:
		a.header.Set("Location", fmt.Sprintf("https://%s/m/gAAAAAB%016x", host, id))
		a.header.Set("TTL", strconv.Itoa(ttl))
	case Apple:
		b := randomBytes(16) // a version 4 UUID, upper case like Apple's
		b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
		a.header.Set("apns-id", fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
	case WNS:
		a.header.Set("X-WNS-Msg-ID", fmt.Sprintf("%016X", id))
	default:
		a.header.Set("Location", fmt.Sprintf("https://%s/m/%d", host, id))
	}
	return a
}
