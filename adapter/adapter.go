// Package adapter sends one Web Push message to the push service that owns its endpoint: it
// shapes the request for that provider (TTL clamp, Urgency, Topic, the WNS quirks), encrypts
// the payload (RFC 8291), adds the cached VAPID header (RFC 8292), posts it over the provider's
// own pooled HTTP/2 transport, and returns exactly one taxonomy outcome. Callers never see an
// HTTP status or a transport error; the dispatcher decides what happens next from the outcome.
package adapter

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/ece"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// Message is one push to send.
type Message struct {
	// ID identifies the job; it is sent only when Config.JobIDHeader is set.
	ID           string
	Subscription job.Subscription
	// Parsed, when the message comes from a decoded job (job.Job.Parsed), is Subscription's
	// endpoint and keys already parsed: the send takes them rather than parse them again. The
	// zero value is fine; the send then parses them itself.
	Parsed job.Parsed
	// Payload is the plaintext to encrypt. Ciphertext, when set instead, is an aes128gcm body
	// the upstream already encrypted; it is sent as is.
	Payload    []byte
	Ciphertext []byte
	// TTL is how long the push service should keep the message, in seconds; it is clamped to
	// the provider's maximum.
	TTL     int
	Urgency string
	Topic   string
	// Key is the application server key the subscription was made with.
	Key *vapid.Key
	// Provider, when set, is the id of the provider whose adapter sends the message, in place
	// of the one the endpoint resolves to: a worker's lane names its own, so that a job routed
	// before a registry reload moved its host is sent, limited and recorded as one provider.
	Provider string
}

// Config is what every provider's adapter shares.
type Config struct {
	Registry *providers.Registry
	Signer   *vapid.Signer
	// ConnectTo sends a host:port to another address (see ParseConnectTo).
	ConnectTo map[string]string
	// RootCAs verifies push services; nil means the system roots (see LoadRootCAs).
	RootCAs *x509.CertPool
	// Allow opens blocked address ranges, for operators whose push services live inside.
	Allow []netip.Prefix
	// Resolver looks up endpoint hosts; nil means the system resolver.
	Resolver *net.Resolver
	// Now is the clock outcomes are classified with (Retry-After dates); nil means time.Now.
	Now func() time.Time
	// JobIDHeader, when set, carries Message.ID on every request so a simulator can tell a
	// redelivery from a new message. Off by default: real push services have no use for it.
	JobIDHeader string
	// Proxy is the HTTP CONNECT proxy every provider's connections go through unless its
	// registry entry names another (or none); nil means direct (see ParseProxy).
	Proxy *Proxy
	// Reuse, when set, is the Sender this one replaces (a registry reload): for every provider
	// whose connection settings (connect, TLS and response header timeouts) are the same, the
	// new adapter takes over its transport and the connections it holds open.
	Reuse *Sender
}

// Sender routes each message to its provider's adapter.
type Sender struct {
	reg      *providers.Registry
	adapters map[string]*adapter // by provider id; immutable after New
	signer   *vapid.Signer       // immutable after New
}

// Signatures is how many VAPID JWTs the sender has signed: one per (key, audience) per token
// lifetime when the cache does its work.
func (s *Sender) Signatures() uint64 { return s.signer.Signatures() }

// SignaturesByKey is Signatures by VAPID key name.
func (s *Sender) SignaturesByKey() map[string]uint64 { return s.signer.SignaturesByKey() }

// NewSender builds one adapter, with its own transport (or Config.Reuse's), per provider in
// the registry.
func NewSender(cfg Config) (*Sender, error) {
	if cfg.Registry == nil || cfg.Signer == nil {
		return nil, errors.New("adapter: Config needs a Registry and a Signer")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sender{reg: cfg.Registry, adapters: make(map[string]*adapter), signer: cfg.Signer}
	for _, p := range cfg.Registry.Providers() {
		var t *budgetedTransport
		if old := cfg.Reuse.adapterOf(p.ID); old != nil && sameConnections(old.provider, p) {
			t = old.transport
		} else {
			proxy, err := cfg.Proxy.forProvider(p.Proxy)
			if err != nil {
				return nil, fmt.Errorf("adapter: provider %s: proxy: %w", p.ID, err)
			}
			d := &dialer{connectTo: cfg.ConnectTo, allow: cfg.Allow, timeout: p.ConnectTimeout, resolver: cfg.Resolver, proxy: proxy}
			t = newTransport(p, d.DialContext, cfg.RootCAs)
			t.proxy = proxy
		}
		s.adapters[p.ID] = &adapter{
			provider:  p,
			signer:    cfg.Signer,
			now:       cfg.Now,
			jobHeader: cfg.JobIDHeader,
			transport: t,
			client: &http.Client{
				Transport: t,
				// A push service answers; it never redirects. Following one would let an
				// endpoint send us somewhere the address checks did not approve.
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			},
		}
	}
	return s, nil
}

// Send resolves the endpoint's provider and sends through its adapter, or through the
// adapter of m.Provider when the message names one this Sender has.
func (s *Sender) Send(ctx context.Context, m *Message) taxonomy.Outcome {
	route, err := s.reg.ResolveParsed(m.Subscription.Endpoint, m.Parsed.URL(m.Subscription.Endpoint))
	if err != nil {
		code := taxonomy.InvalidRequest
		if errors.Is(err, providers.ErrNotHTTPS) {
			code = taxonomy.Blocked
		}
		return taxonomy.SecretsOf(m.Subscription.Endpoint).Local(s.reg.Fallback().ID, code, err.Error())
	}
	a := s.adapters[route.Provider.ID]
	if named := s.adapterOf(m.Provider); named != nil && named != a {
		a, route.Provider = named, named.provider
	}
	return a.Send(ctx, route, m)
}

func (s *Sender) adapterOf(id string) *adapter {
	if s == nil || id == "" {
		return nil
	}
	return s.adapters[id]
}

// sameConnections reports whether a transport built for a serves b as well.
func sameConnections(a, b *providers.Provider) bool {
	return a.ConnectTimeout == b.ConnectTimeout && a.TLSTimeout == b.TLSTimeout && a.ResponseHeaderTimeout == b.ResponseHeaderTimeout &&
		a.Proxy == b.Proxy
}

// ProxyOf is the host:port of the proxy the provider's connections go through, "" when they
// go direct or the provider is unknown.
func (s *Sender) ProxyOf(id string) string {
	if a := s.adapterOf(id); a != nil {
		return a.transport.proxy.Addr()
	}
	return ""
}

// Close drops every idle connection.
func (s *Sender) Close() {
	for _, a := range s.adapters {
		a.transport.CloseIdleConnections()
	}
}

// Retire closes the idle connections of the transports of s that next did not take over
// (Config.Reuse): call it once the sends s started have ended.
func (s *Sender) Retire(next *Sender) {
	kept := map[*budgetedTransport]bool{}
	for _, a := range next.adapters {
		kept[a.transport] = true
	}
	for _, a := range s.adapters {
		if !kept[a.transport] {
			a.transport.CloseIdleConnections()
		}
	}
}

// adapter sends to one provider.
type adapter struct {
	provider  *providers.Provider // immutable after New
	signer    *vapid.Signer
	now       func() time.Time
	jobHeader string
	transport *budgetedTransport
	client    *http.Client
}

// Send delivers m to route, which must be one of this adapter's, and returns its outcome.
//
// Every outcome, answered or not, is made through the Secrets of the endpoint, so its detail
// holds no part of the endpoint's path: not what a service echoes, not what a transport error
// quotes, not what a local refusal says.
func (a *adapter) Send(ctx context.Context, route providers.Route, m *Message) taxonomy.Outcome {
	p := a.provider
	secrets := taxonomy.SecretsOf(route.Endpoint)
	h, out, ok := a.shape(secrets, m)
	if !ok {
		return out
	}
	body, out, ok := a.body(secrets, m)
	if !ok {
		return out
	}
	if m.Key == nil {
		return a.local(secrets, taxonomy.InvalidRequest, "no VAPID key for this message")
	}
	auth, err := a.signer.Header(m.Key, "https://"+route.Authority, p.VAPIDLifetime)
	if err != nil {
		return a.local(secrets, taxonomy.Unauthorized, err.Error())
	}
	h.Set("Authorization", auth)
	if a.jobHeader != "" && m.ID != "" {
		h.Set(a.jobHeader, m.ID)
	}

	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	// The endpoint was parsed when it was routed; the request takes that URL rather than
	// parsing the string again. The URL may be the job's own (job.Parsed), shared and read
	// only: an empty port, which NewRequest would drop, is dropped from a copy.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", bytes.NewReader(body))
	if err != nil {
		return a.local(secrets, taxonomy.InvalidRequest, "endpoint is not a valid request URL")
	}
	u := route.URL
	if host, ok := strings.CutSuffix(u.Host, ":"); ok {
		c := *u
		c.Host = host
		u = &c
	}
	req.URL, req.Host = u, u.Host
	req.Header = h
	resp, err := a.client.Do(req)
	if err != nil {
		return a.transportOutcome(ctx, secrets, err)
	}
	defer resp.Body.Close()
	// Closing without draining the rest resets an HTTP/2 stream, which is what a body over the
	// cap deserves.
	buf := answerBufs.Get().(*[]byte)
	read, err := readAnswer((*buf)[:0], resp.Body)
	answer := read
	if err != nil && len(answer) == 0 && resp.StatusCode/100 != 2 {
		// The status arrived; a body cut short changes only the detail.
		answer = nil
	}
	out = secrets.ClassifyAt(a.now(), p.Kind, resp.StatusCode, resp.Header, answer)
	out.Provider = p.ID
	// The answer is done with: an Outcome holds strings, copies of what it quotes, and the
	// response body reads into buffers of its own.
	if cap(read) <= maxPooledAnswer {
		*buf = read[:0]
		answerBufs.Put(buf)
	}
	return out
}

// answerBufs are the buffers answers are read into, one per send at a time. Most answers are
// empty or a line of JSON; one that grew a buffer past maxPooledAnswer leaves it to the
// collector rather than keep it for every send after.
var answerBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledAnswer = 4 << 10

// readAnswer is io.ReadAll(io.LimitReader(body, maxResponseBody)) appending to buf.
func readAnswer(buf []byte, body io.Reader) ([]byte, error) {
	for len(buf) < maxResponseBody {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(max(cap(buf), 512), maxResponseBody-len(buf)))
		}
		n, err := body.Read(buf[len(buf):min(cap(buf), maxResponseBody)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// shape builds the headers every push carries and checks what the provider would refuse.
func (a *adapter) shape(secrets taxonomy.Secrets, m *Message) (http.Header, taxonomy.Outcome, bool) {
	p := a.provider
	if m.TTL < 0 {
		return nil, a.local(secrets, taxonomy.InvalidTTL, fmt.Sprintf("TTL %d is negative", m.TTL)), false
	}
	ttl := m.TTL
	if maxTTL := int(p.MaxTTL / time.Second); ttl > maxTTL {
		ttl = maxTTL // max_ttl 0 is an operator saying "never store": every message gets TTL 0
	}
	if m.Urgency != "" {
		if err := job.CheckUrgency(m.Urgency); err != nil {
			return nil, a.local(secrets, taxonomy.InvalidRequest, "urgency: "+err.Error()), false
		}
	}
	if err := checkTopic(p.Kind, m.Topic); err != nil {
		return nil, a.local(secrets, taxonomy.InvalidRequest, err.Error()), false
	}
	h := make(http.Header, 8)
	h.Set("TTL", strconv.Itoa(ttl))
	h.Set("Content-Encoding", "aes128gcm")
	h.Set("Content-Type", "application/octet-stream")
	if m.Urgency != "" {
		h.Set("Urgency", m.Urgency)
	}
	if m.Topic != "" {
		h.Set("Topic", m.Topic)
	}
	if p.Kind == providers.KindWNS && ttl == 0 {
		// WNS answers 400 to TTL 0 unless told not to cache.
		h.Set("X-WNS-Cache-Policy", "no-cache")
	}
	return h, taxonomy.Outcome{}, true
}

// body returns the aes128gcm body: the upstream's ciphertext, or the payload encrypted to the
// subscription's keys.
func (a *adapter) body(secrets taxonomy.Secrets, m *Message) ([]byte, taxonomy.Outcome, bool) {
	if m.Ciphertext != nil {
		if limit := maxBody(a.provider.Kind); len(m.Ciphertext) > limit {
			return nil, a.local(secrets, taxonomy.PayloadTooLarge,
				fmt.Sprintf("ciphertext is %d bytes; %s accepts at most %d", len(m.Ciphertext), a.provider.ID, limit)), false
		}
		return m.Ciphertext, taxonomy.Outcome{}, true
	}
	keys := m.Parsed.Keys(m.Subscription.Keys)
	if keys == nil {
		var err error
		if keys, err = ece.ParseKeys(m.Subscription.Keys.P256dh, m.Subscription.Keys.Auth); err != nil {
			return nil, a.local(secrets, taxonomy.InvalidRequest, "subscription keys: "+err.Error()), false
		}
	}
	if err := job.CheckPayload(len(m.Payload)); err != nil {
		return nil, a.local(secrets, taxonomy.PayloadTooLarge, "payload: "+err.Error()), false
	}
	body, err := ece.Encrypt(keys, m.Payload, ece.Options{})
	if err != nil {
		return nil, a.local(secrets, taxonomy.InvalidRequest, "encrypt: "+err.Error()), false
	}
	return body, taxonomy.Outcome{}, true
}

func (a *adapter) local(secrets taxonomy.Secrets, code taxonomy.Code, detail string) taxonomy.Outcome {
	return secrets.Local(a.provider.ID, code, detail)
}

// transportOutcome names a failure to get an answer. The url.Error wrapper is dropped (its text
// is the method and the URL, which says nothing more), and what is left still goes through the
// endpoint's secrets: an error deeper down may quote the URL too.
func (a *adapter) transportOutcome(ctx context.Context, secrets taxonomy.Secrets, err error) taxonomy.Outcome {
	var blocked *BlockedError
	if errors.As(err, &blocked) {
		return a.local(secrets, taxonomy.Blocked, blocked.Error())
	}
	var pe *ProxyError
	if errors.As(err, &pe) {
		return a.local(secrets, taxonomy.ProxyError, pe.Error())
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return a.local(secrets, taxonomy.TransportError, fmt.Sprintf("no answer within %s", a.provider.Timeout))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return a.local(secrets, taxonomy.TransportError, err.Error())
}
