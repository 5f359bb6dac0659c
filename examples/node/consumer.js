#!/usr/bin/env node
// Read back what webpush-gateway did with your jobs, from Node.js, on ioredis.
//
// Copy consume() (and what it calls) into your application; the command line around it is for
// trying it out:
//
//   node consumer.js [--redis URL] [--prefix wp] [--shards N] [--group NAME] [--consumer NAME]
//                    [--store FILE] [--max N] [--idle-exit SECONDS]
//
// reads every shard's results ledger (<prefix>:{<shard>}:results: one record per job that was
// sent, with its outcome code) and gone stream (<prefix>:{<shard>}:gone: endpoints the push
// service says are dead) with a consumer group of its own, and for each record:
//
// * a ledger record marks the job's outcome in the store (delivered when its code is ACCEPTED);
// * a gone record deletes its subscription from the store: stop sending to it;
//
// then acknowledges the records (XACK) once the store is saved. A consumer that stops after
// reading and before acknowledging (a crash, a kill) reads the same records again when it
// restarts under the same --consumer name: it first reads its group's pending entries (ID 0),
// and only then new ones (ID >). Handling a record twice changes nothing (the store is keyed by
// job id and endpoint), so nothing is lost and nothing is counted twice. The gateway trims these
// streams only up to what every group has acknowledged: a group that stops reading for good
// keeps them growing, so delete it (XGROUP DESTROY) when its consumer is retired. The entries of
// a consumer name that never comes back can be taken over with XAUTOCLAIM.
//
// A campaign's recipient (campaign.js) is a job like any other, its id <campaign>/<n>; its
// records also carry "campaign", and the ledger's "recipient" (your key for it, when you gave
// one): each printed event shows them when present.
//
// The store here is a JSON file ({"subscriptions": {endpoint: ...}, "outcomes": {job id: code}})
// standing in for your database. Each record handled is also printed as one JSON line.
'use strict';

const fs = require('fs');
const os = require('os');
const Redis = require('ioredis');

// recordStreams is every stream the consumer reads: each shard's ledger and gone stream.
function recordStreams(prefix, shards) {
  const keys = [];
  for (let s = 0; s < shards; s++) keys.push(`${prefix}:{${s}}:results`, `${prefix}:{${s}}:gone`);
  return keys;
}

// createGroups creates the group on every stream, from the first entry (use "$" to skip
// history).
async function createGroups(redis, keys, group) {
  for (const key of keys) {
    try {
      await redis.xgroup('CREATE', key, group, '0', 'MKSTREAM');
    } catch (e) {
      if (!String(e.message).includes('BUSYGROUP')) throw e;
    }
  }
}

function loadStore(path) {
  let store = {};
  try {
    store = JSON.parse(fs.readFileSync(path, 'utf8'));
  } catch (e) {
    if (e.code !== 'ENOENT') throw e;
  }
  store.subscriptions = store.subscriptions || {};
  store.outcomes = store.outcomes || {};
  return store;
}

// saveStore writes a new file and renames it over the old one: a crash leaves one or the other.
function saveStore(path, store) {
  const tmp = `${path}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  fs.writeSync(fd, JSON.stringify(store, null, 1));
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  fs.renameSync(tmp, path);
}

// handle applies one record (its fields as a flat [name, value, ...] array) to the store and
// returns what was done.
function handle(store, key, entryId, flat) {
  const f = {};
  for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i]] = flat[i + 1];
  const event = { stream: key, entry: entryId, id: f.id || '', code: f.code || '', provider: f.provider || '' };
  // A campaign recipient's records name its campaign, and the ledger's your key for it.
  if (f.campaign) event.campaign = f.campaign;
  if (f.recipient) event.recipient = f.recipient;
  if (key.endsWith(':gone')) {
    event.kind = 'pruned';
    event.endpoint = f.endpoint || '';
    event.had = Object.prototype.hasOwnProperty.call(store.subscriptions, event.endpoint);
    delete store.subscriptions[event.endpoint];
  } else {
    event.kind = 'outcome';
    store.outcomes[event.id] = event.code;
  }
  return event;
}

// consume reads, handles and acknowledges records until stop(), maxRecords, or idleExit
// seconds without a record; it resolves to how many records were handled.
async function consume(redis, keys, group, consumer, store, storePath, emit,
  { maxRecords = 0, idleExit = 0, batch = 100, pollMs = 200, stop = () => false } = {}) {
  await createGroups(redis, keys, group);
  // "0" reads this consumer's pending entries (read before, never acknowledged); once a stream
  // has none left, ">" reads entries no consumer of the group has read yet.
  const cursor = Object.fromEntries(keys.map((k) => [k, '0']));
  let handled = 0;
  let last = Date.now();
  while (!stop()) {
    let got = 0;
    for (const key of keys) {
      const count = maxRecords ? Math.min(batch, maxRecords - handled) : batch;
      if (count <= 0) return handled;
      // One stream a call: on Redis Cluster each shard's keys are in a slot of their own.
      const reply = await redis.xreadgroup('GROUP', group, consumer, 'COUNT', count, 'STREAMS', key, cursor[key]);
      const entries = reply ? reply[0][1] : [];
      if (cursor[key] !== '>') {
        if (entries.length === 0) {
          cursor[key] = '>';
          continue;
        }
        cursor[key] = entries[entries.length - 1][0];
      }
      const ids = [];
      for (const [entryId, fields] of entries) {
        // A pending entry the gateway trimmed meanwhile comes back without fields.
        if (fields) emit(handle(store, key, entryId, fields));
        ids.push(entryId);
      }
      if (ids.length > 0) {
        saveStore(storePath, store); // before the XACK: a crash between them re-reads
        await redis.xack(key, group, ...ids);
        handled += ids.length;
        got += ids.length;
      }
    }
    if (got > 0) {
      last = Date.now();
    } else if (idleExit && Date.now() - last >= idleExit * 1000) {
      return handled;
    } else {
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }
  return handled;
}

function parseArgs(argv) {
  const o = { redis: 'redis://127.0.0.1:6379/0', prefix: 'wp', shards: 1, group: 'upstream', consumer: os.hostname(), store: 'store.json', max: 0, idleExit: 0 };
  const names = { '--redis': 'redis', '--prefix': 'prefix', '--shards': 'shards', '--group': 'group', '--consumer': 'consumer', '--store': 'store', '--max': 'max', '--idle-exit': 'idleExit' };
  for (let i = 0; i < argv.length; i++) {
    const name = names[argv[i]];
    if (!name) throw new Error(`unknown argument ${argv[i]}`);
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    const v = argv[++i];
    o[name] = typeof o[name] === 'number' ? Number(v) : v;
    if (Number.isNaN(o[name])) throw new Error(`${argv[i - 1]}: not a number: ${v}`);
  }
  return o;
}

async function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`consumer: ${e.message}`);
    return 2;
  }
  let stopping = false;
  process.on('SIGTERM', () => { stopping = true; });
  process.on('SIGINT', () => { stopping = true; });
  const redis = new Redis(o.redis);
  try {
    const store = loadStore(o.store);
    const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
    const n = await consume(redis, recordStreams(o.prefix, o.shards), o.group, o.consumer, store, o.store, emit,
      { maxRecords: o.max, idleExit: o.idleExit, stop: () => stopping });
    console.error(`consumer: handled ${n} records`);
    return 0;
  } finally {
    redis.disconnect();
  }
}

module.exports = { recordStreams, createGroups, handle, consume, loadStore, saveStore };

if (require.main === module) {
  main().then((code) => { process.exitCode = code; }, (e) => { console.error(`consumer: ${e.stack || e}`); process.exitCode = 1; });
}
