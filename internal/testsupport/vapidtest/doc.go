// Package vapidtest makes keys for tests: a fresh P-256 key in each encoding a VAPID or an
// application server key is written in, and the replay of webpush-go's per-message VAPID
// header that benchmarks compare against.
package vapidtest
