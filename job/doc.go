// Package job is the job format v1: what an upstream puts in the "job" field of an intake
// entry (docs/job-format.md, and the same format as a JSON Schema in
// docs/job-format.schema.json). It holds the Job and its Subscription, the strict decoder that
// refuses a bad job with a reason naming the field (Decode, DecodeSubscription,
// InvalidError), the JSON reader behind it, the Declarative Web Push notification a job may
// give instead of a payload and the declarative JSON it renders to (Notification), and the
// limits and rules of a push message that both the decoder and the adapter's request shaping
// check (urgency, topic, body sizes), so that nothing is checked twice with two sets of
// constants.
//
// Reasons never quote an endpoint or a key: an endpoint's path is a bearer credential.
package job
