#!/usr/bin/env node
// Send a campaign through webpush-gateway from Node.js, on ioredis: one message, which the
// gateway stores once, for many subscriptions, each sent as a job of its own.
//
// Copy createCampaign(), addRecipients() and recipientBatches() (and what they call here and in
// producer.js: shardOf, intakeKey, checkShards) into your application; the command line around
// them is for trying them out:
//
//   node campaign.js create [--redis URL] [--prefix wp] [--shards N] [--wait-replicas N]
//                           [--wait-timeout-ms MS] CAMPAIGN_FILE
//   node campaign.js add    [--redis URL] [--prefix wp] [--shards N] [--wait-replicas N]
//                           [--wait-timeout-ms MS] ID [FILE|-]
//
// `create` writes the campaign in CAMPAIGN_FILE (the JSON object of docs/job-format.md,
// "Campaigns": id, payload or notification, ttl, urgency, topic, vapid_key, class, send_at,
// rate); `add` reads one recipient per line, a subscription (PushSubscription.toJSON()) or
// {"recipient": KEY, "subscription": {...}} with your key for it, and adds them to campaign ID.
// They write what the gateway's Go producer (stream.Producer.CreateCampaign and AddRecipients)
// writes, with producer.js's checks:
//
// * both entries go to the bulk intake of the campaign's shard, <prefix>:{<shard>}:in:bulk, as
//   the single field "job", whatever the campaign's class: the shard is the CRC-32 of the
//   campaign's id modulo the shard count, the rule of a job's id. The workers read that intake
//   on its own, so a campaign's batches never hold up a transactional job;
// * the shard count is checked against the one recorded in Redis (<prefix>:shards) before the
//   first write;
// * recipients go in add_recipients entries of at most 1,000 recipients and under the 64 KiB an
//   entry may hold, 32 entries a pipeline;
// * with --wait-replicas N, the XADDs are followed by WAIT N on the same connection, and fewer
//   acknowledging replicas is a failure: the entries may be written but could be lost in a
//   failover.
//
// A create entry written again is safe: the gateway acknowledges a copy of a campaign it has. A
// batch carries an id of its own, so the same entry written twice (a pipeline a client sends
// again after a reconnect) adds its recipients once; but the gateway numbers recipients as it
// reads them (recipient n's job id is <campaign>/<n>), and a second run of this sender makes
// new batches, so recipients it adds again are sent again.
// addRecipients() therefore never writes a batch again itself, and says how many recipients,
// from the first, Redis confirmed. Each recipient's records (ledger, gone and dead streams)
// carry the campaign's id in "campaign", the ledger's and dead stream's your key in
// "recipient"; consumer.js shows them.
//
// Exit status: 0 done; 1 not all confirmed (the message says what was written and from which
// line to add again); 2 a bad argument, a bad line, a bad campaign id or a shard count that is
// not the recorded one.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const Redis = require('ioredis');
const { shardOf, intakeKey, checkShards, ShardCountError, EnqueueError } = require('./producer.js');

const MAX_RECIPIENTS = 1000;
// The gateway refuses an entry over 65536 bytes; a batch stays a kilobyte under it, as the Go
// producer's do.
const MAX_BATCH_BYTES = 65536 - 1024;
// A pipeline of a few megabytes at most, so that a large campaign's write never outlasts the
// client's timeouts.
const PIPELINE_ENTRIES = 32;

// AddRecipientsError: not every recipient is confirmed. recipients.slice(0, written) are written
// (replicated false: a WAIT fell short for them, so a failover could still lose them);
// recipients.slice(written) are not confirmed, though a batch whose answer was lost may be
// written all the same.
class AddRecipientsError extends Error {
  constructor(message, written, replicated = true) {
    super(message);
    this.written = written;
    this.replicated = replicated;
  }
}

// checkCampaignId throws unless id can name a campaign: 1 to 64 letters, digits, '.', '_' and
// '-'.
function checkCampaignId(id) {
  if (typeof id !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(id)) {
    throw new Error(`campaign id ${JSON.stringify(id)}: must be 1 to 64 letters, digits, '.', '_' and '-'`);
  }
}

// createCampaign writes the create entry of campaign (an object) to its shard's bulk intake,
// then WAITs for replicas, and resolves to the campaign's id. It rejects with an Error for a bad id
// or a ShardCountError (nothing written either way), or an EnqueueError: writing it again is
// safe. A worker checks the rest when it reads the entry, and dead-letters a campaign it refuses
// with the reason; `gateway-worker campaign status ID` says whether it was created.
async function createCampaign(redis, campaign, { prefix = 'wp', shards = 1, waitReplicas = 0, waitTimeoutMs = 1000 } = {}) {
  if (campaign === null || typeof campaign !== 'object' || Array.isArray(campaign)) throw new Error('a campaign is a JSON object');
  checkCampaignId(campaign.id);
  const key = intakeKey(prefix, shardOf(campaign.id, shards), true);
  await checkShards(redis, prefix, shards).catch((e) => {
    throw e instanceof ShardCountError ? e : new EnqueueError(`redis: ${e.message}`, 0);
  });
  const pipe = redis.pipeline();
  pipe.xadd(key, '*', 'job', JSON.stringify({ create_campaign: campaign }));
  if (waitReplicas > 0) pipe.call('WAIT', waitReplicas, waitTimeoutMs);
  let replies;
  try {
    replies = await pipe.exec();
  } catch (e) {
    throw new EnqueueError(`redis: ${e.message}`, 0);
  }
  if (replies[0][0]) throw new EnqueueError(`create entry: ${replies[0][0].message}`, 0);
  if (waitReplicas > 0) {
    const [err, acked] = replies[1];
    if (err || acked < waitReplicas) {
      throw new EnqueueError(`${err ? err.message : acked} of ${waitReplicas} replicas acknowledged within ${waitTimeoutMs} ms`, 0);
    }
  }
  return campaign.id;
}

// recipientBatches is the add_recipients entries of recipients (each an object: a subscription,
// or {recipient: KEY, subscription: {...}}), in order, as [entry JSON, how many recipients it
// holds]: at most MAX_RECIPIENTS and MAX_BATCH_BYTES bytes (UTF-8) each. It throws, before
// returning any, for a bad campaign id or a recipient too large for an entry of its own.
function recipientBatches(campaignId, recipients) {
  checkCampaignId(campaignId);
  // Each batch has an id of its own (this run's, and its number): a batch written twice is
  // then added once.
  const run = crypto.randomBytes(8).toString('hex');
  const batches = [];
  const head = () =>
    `{"add_recipients":{"campaign":${JSON.stringify(campaignId)},"batch":"${run}-${String(batches.length).padStart(6, '0')}","recipients":[`;
  const tail = ']}}';
  const room = MAX_BATCH_BYTES - Buffer.byteLength(head()) - tail.length;
  let parts = [];
  let size = 0;
  recipients.forEach((recipient, i) => {
    const c = JSON.stringify(recipient);
    const n = Buffer.byteLength(c, 'utf8');
    if (n > room) throw new Error(`recipient ${i} is ${n} bytes; at most ${room}`);
    if (parts.length === MAX_RECIPIENTS || (parts.length > 0 && size + 1 + n > room)) {
      batches.push([head() + parts.join(',') + tail, parts.length]);
      parts = [];
      size = 0;
    }
    size += n + (parts.length > 0 ? 1 : 0);
    parts.push(c);
  });
  if (parts.length > 0) batches.push([head() + parts.join(',') + tail, parts.length]);
  return batches;
}

// addRecipients adds recipients to campaign campaignId: its add_recipients entries to the
// campaign's shard's bulk intake, PIPELINE_ENTRIES a pipeline, each pipeline followed by WAIT for
// replicas; it resolves to recipients.length. It rejects with an Error or a ShardCountError
// (nothing written), or an AddRecipientsError (.written, .replicated). It never writes a batch
// twice (see the top of this file): make redis with maxRetriesPerRequest 0, so that ioredis
// fails the commands of a connection that closed before answering them rather than write them
// again once it reconnects.
async function addRecipients(redis, campaignId, recipients, { prefix = 'wp', shards = 1, waitReplicas = 0, waitTimeoutMs = 1000 } = {}) {
  const batches = recipientBatches(campaignId, recipients);
  const key = intakeKey(prefix, shardOf(campaignId, shards), true);
  await checkShards(redis, prefix, shards).catch((e) => {
    throw e instanceof ShardCountError ? e : new AddRecipientsError(`redis: ${e.message}`, 0);
  });
  let written = 0;
  for (let start = 0; start < batches.length; start += PIPELINE_ENTRIES) {
    const part = batches.slice(start, start + PIPELINE_ENTRIES);
    // A pipeline of one ioredis client runs on its one connection, so the WAIT after the XADDs
    // counts exactly them.
    const pipe = redis.pipeline();
    for (const [entry] of part) pipe.xadd(key, '*', 'job', entry);
    if (waitReplicas > 0) pipe.call('WAIT', waitReplicas, waitTimeoutMs);
    let replies;
    try {
      replies = await pipe.exec();
    } catch (e) {
      throw new AddRecipientsError(`redis: ${e.message}`, written);
    }
    for (let i = 0; i < part.length; i++) {
      if (replies[i][0]) throw new AddRecipientsError(`redis: ${replies[i][0].message}`, written);
      written += part[i][1];
    }
    if (waitReplicas > 0) {
      const [err, acked] = replies[part.length];
      if (err || acked < waitReplicas) {
        throw new AddRecipientsError(`${err ? err.message : acked} of ${waitReplicas} replicas acknowledged within ${waitTimeoutMs} ms`, written, false);
      }
    }
  }
  return written;
}

function parseArgs(argv) {
  const o = { redis: 'redis://127.0.0.1:6379/0', prefix: 'wp', shards: 1, waitReplicas: 0, waitTimeoutMs: 1000, args: [] };
  const names = { '--redis': 'redis', '--prefix': 'prefix', '--shards': 'shards', '--wait-replicas': 'waitReplicas', '--wait-timeout-ms': 'waitTimeoutMs' };
  o.command = argv[0];
  if (o.command !== 'create' && o.command !== 'add') throw new Error('the first argument is create or add');
  for (let i = 1; i < argv.length; i++) {
    const name = names[argv[i]];
    if (name) {
      if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
      const v = argv[++i];
      o[name] = typeof o[name] === 'number' ? Number(v) : v;
      if (typeof o[name] === 'number' && !Number.isInteger(o[name])) throw new Error(`${argv[i - 1]}: not a whole number: ${v}`);
    } else if (argv[i].startsWith('--')) {
      throw new Error(`unknown flag ${argv[i]}`);
    } else {
      o.args.push(argv[i]);
    }
  }
  const want = o.command === 'create' ? [1, 1] : [1, 2];
  if (o.args.length < want[0] || o.args.length > want[1]) {
    throw new Error(o.command === 'create' ? 'create takes one CAMPAIGN_FILE' : 'add takes ID and one FILE (or -)');
  }
  return o;
}

async function create(redis, o, opts) {
  let cid;
  try {
    cid = await createCampaign(redis, JSON.parse(fs.readFileSync(o.args[0], 'utf8')), opts);
  } catch (e) {
    if (e instanceof EnqueueError) {
      console.error(`campaign: ${e.message}; writing it again is safe`);
      return 1;
    }
    console.error(`campaign: ${o.args[0]}: ${e.message}`);
    return 2;
  }
  console.error(`campaign: wrote the create entry of ${cid} to ${intakeKey(o.prefix, shardOf(cid, o.shards), true)}: a worker creates the campaign when it reads it`);
  return 0;
}

async function add(redis, o, opts) {
  const id = o.args[0];
  let text;
  try {
    text = fs.readFileSync(o.args.length > 1 && o.args[1] !== '-' ? o.args[1] : 0, 'utf8');
  } catch (e) {
    console.error(`campaign: ${e.message}`);
    return 2;
  }
  const lines = text.split('\n').map((l, i) => [i + 1, l.trim()]).filter(([, l]) => l !== '');
  const recipients = [];
  for (const [n, line] of lines) {
    try {
      recipients.push(JSON.parse(line));
    } catch (e) {
      console.error(`campaign: line ${n}: not JSON: ${e.message}; nothing written`);
      return 2;
    }
  }
  let entries;
  try {
    entries = recipientBatches(id, recipients).length;
  } catch (e) {
    console.error(`campaign: ${e.message}; nothing written`);
    return 2;
  }
  let done;
  try {
    done = await addRecipients(redis, id, recipients, opts);
  } catch (e) {
    if (e instanceof ShardCountError) {
      console.error(`campaign: ${e.message}`);
      return 2;
    }
    if (!(e instanceof AddRecipientsError)) throw e;
    done = e.written;
    if (!e.replicated) {
      const rest = done === lines.length ? '' : `; add again from line ${lines[done][0]}`;
      console.error(`campaign: ${e.message}: the ${done} recipients up to line ${lines[done - 1][0]} are written, the last entries on too few replicas: a failover could lose them, and adding them again sends twice those it keeps${rest}`);
    } else {
      console.error(`campaign: stopped after ${done} recipients: ${e.message}; add again from line ${lines[done][0]} (a batch whose answer was lost may be written: \`gateway-worker campaign status ${id}\` counts the recipients added)`);
    }
    return 1;
  }
  console.error(`campaign: added ${done} recipients to campaign ${id} in ${entries} entries`);
  return 0;
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`campaign: ${e.message}`);
    return 2;
  }
  const opts = { prefix: o.prefix, shards: o.shards, waitReplicas: o.waitReplicas, waitTimeoutMs: o.waitTimeoutMs };
  // An unanswered pipeline fails rather than being written again after a reconnect: see
  // addRecipients.
  const redis = new Redis(o.redis, { maxRetriesPerRequest: 0 });
  // The commands a failed connection fails say only that they failed: its first error says why.
  let told = false;
  redis.on('error', (e) => {
    if (!told) console.error(`campaign: redis: ${e.message}`);
    told = true;
  });
  try {
    return await (o.command === 'create' ? create : add)(redis, o, opts);
  } finally {
    redis.disconnect();
  }
}

module.exports = { createCampaign, addRecipients, recipientBatches, checkCampaignId, AddRecipientsError, MAX_RECIPIENTS, MAX_BATCH_BYTES, PIPELINE_ENTRIES };

if (require.main === module) {
  main().then((code) => { process.exitCode = code; }, (e) => { console.error(`campaign: ${e.stack || e}`); process.exitCode = 1; });
}
