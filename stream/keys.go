package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/crc32"
	"strconv"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// Group is the consumer group on the intake stream and on every lane stream.
const Group = "gateway"

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "wp"

// Keys are the Redis keys of one shard. Every key shares the "{shard}" hash tag, so all of
// them live in one Redis Cluster slot and one Lua script may touch any of them.
type Keys struct {
	// Base is "<prefix>:{<shard>}:", the start of every key of the shard.
	Base  string
	Shard int
	// Intake is the stream upstreams XADD transactional jobs to (one field, "job"), and
	// BulkIntake the one they XADD bulk jobs and campaign entries to: the intake is split by
	// class, as the lanes are, so that no transactional job waits behind bulk ones from the
	// producer's write on.
	Intake, BulkIntake string
	// Delayed is the ZSET of jobs waiting to retry: member job id, score due time (unix ms).
	Delayed string
	// DelayedData is the HASH job id -> JSON of the lane entry to write back when due.
	DelayedData string
	// DelayedCount is the HASH provider -> that provider's retries in Delayed that count
	// toward its cap (those after an attempt; put-backs do not).
	DelayedCount string
	// Scheduled is the ZSET job id -> send_at (unix ms) of the members of Delayed that are
	// scheduled jobs waiting for their send_at (ToScheduled), for status; the promoter drops
	// the members that came due.
	Scheduled string
	// Results is the ledger stream: one entry per job that reached a terminal outcome.
	Results string
	// Gone is the stream of endpoints a push service reported gone, for upstreams to prune.
	Gone string
	// Dead is the dead-letter stream: invalid jobs, exhausted retries, refused retries.
	Dead string
	// Rcpt is the HASH recipient -> number of that recipient's jobs in Delayed.
	Rcpt string
	// Jobs is the HASH job id -> provider id of every job the gateway holds on the shard: in a
	// lane, in flight or waiting to retry. A copy of a job enqueued while it is held is
	// acknowledged with no record of its own.
	Jobs string
	// Probe is the key of the write probe (ProbeWrite); it is never created.
	Probe string
	// Window is the start of the duplicate-suppression window's keys: the jobs accepted within
	// the sent TTL, in slices of time that expire whole (window.lua): Window + ":" + s is slice
	// s's fan-out and count, Window + ":" + s + ":" + i its bucket i.
	Window string
	// LanePrefix is the lane stream key without the provider id.
	LanePrefix string
}

// KeysFor returns the keys of one shard under prefix (DefaultPrefix when empty).
func KeysFor(prefix string, shard int) Keys {
	base := orDefaultPrefix(prefix) + ":{" + strconv.Itoa(shard) + "}:"
	return Keys{
		Base:         base,
		Shard:        shard,
		Intake:       base + "in",
		BulkIntake:   base + "in:bulk",
		Delayed:      base + "delayed",
		DelayedData:  base + "delayed:data",
		DelayedCount: base + "delayed:count",
		Scheduled:    base + "delayed:scheduled",
		Results:      base + "results",
		Gone:         base + "gone",
		Dead:         base + "dead",
		Rcpt:         base + "rcpt",
		Jobs:         base + "jobs",
		Probe:        base + "probe",
		Window:       base + "window",
		LanePrefix:   base + "lane:",
	}
}

// ReplicasKey is the ZSET of live replicas under prefix (DefaultPrefix when empty): member
// consumer name, score the unix ms of its last heartbeat. It has its own hash tag, "{hb}":
// replicas are counted once for the fleet, whatever the number of shards.
func ReplicasKey(prefix string) string {
	return orDefaultPrefix(prefix) + ":{hb}:replicas"
}

// StatesKey is the HASH of the live replicas' states under prefix (DefaultPrefix when empty):
// consumer name -> JSON (a WorkerState for a worker), written with each heartbeat, in the
// replicas set's "{hb}" slot.
func StatesKey(prefix string) string {
	return orDefaultPrefix(prefix) + ":{hb}:states"
}

// PausedKey is the HASH of the providers an operator paused under prefix (DefaultPrefix when
// empty): provider id -> JSON (who, when, why; stream/inspect writes it). Every replica reads
// its fields with its heartbeat.
func PausedKey(prefix string) string {
	return orDefaultPrefix(prefix) + ":{hb}:paused"
}

// CampaignKeysFor are the keys of campaign id on shard under prefix (DefaultPrefix when
// empty); campaign.go describes what each holds.
func CampaignKeysFor(prefix string, shard int, id string) CampaignKeys {
	return campaignKeys(prefix, shard, id)
}

// ShardsKey is the key that records the shard count of prefix (DefaultPrefix when empty): the
// first worker or producer to use the prefix writes it, and every later one must agree
// (Store.Setup).
func ShardsKey(prefix string) string {
	return orDefaultPrefix(prefix) + ":shards"
}

// IntakeOf is the intake of class: BulkIntake for bulk jobs, Intake for every other.
func (k Keys) IntakeOf(class job.Class) string {
	if class.IsBulk() {
		return k.BulkIntake
	}
	return k.Intake
}

// Intakes are both intakes, transactional first.
func (k Keys) Intakes() []string { return []string{k.Intake, k.BulkIntake} }

// IsIntake says whether key is one of the shard's intakes.
func (k Keys) IsIntake(key string) bool { return key == k.Intake || key == k.BulkIntake }

// Lane is the stream of jobs waiting for provider.
func (k Keys) Lane(provider string) string { return k.LanePrefix + provider }

// windowField is how the window names job id: the first 10 bytes of its SHA-256 (the first 4
// pick its bucket in a slice). Two ids share a field with odds of about one in 2^80 per pair.
func windowField(id string) string {
	sum := sha256.Sum256([]byte(id))
	return string(sum[:10])
}

// GoneMark is the mark set when endpoint was reported gone. The key holds a hash of the
// endpoint, never the endpoint itself: its path is a bearer credential.
func (k Keys) GoneMark(endpoint string) string {
	sum := sha256.Sum256([]byte(endpoint))
	return k.Base + "gonemark:" + hex.EncodeToString(sum[:16])
}

// MaxShards is the most shards a prefix may have: each is a hash slot of its own, with an
// intake reader and a reader per provider in every worker.
const MaxShards = 1024

// ShardOf is the shard of a job id: CRC-32 (IEEE) of the id modulo shards. Producers and
// workers in every language must agree on it; shards < 2 means everything is shard 0.
func ShardOf(jobID string, shards int) int {
	if shards < 2 {
		return 0
	}
	return int(crc32.ChecksumIEEE([]byte(jobID)) % uint32(shards))
}

// orDefaultPrefix is prefix, or DefaultPrefix when it is empty: what every key of an empty
// prefix is under.
func orDefaultPrefix(prefix string) string {
	if prefix == "" {
		return DefaultPrefix
	}
	return prefix
}
