#!/usr/bin/env python3
"""Enqueue Web Push jobs for webpush-gateway from Python, on redis-py.

Copy enqueue() (and what it calls) into your application; the command line around it is for
trying it out:

    producer.py [--redis URL] [--prefix wp] [--shards N] [--wait-replicas N]
                [--wait-timeout-ms MS] [--attempts N] [FILE|-]

reads one job per line (the JSON of docs/job-format.md) and enqueues them. It does what the
gateway's own Go producer (stream.Producer) does:

* each job goes to the intake stream of its shard and class, as the single field "job":
  <prefix>:{<shard>}:in:bulk when its top-level "class" is "bulk", <prefix>:{<shard>}:in
  otherwise; the shard is the CRC-32 (zlib's, IEEE) of the job's id modulo the shard count. The
  workers read each intake on its own, so a transactional job never waits behind bulk ones (a
  bulk job written to :in is still sent as bulk, but transactional jobs wait behind it);
* the shard count is checked against the one recorded in Redis (<prefix>:shards) before the
  first write: a producer with another count than the workers' would put jobs where no worker
  of the other count looks;
* with --wait-replicas N, the XADDs are followed by WAIT N on the same connection, and fewer
  acknowledging replicas is a failure: the jobs may be written but could be lost in a failover;
* on a failure, the jobs from the first one not confirmed are sent again, with the same ids.
  That is safe: the gateway acknowledges a copy of a job it holds or accepted without sending
  it again.

On Redis Cluster, each shard's keys, both intakes included, live on one master: send each
master's XADDs and its WAIT on a connection of its own to that master (redis-py:
RedisCluster.get_node_from_key(key), then get_redis_connection(node)). This example talks to one
Redis (or a Sentinel's master).

Exit status: 0 all enqueued; 1 not all enqueued (the message says from which line to send
again); 2 a bad argument, a bad line or a shard count that is not the recorded one.
"""

import argparse
import json
import sys
import time
import zlib

import redis


class ShardCountError(Exception):
    """The shard count differs from the one recorded in Redis: nothing was written."""


class EnqueueError(Exception):
    """Not every job was confirmed; jobs[written:] must be sent again."""

    def __init__(self, message, written):
        super().__init__(message)
        self.written = written


def shard_of(job_id, shards):
    """The shard of a job id: CRC-32 (IEEE) of its bytes modulo the shard count."""
    if shards < 2:
        return 0
    return zlib.crc32(job_id.encode("utf-8")) % shards


def intake_key(prefix, shard, bulk=False):
    """The intake of a shard: bulk jobs (and campaign entries) go to <prefix>:{<shard>}:in:bulk,
    every other job to <prefix>:{<shard>}:in."""
    # The braces are part of the key: Redis Cluster hashes only what is inside them, so every
    # key of a shard, both intakes included, is in one slot.
    return "%s:{%d}:in%s" % (prefix, shard, ":bulk" if bulk else "")


def check_shards(r, prefix, shards):
    """Records the shard count if no process has yet, and refuses another one."""
    key = prefix + ":shards"
    r.set(key, shards, nx=True)
    recorded = int(r.get(key))
    if recorded != shards:
        raise ShardCountError(
            "prefix %r is used with %d shards (recorded in %s) but this producer was given %d"
            % (prefix, recorded, key, shards))


def peek_job(line):
    """The id of one job (its JSON text) and whether it goes to the bulk intake (its top-level
    "class" is "bulk"); ValueError when it has no id. A job that names no class is
    transactional; a class the gateway does not know is refused by the worker, from either
    intake."""
    try:
        job = json.loads(line)
    except ValueError as e:
        raise ValueError("not JSON: %s" % e)
    if not isinstance(job, dict) or not isinstance(job.get("id"), str) or not job["id"]:
        raise ValueError("not a JSON object with a non-empty string id")
    return job["id"], job.get("class") == "bulk"


def enqueue(r, jobs, prefix="wp", shards=1, wait_replicas=0, wait_timeout_ms=1000):
    """Writes every job (a JSON string each) in one pipeline, then WAITs for replicas.

    Returns len(jobs). Raises ValueError (nothing written) for a job without an id,
    ShardCountError (nothing written), or EnqueueError whose .written says how many jobs, from
    the first, are written and confirmed: send jobs[written:] again.
    """
    targets = []
    for j in jobs:
        jid, bulk = peek_job(j)
        targets.append(intake_key(prefix, shard_of(jid, shards), bulk))
    check_shards(r, prefix, shards)
    # One pipeline runs on one connection, so the WAIT after the XADDs counts exactly them,
    # whichever intake each went to.
    pipe = r.pipeline(transaction=False)
    for key, job in zip(targets, jobs):
        pipe.xadd(key, {"job": job})
    if wait_replicas > 0:
        pipe.wait(wait_replicas, wait_timeout_ms)
    try:
        replies = pipe.execute(raise_on_error=False)
    except (redis.ConnectionError, redis.TimeoutError) as e:
        raise EnqueueError("redis: %s" % e, 0)
    for i, reply in enumerate(replies[:len(jobs)]):
        if isinstance(reply, Exception):
            raise EnqueueError("job %d: %s" % (i, reply), i)
    if wait_replicas > 0:
        acked = replies[-1]
        if isinstance(acked, Exception) or acked < wait_replicas:
            raise EnqueueError("%s of %d replicas acknowledged within %d ms"
                               % (acked, wait_replicas, wait_timeout_ms), 0)
    return len(jobs)


def enqueue_with_retry(r, jobs, attempts=5, **kw):
    """enqueue(), sending what was not confirmed again (same ids) up to attempts times.

    Returns how many jobs are confirmed; raises the last EnqueueError when attempts run out.
    """
    done = 0
    for attempt in range(attempts):
        try:
            return done + enqueue(r, jobs[done:], **kw)
        except EnqueueError as e:
            done += e.written
            if attempt == attempts - 1:
                e.written = done
                raise
            time.sleep(min(0.1 * 2 ** attempt, 2.0))
    return done


def main():
    ap = argparse.ArgumentParser(description="Enqueue JSON-lines jobs for webpush-gateway.")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--prefix", default="wp")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--wait-replicas", type=int, default=0)
    ap.add_argument("--wait-timeout-ms", type=int, default=1000)
    ap.add_argument("--attempts", type=int, default=5)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("file", nargs="?", default="-")
    args = ap.parse_args()

    src = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
    lines = [(n, l.strip()) for n, l in enumerate(src, 1) if l.strip()]
    for n, line in lines:
        try:
            peek_job(line)
        except ValueError as e:
            print("producer: line %d: %s" % (n, e), file=sys.stderr)
            return 2

    r = redis.Redis.from_url(args.redis)
    total = 0
    for start in range(0, len(lines), args.batch):
        batch = lines[start:start + args.batch]
        try:
            total += enqueue_with_retry(
                r, [l for _, l in batch], attempts=args.attempts, prefix=args.prefix,
                shards=args.shards, wait_replicas=args.wait_replicas,
                wait_timeout_ms=args.wait_timeout_ms)
        except ShardCountError as e:
            print("producer: %s" % e, file=sys.stderr)
            return 2
        except EnqueueError as e:
            print("producer: %s; send again from line %d" % (e, batch[e.written][0]),
                  file=sys.stderr)
            return 1
    print("producer: enqueued %d jobs" % total, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
