package dispatch

import "github.com/webpush-gateway/webpush-gateway/stream"

// inspector is an operator's view of the env's Redis (audit, pauses), with its own client.
func (e *env) inspector() *stream.Inspector {
	return stream.NewInspector(e.redis.Client(e.t), stream.Options{Prefix: prefix, Shards: e.shards})
}
