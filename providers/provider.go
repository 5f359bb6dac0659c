package providers

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// Kinds name the classifier table and request shaping an entry uses (taxonomy.ClassifyAt and the
// adapters switch on them). Anything that speaks plain RFC 8030 is KindGeneric.
const (
	KindFCM      = "fcm"
	KindAutopush = "autopush"
	KindApple    = "apple"
	KindWNS      = "wns"
	KindGeneric  = "generic"
)

// FallbackID is the id of the entry that takes every endpoint no other entry lists. A registry
// without it is refused: an unknown host must still have a lane, limits and a breaker.
const FallbackID = "fallback"

// Provider is one registry entry with defaults applied. Values are validated by Parse; treat a
// Provider as read-only (it is shared by every goroutine that resolves endpoints).
type Provider struct {
	ID    string   // lane and metric label, ^[a-z][a-z0-9_-]{0,31}$
	Kind  string   // one of the Kind constants
	Hosts []string // lower-case DNS names without trailing dot; empty for the fallback

	// MaxTTL is the longest TTL the service keeps a message; longer TTLs are clamped to it.
	MaxTTL time.Duration
	// Rate is requests per second for the whole fleet; each replica takes its share.
	Rate float64
	// Burst is the token bucket size for the whole fleet, shared out like Rate.
	Burst int
	// MaxInFlight bounds concurrent requests per replica (memory and sockets are per process).
	// With a Budget it is the ceiling of the provider's share.
	MaxInFlight int
	// MinInFlight is the provider's floor when a Budget is shared by traffic, so a rare
	// provider is never starved; 1..MaxInFlight.
	MinInFlight int
	// RetryShare is the part of the in-flight cap retries may hold, (0, 1], so that a retry
	// storm cannot starve first deliveries.
	RetryShare float64
	// BulkMinShare is the least part of the provider's sends that bulk jobs get while both
	// classes have work, [0, MaxBulkMinShare]: transactional jobs go first, but a steady flow
	// of them cannot hold a campaign back forever.
	BulkMinShare float64
	// PerRecipientInFlight caps one recipient's requests in flight per replica, so a recipient
	// with many subscriptions cannot hold a lane; 0 means no cap.
	PerRecipientInFlight int

	Timeout               time.Duration // whole request, dial to last body byte
	ConnectTimeout        time.Duration // TCP connect
	TLSTimeout            time.Duration // TLS handshake
	ResponseHeaderTimeout time.Duration // request written to response headers

	// Breaker is the provider's ratio breaker (registry.yaml `breaker:`), as package limits
	// takes it.
	Breaker limits.BreakerConfig

	// VAPIDLifetime is the JWT lifetime for this service's audience; 0: signer default.
	VAPIDLifetime time.Duration

	// Proxy is the HTTP CONNECT proxy this provider's connections go through: "" for the
	// worker's --proxy, ProxyNone for direct, else a URL as ParseProxyURL returns it (no
	// credentials).
	Proxy string
}

// Registry is a loaded, validated provider table and the fleet-wide settings that go with it
// (budget, host breaker, heartbeat). It is immutable after Parse except for the
// unknown-authority counter, and safe for concurrent use.
type Registry struct {
	list     []*Provider          // file order
	byID     map[string]*Provider // id -> entry
	bySuffix map[string]*Provider // listed host -> entry; Resolve walks the label suffixes of a host
	fallback *Provider

	budget      *Budget // nil when the file has no budget:
	hostBreaker limits.HostBreakerConfig
	heartbeat   HeartbeatConfig

	unknown atomic.Uint64 // endpoints resolved to the fallback
}

// Providers returns the entries in file order. The slice is a copy; the Providers are shared.
func (r *Registry) Providers() []*Provider { return slices.Clone(r.list) }

// IDs returns the entries' ids in file order.
func (r *Registry) IDs() []string {
	ids := make([]string, len(r.list))
	for i, p := range r.list {
		ids[i] = p.ID
	}
	return ids
}

// Provider returns the entry with this id.
func (r *Registry) Provider(id string) (*Provider, bool) {
	p, ok := r.byID[id]
	return p, ok
}

// Fallback returns the entry that takes every unmatched endpoint; never nil.
func (r *Registry) Fallback() *Provider { return r.fallback }

// UnknownAuthorities counts endpoints Resolve sent to the fallback because no entry lists their
// host. A rising count after a browser release is the cue to add an entry.
func (r *Registry) UnknownAuthorities() uint64 { return r.unknown.Load() }
