#!/usr/bin/env node
// Enqueue Web Push jobs for webpush-gateway from Node.js, on ioredis.
//
// Copy enqueue() (and what it calls) into your application; the command line around it is for
// trying it out:
//
//   node producer.js [--redis URL] [--prefix wp] [--shards N] [--wait-replicas N]
//                    [--wait-timeout-ms MS] [--attempts N] [FILE|-]
//
// reads one job per line (the JSON of docs/job-format.md) and enqueues them. It does what the
// gateway's own Go producer (stream.Producer) does:
//
// * each job goes to the intake stream of its shard and class, as the single field "job":
//   <prefix>:{<shard>}:in:bulk when its top-level "class" is "bulk", <prefix>:{<shard>}:in
//   otherwise; the shard is the CRC-32 (zlib's, IEEE) of the job's id modulo the shard count. The
//   workers read each intake on its own, so a transactional job never waits behind bulk ones (a
//   bulk job written to :in is still sent as bulk, but transactional jobs wait behind it);
// * the shard count is checked against the one recorded in Redis (<prefix>:shards) before the
//   first write: a producer with another count than the workers' would put jobs where no worker
//   of the other count looks;
// * with --wait-replicas N, the XADDs are followed by WAIT N on the same connection, and fewer
//   acknowledging replicas is a failure: the jobs may be written but could be lost in a failover;
// * on a failure, the jobs from the first one not confirmed are sent again, with the same ids.
//   That is safe: the gateway acknowledges a copy of a job it holds or accepted without sending
//   it again.
//
// On Redis Cluster, each shard's keys, both intakes included, live on one master: send each
// master's XADDs and its WAIT on that master's own connection (ioredis: cluster.nodes('master')
// and the slot of each key). This example talks to one Redis (or a Sentinel's master).
//
// Exit status: 0 all enqueued; 1 not all enqueued (the message says from which line to send
// again); 2 a bad argument, a bad line or a shard count that is not the recorded one.
'use strict';

const fs = require('fs');
const zlib = require('zlib');
const Redis = require('ioredis');

// crc32Table is CRC-32 (IEEE 802.3, zlib's) of a Buffer, from a 256-entry table.
const table = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

function crc32Table(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = table[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// zlib.crc32 exists only from Node 20.15 and 22.2; on older releases the table above gives the
// same value.
const crc32 = typeof zlib.crc32 === 'function' ? (buf) => zlib.crc32(buf) >>> 0 : crc32Table;

class ShardCountError extends Error {}

// EnqueueError: not every job was confirmed; jobs.slice(written) must be sent again.
class EnqueueError extends Error {
  constructor(message, written) {
    super(message);
    this.written = written;
  }
}

// shardOf is the shard of a job id: CRC-32 (IEEE) of its bytes modulo the shard count.
function shardOf(id, shards) {
  if (shards < 2) return 0;
  return crc32(Buffer.from(id, 'utf8')) % shards;
}

// intakeKey is the intake of a shard: bulk jobs (and campaign entries) go to
// <prefix>:{<shard>}:in:bulk, every other job to <prefix>:{<shard>}:in. The braces are part of
// the key: Redis Cluster hashes only what is inside them, so every key of a shard, both intakes
// included, is in one slot.
function intakeKey(prefix, shard, bulk = false) {
  return `${prefix}:{${shard}}:in${bulk ? ':bulk' : ''}`;
}

// checkShards records the shard count if no process has yet, and refuses another one.
async function checkShards(redis, prefix, shards) {
  const key = `${prefix}:shards`;
  await redis.set(key, String(shards), 'NX');
  const recorded = Number(await redis.get(key));
  if (recorded !== shards) {
    throw new ShardCountError(
      `prefix "${prefix}" is used with ${recorded} shards (recorded in ${key}) but this producer was given ${shards}`);
  }
}

// peekJob is the id of one job (its JSON text) and whether it goes to the bulk intake (its
// top-level "class" is "bulk"); it throws when there is no id. A job that names no class is
// transactional; a class the gateway does not know is refused by the worker, from either intake.
function peekJob(line) {
  let job;
  try {
    job = JSON.parse(line);
  } catch (e) {
    throw new Error(`not JSON: ${e.message}`);
  }
  if (job === null || typeof job !== 'object' || Array.isArray(job) || typeof job.id !== 'string' || job.id === '') {
    throw new Error('not a JSON object with a non-empty string id');
  }
  return { id: job.id, bulk: job.class === 'bulk' };
}

// enqueue writes every job (a JSON string each) in one pipeline, then WAITs for replicas. It
// resolves to jobs.length; it rejects with an Error for a job without an id or a
// ShardCountError (nothing written either way), or an EnqueueError whose .written says how many
// jobs, from the first, are written and confirmed: send jobs.slice(written) again.
async function enqueue(redis, jobs, { prefix = 'wp', shards = 1, waitReplicas = 0, waitTimeoutMs = 1000 } = {}) {
  const keys = jobs.map((j) => {
    const { id, bulk } = peekJob(j);
    return intakeKey(prefix, shardOf(id, shards), bulk);
  });
  await checkShards(redis, prefix, shards);
  // A pipeline of one ioredis client runs on its one connection, so the WAIT after the XADDs
  // counts exactly them, whichever intake each went to.
  const pipe = redis.pipeline();
  jobs.forEach((job, i) => pipe.xadd(keys[i], '*', 'job', job));
  if (waitReplicas > 0) pipe.call('WAIT', waitReplicas, waitTimeoutMs);
  let replies;
  try {
    replies = await pipe.exec();
  } catch (e) {
    throw new EnqueueError(`redis: ${e.message}`, 0);
  }
  for (let i = 0; i < jobs.length; i++) {
    if (replies[i][0]) throw new EnqueueError(`job ${i}: ${replies[i][0].message}`, i);
  }
  if (waitReplicas > 0) {
    const [err, acked] = replies[jobs.length];
    if (err || acked < waitReplicas) {
      throw new EnqueueError(`${err ? err.message : acked} of ${waitReplicas} replicas acknowledged within ${waitTimeoutMs} ms`, 0);
    }
  }
  return jobs.length;
}

// enqueueWithRetry is enqueue, sending what was not confirmed again (same ids) up to attempts
// times; it rejects with the last EnqueueError when attempts run out.
async function enqueueWithRetry(redis, jobs, opts = {}, attempts = 5) {
  let done = 0;
  for (let attempt = 0; ; attempt++) {
    try {
      return done + (await enqueue(redis, jobs.slice(done), opts));
    } catch (e) {
      if (!(e instanceof EnqueueError)) throw e;
      done += e.written;
      if (attempt === attempts - 1) {
        e.written = done;
        throw e;
      }
      await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** attempt, 2000)));
    }
  }
}

function parseArgs(argv) {
  const o = { redis: 'redis://127.0.0.1:6379/0', prefix: 'wp', shards: 1, waitReplicas: 0, waitTimeoutMs: 1000, attempts: 5, batch: 100, file: '-' };
  const names = { '--redis': 'redis', '--prefix': 'prefix', '--shards': 'shards', '--wait-replicas': 'waitReplicas', '--wait-timeout-ms': 'waitTimeoutMs', '--attempts': 'attempts', '--batch': 'batch' };
  for (let i = 0; i < argv.length; i++) {
    const name = names[argv[i]];
    if (name) {
      if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
      const v = argv[++i];
      o[name] = typeof o[name] === 'number' ? Number(v) : v;
      if (typeof o[name] === 'number' && !Number.isInteger(o[name])) throw new Error(`${argv[i - 1]}: not a whole number: ${v}`);
    } else if (argv[i].startsWith('--')) {
      throw new Error(`unknown flag ${argv[i]}`);
    } else {
      o.file = argv[i];
    }
  }
  return o;
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`producer: ${e.message}`);
    return 2;
  }
  const text = fs.readFileSync(o.file === '-' ? 0 : o.file, 'utf8');
  const lines = text.split('\n').map((l, i) => [i + 1, l.trim()]).filter(([, l]) => l !== '');
  for (const [n, line] of lines) {
    try {
      peekJob(line);
    } catch (e) {
      console.error(`producer: line ${n}: ${e.message}`);
      return 2;
    }
  }
  const redis = new Redis(o.redis);
  try {
    let total = 0;
    for (let start = 0; start < lines.length; start += o.batch) {
      const batch = lines.slice(start, start + o.batch);
      try {
        total += await enqueueWithRetry(redis, batch.map(([, l]) => l),
          { prefix: o.prefix, shards: o.shards, waitReplicas: o.waitReplicas, waitTimeoutMs: o.waitTimeoutMs }, o.attempts);
      } catch (e) {
        if (e instanceof ShardCountError) {
          console.error(`producer: ${e.message}`);
          return 2;
        }
        if (e instanceof EnqueueError) {
          console.error(`producer: ${e.message}; send again from line ${batch[e.written][0]}`);
          return 1;
        }
        throw e;
      }
    }
    console.error(`producer: enqueued ${total} jobs`);
    return 0;
  } finally {
    redis.disconnect();
  }
}

module.exports = { crc32, crc32Table, shardOf, intakeKey, checkShards, enqueue, enqueueWithRetry, ShardCountError, EnqueueError };

if (require.main === module) {
  main().then((code) => { process.exitCode = code; }, (e) => { console.error(`producer: ${e.stack || e}`); process.exitCode = 1; });
}
