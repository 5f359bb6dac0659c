package pushsim

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// Errors callers can match with errors.Is.
var (
	ErrProvider = errors.New("pushsim: unknown provider")
	ErrHost     = errors.New("pushsim: host is not one of the provider's")
	ErrKey      = errors.New("pushsim: application server key is not a base64url P-256 public key")
	ErrFault    = errors.New("pushsim: invalid fault")
)

// subscription is the user agent's side: the private key that decrypts, and the application
// server key the browser bound the subscription to.
type subscription struct {
	provider string
	endpoint string
	uaKey    *ecdh.PrivateKey
	auth     []byte
	appKey   []byte // 65-byte uncompressed point
	expired  atomic.Bool
	// bridgeApp is the app id Autopush's FCM bridge routes this subscription under, nil for
	// one Autopush delivers itself (see Bridge).
	bridgeApp atomic.Pointer[string]
}

// subscriptionStore finds a subscription by the URL a push arrives on. The key is the
// canonical host plus the raw request URI, byte for byte: WNS tokens carry %2b-style escapes, and
// a sender that decodes and re-encodes them reaches a URL that does not exist.
type subscriptionStore struct {
	mu         sync.RWMutex
	byURL      map[string]*subscription // guarded by mu
	byEndpoint map[string]*subscription // guarded by mu
}

func newSubscriptionStore() *subscriptionStore {
	return &subscriptionStore{byURL: map[string]*subscription{}, byEndpoint: map[string]*subscription{}}
}

func (st *subscriptionStore) lookup(authority, requestURI string) (*subscription, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	sub, ok := st.byURL[canonicalHost(authority)+requestURI]
	return sub, ok
}

func (st *subscriptionStore) byEndpointURL(endpoint string) (*subscription, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	sub, ok := st.byEndpoint[endpoint]
	return sub, ok
}

func (st *subscriptionStore) len() int {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return len(st.byEndpoint)
}

// Subscribe creates a subscription the way a browser does for pushManager.subscribe(): a fresh
// P-256 key pair and auth secret, bound to applicationServerKey (base64url, padded or not), with
// an endpoint in the provider's real URL shape. host "" means the provider's usual host; another
// host must belong to the provider (say wns2-db5p.notify.windows.com), and for "generic" it may
// carry a port. It returns what the browser's PushSubscription.toJSON() gives, which the
// upstream stores and hands to the gateway with every job (and POST /subscriptions answers).
func (s *Server) Subscribe(provider, host, applicationServerKey string) (job.Subscription, error) {
	if !validProvider(provider) {
		return job.Subscription{}, fmt.Errorf("%w %q (one of %s)", ErrProvider, provider, strings.Join(Providers(), ", "))
	}
	host = strings.ToLower(host)
	if host == "" {
		host = defaultHost(provider)
	}
	u, err := url.Parse("https://" + host)
	if err != nil || u.Host != host || u.Path != "" || u.User != nil {
		return job.Subscription{}, fmt.Errorf("%w: %q is not a host[:port]", ErrHost, host)
	}
	if providerFor(host) != provider {
		return job.Subscription{}, fmt.Errorf("%w: %q is not a %s host (%s; empty: %s)", ErrHost, host, provider, hostsOf(provider), defaultHost(provider))
	}
	appKey, _, err := decodeKey(applicationServerKey)
	if err != nil {
		return job.Subscription{}, err
	}
	uaKey, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return job.Subscription{}, fmt.Errorf("pushsim: subscription key: %w", err)
	}
	sub := &subscription{provider: provider, uaKey: uaKey, auth: randomBytes(16), appKey: appKey}
	path, aliases := newPath(provider)
	sub.endpoint = "https://" + host + path

	st := s.subs
	st.mu.Lock()
	base := canonicalHost(host)
	st.byURL[base+path] = sub
	for _, a := range aliases {
		st.byURL[base+a] = sub
	}
	st.byEndpoint[sub.endpoint] = sub
	st.mu.Unlock()

	return job.Subscription{
		Endpoint: sub.endpoint,
		Keys: job.Keys{
			P256dh: base64.RawURLEncoding.EncodeToString(uaKey.PublicKey().Bytes()),
			Auth:   base64.RawURLEncoding.EncodeToString(sub.auth),
		},
	}, nil
}

// Expire makes every later push to endpoint answer the provider's "gone" shape, as when the user
// revokes permission. It reports whether endpoint is a subscription of this server.
func (s *Server) Expire(endpoint string) bool {
	sub, ok := s.subs.byEndpointURL(endpoint)
	if ok {
		sub.expired.Store(true)
	}
	return ok
}

// newPath returns the request URI of a new endpoint in the provider's shape, and other URIs that
// reach the same subscription (FCM serves every token under /fcm/send/ and /wp/).
func newPath(provider string) (path string, aliases []string) {
	switch provider {
	case FCM:
		// Registration tokens: an 11-character instance id, ':', then "APA91b" and ~140 more.
		token := b64(8)[:11] + ":APA91b" + b64(101)[:134]
		return "/fcm/send/" + token, []string{"/wp/" + token}
	case Autopush:
		// v2 endpoints carry a Fernet token (version byte 0x80 encodes as "gAAAAAB...").
		return "/wpush/v2/gAAAAAB" + b64(180), nil
	case Apple:
		return "/" + b64(108), nil
	case WNS:
		return "/w/?token=" + wnsToken(), nil
	}
	return "/push/" + b64(32), nil
}

// wnsToken is a standard-base64 channel token with '+', '/' and '=' written as the lower-case
// escapes real WNS endpoints carry. It always holds all three, so a sender that re-encodes
// (to %2B, or by decoding %2f to '/') misses the subscription.
func wnsToken() string {
	for {
		raw := base64.StdEncoding.EncodeToString(randomBytes(172)) // 172 % 3 == 1: "==" padding
		if strings.Contains(raw, "+") && strings.Contains(raw, "/") {
			return strings.NewReplacer("+", "%2b", "/", "%2f", "=", "%3d").Replace(raw)
		}
	}
}

func b64(n int) string { return base64.RawURLEncoding.EncodeToString(randomBytes(n)) }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (Go 1.24+)
	return b
}

// decodeKey parses a base64url P-256 public key (padding optional): its 65 uncompressed bytes
// and the key itself.
func decodeKey(s string) ([]byte, *ecdsa.PublicKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, nil, ErrKey
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		return nil, nil, ErrKey
	}
	return raw, pub, nil
}
