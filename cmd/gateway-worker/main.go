// Command gateway-worker delivers Web Push messages: `run` is the worker, and the other
// subcommands are what an operator runs beside it. It links only the product; the simulator
// (cmd/pushsim), the demo and the bench (cmd/gateway-lab) are commands of their own. main
// turns signals into a context and picks the subcommand from the table of commands and their
// help; each subcommand's file parses its flags, calls the packages that do the work, and
// prints what they return.
package main

import (
	"context"
	"io"
	"os"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

func main() { os.Exit(cli.Process(runMain)) }

// runMain is main without the process: tests call it.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// --version as the first word is the version command, as in most tools.
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = append([]string{"version"}, args[1:]...)
	}
	return cli.Main(ctx, "gateway-worker", commands(), args, stdout, stderr)
}

func commands() []cli.Command {
	return []cli.Command{
		{Name: "run", Summary: "the worker: deliver jobs from Redis Streams", Main: cmdRun},
		{Name: "enqueue", Summary: "put JSON-lines jobs on the intake streams", Run: cmdEnqueue, Help: cli.Help{
			Usage: "--redis URL [--shards N] [--prefix PREFIX] [FILE|-]",
			Summary: "Put jobs on the intake streams, pipelined into the right shards: one job (a JSON object with an \"id\") per line " +
				"of FILE or of standard input (docs/job-format.md).",
			Details: "A line without a string id cannot be sharded: it is refused with its line number, and the others are enqueued. " +
				"A line over 16 MiB (16777216 bytes) is refused with its line number and size and read past, never held whole, and the lines after it are still enqueued: " +
				"nothing is lost and no run needs to start again from it. " +
				"Whatever else is wrong with a job (a line over the 64 KiB entry limit included) is the worker's to dead-letter with a reason.",
			Examples: []string{
				"gateway-worker enqueue --redis redis://127.0.0.1:6379/0 jobs.jsonl",
				"producer | gateway-worker enqueue --redis redis://127.0.0.1:6379/0 --shards 4 -",
			},
			Args: "FILE", MaxArgs: 1,
			Exit: "1 some lines were refused (listed); 2 a line was over 16 MiB (listed; the others were enqueued), or the input could not be read " +
				"(the line to run again from is printed); 3 Redis could not be written (the line to run again from is printed)",
		}},
		{Name: "status", Summary: "queues, retries, live replicas and their breakers, pauses, Redis memory", Run: cmdStatus, Help: cli.Help{
			Usage: "--redis URL [--prefix PREFIX] [--shards N] [--json]",
			Summary: "Show the queues of every shard (length, lag, pending and the age of the oldest pending entry, retries due now and the next one), " +
				"the live replicas with each provider's breaker state, the paused providers and Redis's memory. Reads Redis only; no worker needed.",
			Details: "Lag is how many entries of a stream no worker has read yet; pending, how many were read and not finished. " +
				"Shards beyond the count that still hold jobs (a shrink of the count leaves them until drained) are listed too. " +
				"Cost: one SCAN of the keyspace (to find the lanes), one pipeline of EXISTS over the shard numbers beyond the count, one script per shard, INFO on every node.",
			Examples: []string{
				"gateway-worker status --redis redis://127.0.0.1:6379/0",
				"gateway-worker status --redis redis+cluster://h1:6379,h2:6379 --json | jq '.queues[] | select(.lag > 0)'",
			},
			Exit: "3 Redis could not be read",
		}},
		{Name: "inspect", Summary: "where one job is: intake, lane, in flight, waiting to retry, or its record", Run: cmdInspect, Help: cli.Help{
			Usage: "--redis URL [--scan-limit N] [--json] JOB_ID",
			Summary: "Say where one job is: in the intake (not routed yet), in its lane (waiting, or in flight with a consumer, for how long), " +
				"waiting in the delayed set to retry (until when, as which attempt, and the outcome of the attempt that sent it there), " +
				"or ended, with its ledger or dead record. Reads Redis only.",
			Details: "Only the job's shard is read (CRC-32 of the id). The jobs index and the delayed set answer in one round trip; " +
				"the intake, the job's lane, the ledger and the dead stream have no index by job id, so each is read a thousand entries a round trip, " +
				"at most --scan-limit entries (the ledger and the dead stream newest first), and the output says when a scan was cut. " +
				"With a long ledger that is up to --scan-limit entries transferred per stream: an operator's query, not something to run in a loop.",
			Examples: []string{
				"gateway-worker inspect --redis redis://127.0.0.1:6379/0 order-1234-shipped",
				"gateway-worker inspect --redis redis://127.0.0.1:6379/0 --scan-limit 100000 --json order-1234-shipped",
			},
			Args: "JOB_ID", MinArgs: 1, MaxArgs: 1,
			Exit: "1 not found anywhere (never enqueued under this prefix, or its records were trimmed); 3 Redis could not be read",
		}},
		{Name: "cancel", Summary: "cancel queued or delayed jobs that no worker has read yet", Run: cmdCancel, Help: cli.Help{
			Usage: "--redis URL JOB_ID...",
			Summary: "Cancel jobs by their id: a job waiting in the intake, in a lane (either class) or in the delayed set (a retry, or a job scheduled for later) " +
				"that no worker has read yet is removed and gets one ledger record, CANCELED; it is never sent.",
			Details: "Each id is looked for on its shard (CRC-32 of the id), and each stream with no index by job id is read a thousand entries a round trip: an operator's command. " +
				"A job a worker has read is in flight and finishes with its own record; one its push service accepted is sent; one found nowhere is unknown " +
				"(never enqueued under this prefix, already ended, or cancelled before). Each id gets a line saying which. " +
				"A copy of a job enqueued after the cancel is a new request and is delivered.",
			Examples: []string{
				"gateway-worker cancel --redis redis://127.0.0.1:6379/0 order-1234-shipped",
				"gateway-worker cancel --redis redis://127.0.0.1:6379/0 order-1234-shipped order-1235-shipped",
			},
			Args: "JOB_ID", MinArgs: 1, MaxArgs: -1,
			Exit: "1 some id could not be cancelled (in flight, sent or unknown: each is named); 3 Redis could not be read or written",
		}},
		{Name: "campaign", Summary: "one message to many subscriptions: create, add, status, ls, pause, resume, cancel", Sub: []cli.Command{
			{Name: "create", Summary: "create a campaign: its message, class, start and pace", Run: cmdCampaignCreate, Help: cli.Help{
				Usage: "--redis URL --id ID (--payload-file FILE [--payload-encoding base64] | --notification-file FILE) [flags]",
				Summary: "Create a campaign: one message, stored once, for every recipient `campaign add` gives it, each sent as a job of its own " +
					"(bulk unless --class transactional) as its provider's lane takes it, from --send-at on and at most --rate a second (docs/job-format.md, \"Campaigns\").",
				Details: "The campaign is checked as a worker checks it (a refused value names its flag), written to the intake of its shard (CRC-32 of the id), " +
					"and the command waits up to --wait for a worker to create it, or prints why a worker refused it (a vapid_key it has no key for, a send_at past its horizon). " +
					"With no worker running it says so and exits 0: the first worker to read the entry creates the campaign. A campaign that exists already is left as it is.",
				Examples: []string{
					"gateway-worker campaign create --redis redis://127.0.0.1:6379/0 --id spring-sale --payload-file message.json --rate 500",
					"gateway-worker campaign create --redis redis://127.0.0.1:6379/0 --id digest-0601 --notification-file digest.json --send-at 2026-06-01T09:00:00Z",
				},
				Exit: "1 a worker refused the campaign (why is printed), or a campaign has the id already; 3 Redis could not be read or written",
			}},
			{Name: "add", Summary: "add recipients to a campaign: one subscription a line", Run: cmdCampaignAdd, Help: cli.Help{
				Usage: "--redis URL [--shards N] [--prefix PREFIX] ID FILE|-",
				Summary: "Add recipients to campaign ID: one PushSubscription JSON object a line of FILE (- for standard input), " +
					"or {\"recipient\": KEY, \"subscription\": {...}}; blank lines are skipped.",
				Details: "Every line is read first: one that is not JSON is refused with its line number (exit 2), and nothing is written. " +
					"The recipients go to the intake of the campaign's shard in entries of at most 1000 (and 64 KiB), pipelined; the workers number them " +
					"(recipient n's job id is ID/n) and give an invalid one a dead record with its reason. Recipients added before the campaign is created wait for it.",
				Examples: []string{
					"gateway-worker campaign add --redis redis://127.0.0.1:6379/0 spring-sale subscriptions.jsonl",
					"psql -Atc 'select subscription from subscribers' | gateway-worker campaign add --redis redis://127.0.0.1:6379/0 spring-sale -",
				},
				Args: "ID and FILE", MinArgs: 2, MaxArgs: 2,
				Exit: "3 Redis could not be written (the line to run again from is printed)",
			}},
			{Name: "status", Summary: "where one campaign's recipients are, and the time left", Run: cmdCampaignStatus, Help: cli.Help{
				Usage: "--redis URL [--json] ID",
				Summary: "Show campaign ID: its state, class, pace and send_at, the recipients added, queued (per provider), in lanes and done (per outcome code), " +
					"and an estimate of the time left from the pace so far.",
				Details:  "It reads the campaign's counts on every shard and the lengths of its lists, never the ledger.",
				Examples: []string{"gateway-worker campaign status --redis redis://127.0.0.1:6379/0 spring-sale"},
				Args:     "ID", MinArgs: 1, MaxArgs: 1,
				Exit: "1 no such campaign; 3 Redis could not be read",
			}},
			{Name: "ls", Summary: "every campaign with its state and counts", Run: cmdCampaignStatus, Help: cli.Help{
				Usage:    "--redis URL [--json]",
				Summary:  "List every campaign of every shard: state, class, recipients added, queued, in lanes and done.",
				Examples: []string{"gateway-worker campaign ls --redis redis://127.0.0.1:6379/0"},
				Exit:     "3 Redis could not be read",
			}},
			{Name: "pause", Summary: "stop a campaign's recipients entering the lanes", Run: cmdCampaignState(stream.CampaignPaused), Help: cli.Help{
				Usage: "--redis URL ID",
				Summary: "Pause campaign ID: no more of its recipients enter the lanes, and the workers put those already in a lane back in its list unsent, " +
					"until `gateway-worker campaign resume ID`. Sends in flight finish.",
				Examples: []string{"gateway-worker campaign pause --redis redis://127.0.0.1:6379/0 spring-sale"},
				Args:     "ID", MinArgs: 1, MaxArgs: 1,
				Exit: "1 no such campaign, or it is canceled or not created yet; 3 Redis could not be read or written",
			}},
			{Name: "resume", Summary: "end a campaign's pause", Run: cmdCampaignState(stream.CampaignRunning), Help: cli.Help{
				Usage:    "--redis URL ID",
				Summary:  "Resume campaign ID: its recipients enter the lanes again.",
				Examples: []string{"gateway-worker campaign resume --redis redis://127.0.0.1:6379/0 spring-sale"},
				Args:     "ID", MinArgs: 1, MaxArgs: 1,
				Exit: "1 no such campaign, or it is canceled or not created yet; 3 Redis could not be read or written",
			}},
			{Name: "cancel", Summary: "cancel a campaign: its recipients not sent yet end CANCELED", Run: cmdCampaignState(stream.CampaignCanceled), Help: cli.Help{
				Usage: "--redis URL ID",
				Summary: "Cancel campaign ID: each recipient still queued gets its CANCELED ledger record now, each one in a lane gets it when a worker reads it, " +
					"and those in flight end with their own record. A canceled campaign cannot be resumed.",
				Examples: []string{"gateway-worker campaign cancel --redis redis://127.0.0.1:6379/0 spring-sale"},
				Args:     "ID", MinArgs: 1, MaxArgs: 1,
				Exit: "1 no such campaign, or it is not created yet; 3 Redis could not be read or written",
			}},
		}},
		{Name: "dead", Summary: "list, show, replay or purge dead-letter records", Sub: []cli.Command{
			{Name: "ls", Summary: "list dead records, newest first, by reason, code, provider or time", Run: cmdDeadLs, Help: cli.Help{
				Usage:   "--redis URL [--reason TEXT] [--code CODE] [--provider ID] [--since WHEN] [--until WHEN] [--limit N] [--json]",
				Summary: "List dead-letter records, newest first over every shard: entry id, job id, code, provider, when, reason.",
				Details: "Each shard's dead stream is read newest first, a thousand records a round trip, until --limit records matched " +
					"(or --since is reached): a filter that matches little reads the whole stream.",
				Examples: []string{
					"gateway-worker dead ls --redis redis://127.0.0.1:6379/0",
					"gateway-worker dead ls --redis redis://127.0.0.1:6379/0 --code PROVIDER_DOWN --provider autopush --since 2h",
				},
				Exit: "3 Redis could not be read",
			}},
			{Name: "show", Summary: "print one dead record whole, its job (and so its subscription) included", Run: cmdDeadShow, Help: cli.Help{
				Usage: "--redis URL [--json] ENTRY_ID|JOB_ID",
				Summary: "Print one dead record whole, the job JSON included. The job carries the subscription (its endpoint and keys, " +
					"which are credentials): keep the output as you keep subscriptions.",
				Details: "ENTRY_ID is the record's id in its dead stream, as `dead ls` prints it (SHARD/ENTRY_ID with several shards). " +
					"Given a job id, the newest record of that job is shown (its shard's dead stream is read newest first, at most --scan-limit records).",
				Examples: []string{
					"gateway-worker dead show --redis redis://127.0.0.1:6379/0 1717171717171-0",
					"gateway-worker dead show --redis redis://127.0.0.1:6379/0 --json order-1234-shipped | jq -r .job",
				},
				Args: "ENTRY_ID or JOB_ID", MinArgs: 1, MaxArgs: 1,
				Exit: "1 no such record; 3 Redis could not be read",
			}},
			{Name: "replay", Summary: "put chosen records' jobs back on their intake as new jobs, once each", Run: cmdDeadReplay, Help: cli.Help{
				Usage: "--redis URL (ENTRY_ID... | [--reason TEXT] [--code CODE] [--provider ID] [--since WHEN] [--until WHEN] | --all) [--include-invalid] [--dry-run]",
				Summary: "Put the jobs of chosen dead records back on their shard's intake as new jobs (attempt 0: the intake validates and routes them again), " +
					"each record's move one Redis script that deletes the record: a record is replayed once, however often this runs.",
				Details: "A record that keeps only the first bytes of its job (its note says so: an invalid job, or an entry over the entry limit) cannot be replayed: it is skipped and named. " +
					"A record whose code says the same job would fail the same way again (INVALID_JOB, PAYLOAD_TOO_LARGE, INVALID_REQUEST, INVALID_TTL, BLOCKED, " +
					"and EXPIRED, since a replayed job keeps its enqueued_at) is skipped with the reason and counted in the summary, whether chosen by entry id, filter or --all; " +
					"once what refused it was fixed (a vapid_key configured), --include-invalid replays it too. " +
					"A replayed job keeps its id and its enqueued_at, from which its TTL counts. " +
					"Filters read each shard's dead stream newest first, as `dead ls` does.",
				Examples: []string{
					"gateway-worker dead replay --redis redis://127.0.0.1:6379/0 1717171717171-0 1717171717172-0",
					"gateway-worker dead replay --redis redis://127.0.0.1:6379/0 --code PROVIDER_DOWN --since 6h --dry-run",
				},
				Args: "ENTRY_ID", MaxArgs: -1,
				Exit: "1 some chosen records could not be replayed, or an entry id names no record (mistyped, or replayed or purged before): each named, the others replayed; " +
					"records skipped as failing again are not a failure; 3 Redis could not be read or written",
			}},
			{Name: "purge", Summary: "delete chosen records", Run: cmdDeadPurge, Help: cli.Help{
				Usage:   "--redis URL (ENTRY_ID... | [--reason TEXT] [--code CODE] [--provider ID] [--since WHEN] [--until WHEN] | --all --yes) [--dry-run]",
				Summary: "Delete chosen dead records. Their jobs are gone for good: replay what should still be delivered first.",
				Examples: []string{
					"gateway-worker dead purge --redis redis://127.0.0.1:6379/0 --code INVALID_JOB --until 30d",
					"gateway-worker dead purge --redis redis://127.0.0.1:6379/0 --all --yes",
				},
				Args: "ENTRY_ID", MaxArgs: -1,
				Exit: "1 an entry id is on several shards (named; give SHARD/ENTRY_ID); 3 Redis could not be read or written",
			}},
		}},
		{Name: "pause", Summary: "stop every worker reading a provider's lanes; its jobs wait in Redis", Run: cmdPause, Help: cli.Help{
			Usage: "--redis URL [--reason TEXT] PROVIDER",
			Summary: "Pause a provider: at their next heartbeat (within the registry's heartbeat.every) every worker's lanes of it stop reading, " +
				"and the reclaimer claims none of its entries; its jobs wait in Redis, spending no attempt, until `gateway-worker resume PROVIDER`.",
			Details: "The pause is kept in Redis (<prefix>:{hb}:paused), so it holds for workers started later too. " +
				"Sends already in flight finish. `gateway-worker status` lists the pauses.",
			Examples: []string{
				"gateway-worker pause --redis redis://127.0.0.1:6379/0 --reason 'autopush incident 42' autopush",
				"gateway-worker resume --redis redis://127.0.0.1:6379/0 autopush",
			},
			Args: "PROVIDER (a provider id of the registry)", MinArgs: 1, MaxArgs: 1,
			Exit: "3 Redis could not be written",
		}},
		{Name: "resume", Summary: "end a provider's pause", Run: cmdResume, Help: cli.Help{
			Usage:    "--redis URL PROVIDER",
			Summary:  "End a provider's pause: every worker's lanes of it read again at their next heartbeat.",
			Examples: []string{"gateway-worker resume --redis redis://127.0.0.1:6379/0 autopush"},
			Args:     "PROVIDER", MinArgs: 1, MaxArgs: 1,
			Exit: "3 Redis could not be written",
		}},
		{Name: "audit", Summary: "check that every job id reached exactly one terminal record", Run: cmdAudit, Help: cli.Help{
			Usage: "--redis URL (--ids FILE | --campaign ID) [--json]",
			Summary: "Check that every job of a list, or every recipient of a campaign, reached exactly one terminal record (a ledger or a dead record), " +
				"count the records by outcome code, and say where each job without one is: intake, a lane, pending with a consumer, delayed, " +
				"its campaign's list (not in a lane yet), or nowhere (lost).",
			Details: "It reads the whole ledger and dead stream of every shard: an operator's check, not a hot path. " +
				"Records trimmed by --results-maxlen or --dead-maxlen count as missing. " +
				"A campaign's recipients are those the workers have numbered: the ones of an add entry still in the intake are not counted yet.",
			Examples: []string{
				"gateway-worker audit --redis redis://127.0.0.1:6379/0 --ids jobs.jsonl",
				"gateway-worker audit --redis redis://127.0.0.1:6379/0 --ids ids.txt --json",
				"gateway-worker audit --redis redis://127.0.0.1:6379/0 --campaign spring-sale",
			},
			Exit: "1 some jobs have no terminal record yet, or more than one, or no campaign has the ID; 3 Redis could not be read",
		}},
		{Name: "send", Summary: "send one message through the real adapter path and print its outcome", Run: cmdSend, Help: cli.Help{
			Usage: "--subscription FILE --vapid-key FILE --subject URL [--payload TEXT] [flags]",
			Summary: "Send one message through the worker's own path (registry routing, request shaping, RFC 8291 encryption, VAPID) " +
				"and print its outcome as one JSON object: code, status, provider, retryable, retry_after, detail.",
			Details: "The subscription is judged as run judges a job's: one the worker would dead-letter is INVALID_JOB, with the reason its dead record would give, and is not sent.",
			Examples: []string{
				"gateway-worker send --subscription sub.json --payload hi --vapid-key vapid.pem --subject mailto:ops@example.com",
				"gateway-worker send --subscription sub.json --payload hi --vapid-key k.pem --subject mailto:ops@example.com \\",
				"    --ca-file \"$CA\" --connect-to \"$CONNECT_TO\"     # against pushsim: the values it prints",
			},
			Exit: "1 the push service did not accept it (the code says why)",
		}},
		{Name: "keygen", Summary: "make a VAPID key pair, or print the public key of one", Run: cmdKeygen, Help: cli.Help{
			Usage: "[--out FILE [--force]] [--json] | --public FILE [--json]",
			Summary: "Make a VAPID key pair: the private key goes to --out (PEM, mode 0600, never replaced unless --force), " +
				"the public key (the applicationServerKey browsers subscribe with) to standard output. " +
				"With --public FILE, print the public key of an existing key file instead (PEM or the raw base64url key).",
			Details: "--json prints {\"publicKey\":\"...\",\"privateKey\":\"...\"} as `web-push generate-vapid-keys --json` does " +
				"(the private key raw, base64url) and writes no file unless --out is given: keep that output secret.",
			Examples: []string{
				"gateway-worker keygen --out vapid.pem",
				"gateway-worker keygen --public vapid.pem",
				"gateway-worker keygen --json > vapid.json",
			},
			Exit: "1 the key file exists (and no --force) or could not be written or read",
		}},
		{Name: "check", Summary: "validate a registry file", Run: cmdCheck, Help: cli.Help{
			Usage: "[FILE | --registry FILE]",
			Summary: "Validate a provider table as the worker loads it, and say which file was checked: FILE, else --registry FILE, " +
				"else the table built into this binary. Every mistake is reported as file:line: field: problem.",
			Examples: []string{
				"gateway-worker check registry.yaml",
				"GATEWAY_REGISTRY=/etc/gateway/registry.yaml gateway-worker check",
				"gateway-worker check            # the built-in table",
			},
			Args: "FILE", MaxArgs: 1,
			Exit: "1 the table has mistakes (listed)",
		}},
		{Name: "registry", Summary: "print the built-in registry.yaml, a starting point for your own", Run: cmdRegistry, Help: cli.Help{
			Usage: "",
			Summary: "Print the provider table built into this binary (the registry.yaml every command uses without --registry), " +
				"as a starting point for your own: edit it, check it with `gateway-worker check FILE`, and give it to run, send and inventory with --registry FILE.",
			Examples: []string{
				"gateway-worker registry > registry.yaml",
				"gateway-worker check registry.yaml",
			},
			Exit: "1 standard output could not be written",
		}},
		{Name: "inventory", Summary: "count a subscription export per provider and show the in-flight budgets", Run: cmdInventory, Help: cli.Help{
			Usage: "[--registry FILE] [--total N] [--top N] FILE|-",
			Summary: "Count a subscription export per provider and per unknown host, list the lines that could not be read, " +
				"and show the in-flight budget each provider would get. Endpoint paths are never printed.",
			Details: "FILE (- for standard input) holds one subscription a line: a PushSubscription JSON object, a job with " +
				"\"subscription\", {\"endpoint\": ...}, or a bare endpoint URL.",
			Examples: []string{
				"gateway-worker inventory subscriptions.jsonl",
				"psql -Atc 'select endpoint from subscriptions' | gateway-worker inventory --registry registry.yaml -",
			},
			Args: "FILE (a subscription export, or - for standard input)", MinArgs: 1, MaxArgs: 1,
			Exit: "1 the registry has mistakes",
		}},
		{Name: "version", Summary: "print the version of this build and of the Go that built it", Run: cmdVersion, Help: cli.Help{
			Usage:    "",
			Summary:  "Print the version of this build (module version, else VCS revision, else devel) and the Go release that built it.",
			Examples: []string{"gateway-worker version", "gateway-worker --version"},
		}},
	}
}
