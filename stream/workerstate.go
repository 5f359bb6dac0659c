package stream

// WorkerState is what a worker replica publishes with its heartbeat (Store.Heartbeat's state),
// for the operators' status (stream/inspect's ReplicaState.Worker): one type for the worker
// that writes it and the status that reads it.
type WorkerState struct {
	Version  string            `json:"version,omitempty"`
	Breakers map[string]string `json:"breakers"` // provider id -> closed, half_open, open
	// Proxies is the egress proxy (host:port) of each provider that sends through one, and
	// ProxyBreakers the state of each proxy's breaker, as Breakers spells it.
	Proxies       map[string]string `json:"proxies,omitempty"`
	ProxyBreakers map[string]string `json:"proxy_breakers,omitempty"`
}
