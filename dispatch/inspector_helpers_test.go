package dispatch

import (
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// inspector is an operator's view of the env's Redis (audit, pauses), with its own client.
func (e *env) inspector() *inspect.Inspector {
	return inspect.New(e.redis.Client(e.t), stream.Options{Prefix: prefix, Shards: e.shards})
}
