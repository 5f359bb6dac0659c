#!/usr/bin/env python3
"""Send a campaign through webpush-gateway from Python, on redis-py: one message, which the
gateway stores once, for many subscriptions, each sent as a job of its own.

Copy create_campaign(), add_recipients() and recipient_batches() (and what they call here and in
producer.py: shard_of, intake_key, check_shards) into your application; the command line around
them is for trying them out:

    campaign.py create [--redis URL] [--prefix wp] [--shards N] [--wait-replicas N]
                       [--wait-timeout-ms MS] CAMPAIGN_FILE
    campaign.py add    [--redis URL] [--prefix wp] [--shards N] [--wait-replicas N]
                       [--wait-timeout-ms MS] ID [FILE|-]

`create` writes the campaign in CAMPAIGN_FILE (the JSON object of docs/job-format.md,
"Campaigns": id, payload or notification, ttl, urgency, topic, vapid_key, class, send_at,
rate); `add` reads one recipient per line, a subscription (PushSubscription.toJSON()) or
{"recipient": KEY, "subscription": {...}} with your key for it, and adds them to campaign ID.
They write what the gateway's Go producer (stream.Producer.CreateCampaign and AddRecipients)
writes, with producer.py's checks:

* both entries go to the bulk intake of the campaign's shard, <prefix>:{<shard>}:in:bulk, as
  the single field "job", whatever the campaign's class: the shard is the CRC-32 of the
  campaign's id modulo the shard count, the rule of a job's id. The workers read that intake on
  its own, so a campaign's batches never hold up a transactional job;
* the shard count is checked against the one recorded in Redis (<prefix>:shards) before the
  first write;
* recipients go in add_recipients entries of at most 1,000 recipients and under the 64 KiB an
  entry may hold, 32 entries a pipeline;
* with --wait-replicas N, the XADDs are followed by WAIT N on the same connection, and fewer
  acknowledging replicas is a failure: the entries may be written but could be lost in a
  failover.

A create entry written again is safe: the gateway acknowledges a copy of a campaign it has. A
batch carries an id of its own, so the same entry written twice (a pipeline a client sends
again after a reconnect) adds its recipients once; but the gateway numbers recipients as it
reads them (recipient n's job id is <campaign>/<n>), and a second run of this sender makes
new batches, so recipients it adds again are sent again.
add_recipients() therefore never writes a batch again itself, and says how many recipients,
from the first, Redis confirmed. Each recipient's records (ledger, gone and dead streams) carry
the campaign's id in "campaign", the ledger's and dead stream's your key in "recipient";
consumer.py shows them.

Exit status: 0 done; 1 not all confirmed (the message says what was written and from which line
to add again); 2 a bad argument, a bad line, a bad campaign id or a shard count that is not the
recorded one.
"""

import argparse
import json
import re
import secrets
import sys

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from producer import EnqueueError, ShardCountError, check_shards, intake_key, shard_of

MAX_RECIPIENTS = 1000
# The gateway refuses an entry over 65536 bytes; a batch stays a kilobyte under it, as the Go
# producer's do.
MAX_BATCH_BYTES = 65536 - 1024

# A pipeline of a few megabytes at most, so that a large campaign's write never outlasts the
# client's socket timeout.
PIPELINE_ENTRIES = 32

CAMPAIGN_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class AddRecipientsError(Exception):
    """Not every recipient is confirmed. recipients[:written] are written (replicated False: a
    WAIT fell short for them, so a failover could still lose them); recipients[written:] are not
    confirmed, though a batch whose answer was lost may be written all the same."""

    def __init__(self, message, written, replicated=True):
        super().__init__(message)
        self.written = written
        self.replicated = replicated


def check_campaign_id(cid):
    """ValueError unless cid can name a campaign: 1 to 64 letters, digits, '.', '_' and '-'."""
    if not isinstance(cid, str) or not CAMPAIGN_ID.fullmatch(cid):
        raise ValueError("campaign id %r: must be 1 to 64 letters, digits, '.', '_' and '-'"
                         % (cid,))


def compact(value):
    # ASCII only (non-ASCII escaped), so a string's length is its size in bytes.
    return json.dumps(value, separators=(",", ":"))


def create_campaign(r, campaign, prefix="wp", shards=1, wait_replicas=0, wait_timeout_ms=1000):
    """Writes the create entry of campaign (a dict) to its shard's bulk intake, then WAITs for
    replicas. Returns the campaign's id. Raises ValueError for a bad id or ShardCountError
    (nothing written either way), or EnqueueError: writing it again is safe.

    A worker checks the rest when it reads the entry, and dead-letters a campaign it refuses
    with the reason; `gateway-worker campaign status ID` says whether it was created.
    """
    if not isinstance(campaign, dict):
        raise ValueError("a campaign is a JSON object")
    check_campaign_id(campaign.get("id"))
    key = intake_key(prefix, shard_of(campaign["id"], shards), bulk=True)
    try:
        check_shards(r, prefix, shards)
    except redis.RedisError as e:
        raise EnqueueError("redis: %s" % e, 0)
    pipe = r.pipeline(transaction=False)
    pipe.xadd(key, {"job": compact({"create_campaign": campaign})})
    if wait_replicas > 0:
        pipe.wait(wait_replicas, wait_timeout_ms)
    try:
        replies = pipe.execute(raise_on_error=False)
    except (redis.ConnectionError, redis.TimeoutError) as e:
        raise EnqueueError("redis: %s" % e, 0)
    if isinstance(replies[0], Exception):
        raise EnqueueError("create entry: %s" % replies[0], 0)
    if wait_replicas > 0 and (isinstance(replies[1], Exception) or replies[1] < wait_replicas):
        raise EnqueueError("%s of %d replicas acknowledged within %d ms"
                           % (replies[1], wait_replicas, wait_timeout_ms), 0)
    return campaign["id"]


def recipient_batches(campaign_id, recipients):
    """The add_recipients entries of recipients (each a dict: a subscription, or {"recipient":
    KEY, "subscription": {...}}), in order, as (entry JSON, how many recipients it holds): at
    most MAX_RECIPIENTS and MAX_BATCH_BYTES bytes each. Raises ValueError, before returning any,
    for a bad campaign id or a recipient too large for an entry of its own."""
    check_campaign_id(campaign_id)
    # Each batch has an id of its own (this run's, and its number): a batch written twice is
    # then added once.
    run = secrets.token_hex(8)

    def head():
        return '{"add_recipients":{"campaign":%s,"batch":"%s-%06d","recipients":[' % (
            compact(campaign_id), run, len(batches))

    tail = "]}}"
    batches, parts, size = [], [], 0
    room = MAX_BATCH_BYTES - len(head()) - len(tail)
    for i, recipient in enumerate(recipients):
        c = compact(recipient)
        if len(c) > room:
            raise ValueError("recipient %d is %d bytes; at most %d" % (i, len(c), room))
        if len(parts) == MAX_RECIPIENTS or (parts and size + 1 + len(c) > room):
            batches.append((head() + ",".join(parts) + tail, len(parts)))
            parts, size = [], 0
        size += len(c) + (1 if parts else 0)
        parts.append(c)
    if parts:
        batches.append((head() + ",".join(parts) + tail, len(parts)))
    return batches


def add_recipients(r, campaign_id, recipients, prefix="wp", shards=1, wait_replicas=0,
                   wait_timeout_ms=1000):
    """Adds recipients to campaign campaign_id: its add_recipients entries to the campaign's
    shard's bulk intake, PIPELINE_ENTRIES a pipeline, each pipeline followed by WAIT for
    replicas. Returns len(recipients).

    Raises ValueError or ShardCountError (nothing written), or AddRecipientsError (.written,
    .replicated). Never writes a batch twice: see the module's docstring. Make r with retries
    off (retry=Retry(NoBackoff(), 0)), so that redis-py does not write a pipeline again after a
    connection error either.
    """
    batches = recipient_batches(campaign_id, recipients)
    key = intake_key(prefix, shard_of(campaign_id, shards), bulk=True)
    try:
        check_shards(r, prefix, shards)
    except redis.RedisError as e:
        raise AddRecipientsError("redis: %s" % e, 0)
    written = 0
    for start in range(0, len(batches), PIPELINE_ENTRIES):
        part = batches[start:start + PIPELINE_ENTRIES]
        # One pipeline runs on one connection, so the WAIT after the XADDs counts exactly them.
        pipe = r.pipeline(transaction=False)
        for entry, _ in part:
            pipe.xadd(key, {"job": entry})
        if wait_replicas > 0:
            pipe.wait(wait_replicas, wait_timeout_ms)
        try:
            replies = pipe.execute(raise_on_error=False)
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise AddRecipientsError("redis: %s" % e, written)
        for (_, count), reply in zip(part, replies):
            if isinstance(reply, Exception):
                raise AddRecipientsError("redis: %s" % reply, written)
            written += count
        if wait_replicas > 0:
            acked = replies[-1]
            if isinstance(acked, Exception) or acked < wait_replicas:
                raise AddRecipientsError("%s of %d replicas acknowledged within %d ms"
                                         % (acked, wait_replicas, wait_timeout_ms), written,
                                         replicated=False)
    return written


def read_lines(path):
    src = sys.stdin if path == "-" else open(path, encoding="utf-8")
    with src:
        return [(n, l.strip()) for n, l in enumerate(src, 1) if l.strip()]


def main():
    ap = argparse.ArgumentParser(description="Create a webpush-gateway campaign, or add recipients to one.")
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("create", "add"):
        p = sub.add_parser(name)
        p.add_argument("--redis", default="redis://127.0.0.1:6379/0")
        p.add_argument("--prefix", default="wp")
        p.add_argument("--shards", type=int, default=1)
        p.add_argument("--wait-replicas", type=int, default=0)
        p.add_argument("--wait-timeout-ms", type=int, default=1000)
        if name == "create":
            p.add_argument("file", help="the campaign, one JSON object")
        else:
            p.add_argument("id", help="the campaign's id")
            p.add_argument("file", nargs="?", default="-", help="one recipient a line")
    args = ap.parse_args()
    opts = dict(prefix=args.prefix, shards=args.shards, wait_replicas=args.wait_replicas,
                wait_timeout_ms=args.wait_timeout_ms)
    r = redis.Redis.from_url(args.redis, retry=Retry(NoBackoff(), 0))

    if args.command == "create":
        try:
            with open(args.file, encoding="utf-8") as f:
                campaign = json.load(f)
            cid = create_campaign(r, campaign, **opts)
        except (OSError, ValueError, ShardCountError) as e:
            print("campaign: %s: %s" % (args.file, e), file=sys.stderr)
            return 2
        except EnqueueError as e:
            print("campaign: %s; writing it again is safe" % e, file=sys.stderr)
            return 1
        print("campaign: wrote the create entry of %s to %s: a worker creates the campaign when "
              "it reads it" % (cid, intake_key(args.prefix, shard_of(cid, args.shards), bulk=True)),
              file=sys.stderr)
        return 0

    try:
        lines = read_lines(args.file)
    except OSError as e:
        print("campaign: %s" % e, file=sys.stderr)
        return 2
    recipients = []
    for n, line in lines:
        try:
            recipients.append(json.loads(line))
        except ValueError as e:
            print("campaign: line %d: not JSON: %s; nothing written" % (n, e), file=sys.stderr)
            return 2
    try:
        entries = len(recipient_batches(args.id, recipients))
    except ValueError as e:
        print("campaign: %s; nothing written" % e, file=sys.stderr)
        return 2
    try:
        done = add_recipients(r, args.id, recipients, **opts)
    except ShardCountError as e:
        print("campaign: %s" % e, file=sys.stderr)
        return 2
    except AddRecipientsError as e:
        done = e.written
        if not e.replicated:
            rest = "" if done == len(lines) else "; add again from line %d" % lines[done][0]
            print("campaign: %s: the %d recipients up to line %d are written, the last entries "
                  "on too few replicas: a failover could lose them, and adding them again sends "
                  "twice those it keeps%s" % (e, done, lines[done - 1][0], rest), file=sys.stderr)
        else:
            print("campaign: stopped after %d recipients: %s; add again from line %d (a batch "
                  "whose answer was lost may be written: `gateway-worker campaign status %s` "
                  "counts the recipients added)" % (done, e, lines[done][0], args.id),
                  file=sys.stderr)
        return 1
    print("campaign: added %d recipients to campaign %s in %d entries"
          % (done, args.id, entries), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
