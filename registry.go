// Package webpushgateway carries the default provider table, registry.yaml, into the binary, so
// a worker started without --registry routes with the same table operators edit.
package webpushgateway

import _ "embed"

// DefaultRegistry is the contents of registry.yaml at build time.
//
//go:embed registry.yaml
var DefaultRegistry []byte
