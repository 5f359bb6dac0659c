package stream

import "github.com/redis/go-redis/v9"

// namedScripts are this package's scripts by the name of the file that holds each one's own
// part, so that what Redis reports of them (SLOWLOG, INFO commandstats' evalsha, MONITOR: the
// SHA-1 of the whole source) can be read as which script ran.
var namedScripts = []struct {
	name   string
	script *redis.Script
}{
	{"to_lane.lua", toLaneScript}, {"to_dead.lua", toDeadScript}, {"finish.lua", finishScript},
	{"was_sent.lua", wasSentScript}, {"ack.lua", ackScript}, {"read_intake.lua", readIntakeScript},
	{"read_lane.lua", readLaneScript}, {"to_delayed.lua", toDelayedScript}, {"to_scheduled.lua", toScheduledScript},
	{"promote.lua", promoteScript}, {"requeue.lua", requeueScript}, {"queue_stats.lua", queueStatsScript},
	{"keypark.lua", keyParkScript}, {"switch (reshard.go)", switchScript}, {"upstream_groups.lua", upstreamGroupsScript},
	{"campaign_create.lua", campaignCreateScript}, {"campaign_add.lua", campaignAddScript},
	{"campaign_expand.lua", campaignExpandScript}, {"campaign_hold.lua", campaignHoldScript},
	{"campaign_drain.lua", campaignDrainScript}, {"campaign_settle.lua", campaignSettleScript},
	{"trim_records.lua", trimRecordsScript}, {"heartbeat.lua", heartbeatScript}, {"clean_consumer.lua", cleanConsumerScript},
}

// ScriptName is the name of the script of this package whose SHA-1 (the EVALSHA argument) is
// sha, and false when none of them has it.
func ScriptName(sha string) (string, bool) {
	for _, s := range namedScripts {
		if s.script.Hash() == sha {
			return s.name, true
		}
	}
	return "", false
}
