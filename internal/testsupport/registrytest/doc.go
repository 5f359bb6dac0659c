// Package registrytest is the registry pieces tests build workers from (a breaker block that
// opens within seconds, a providers list naming every simulated push service) and a log of the
// breaker changes a worker reports, to assert on.
package registrytest
