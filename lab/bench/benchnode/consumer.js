// The benchmark's baseline: what a Node user writes without webpush-gateway. It reads jobs
// (docs/job-format.md) from a Redis stream with a consumer group and sends each one with the npm
// package web-push, at most `concurrency` at a time, acknowledging every entry after its send.
// No retries, no routing, no rate limits: one attempt per job, counted by outcome.
//
// Run it from a directory where `npm install` put the packages of package.json:
//
//   node consumer.js CONFIG.json
//
// CONFIG.json (the consumer group must already exist):
//   {"redis": "redis://127.0.0.1:6379", "stream": "benchwg1:{0}:in", "group": "bench",
//    "consumer": "node-1", "concurrency": 64, "batch": 64,
//    "connect": "127.0.0.1:44321", "ca_file": "/tmp/x/ca.pem",
//    "vapid": {"subject": "mailto:...", "public_key": "<b64url>", "private_key": "<b64url>"}}
//
// `connect` and `ca_file` point every push at the push service simulator (pushsim) whatever the
// endpoint's host, the way curl's --connect-to does; TLS still checks the endpoint's host name.
// Prints `ready` once Redis is connected; on SIGTERM or SIGINT it stops reading, waits for the
// sends in flight and prints {"sent":N,"failed":M,"errors":{"<status or error>":k,...}}.
'use strict';

const fs = require('node:fs');
const https = require('node:https');
const { createClient } = require('redis');
const webpush = require('web-push');

function loadConfig(path) {
  if (!path) throw new Error('usage: node consumer.js CONFIG.json');
  const cfg = JSON.parse(fs.readFileSync(path, 'utf8'));
  for (const k of ['redis', 'stream', 'group', 'consumer', 'connect', 'ca_file']) {
    if (typeof cfg[k] !== 'string' || cfg[k] === '') throw new Error(`config: "${k}" must be a non-empty string`);
  }
  for (const k of ['concurrency', 'batch']) {
    if (!Number.isInteger(cfg[k]) || cfg[k] < 1) throw new Error(`config: "${k}" must be a positive integer`);
  }
  const v = cfg.vapid || {};
  // Fails here, not on every send, when the subject or a key is malformed.
  webpush.getVapidHeaders('https://example.com', v.subject, v.public_key, v.private_key, 'aes128gcm');
  const m = /^(.+):(\d+)$/.exec(cfg.connect);
  if (!m) throw new Error('config: "connect" must be host:port');
  return {
    ...cfg,
    connectHost: m[1].replace(/^\[(.*)\]$/, '$1'),
    connectPort: Number(m[2]),
    ca: fs.readFileSync(cfg.ca_file),
    vapidDetails: { subject: v.subject, publicKey: v.public_key, privateKey: v.private_key },
  };
}

// An https.Agent that dials `connect` for every origin. Node keeps the endpoint's host as the
// TLS servername and Host header, so web-push's request code runs unchanged.
class ConnectToAgent extends https.Agent {
  constructor(cfg) {
    super({ keepAlive: true, maxSockets: cfg.concurrency, ca: cfg.ca });
    this.connectHost = cfg.connectHost;
    this.connectPort = cfg.connectPort;
  }

  createConnection(options, cb) {
    return super.createConnection(
      { ...options, servername: options.servername || options.host, host: this.connectHost, port: this.connectPort },
      cb,
    );
  }
}

async function main() {
  let stopping = false;
  const stop = () => { stopping = true; };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  const cfg = loadConfig(process.argv[2]);
  const agent = new ConnectToAgent(cfg);

  // A blocked XREADGROUP holds its connection, so acks go over a second one. No reconnects: a
  // run that lost Redis is not a measurement.
  const acker = createClient({ url: cfg.redis, socket: { reconnectStrategy: false } });
  const reader = acker.duplicate();
  for (const c of [acker, reader]) c.on('error', (err) => console.error('redis:', err.message));
  await acker.connect();
  await reader.connect();
  console.log('ready');

  let inFlight = 0;
  let wake = null; // resolves the reader's wait for a free slot, or for the last send at shutdown
  const stats = { sent: 0, failed: 0, errors: {} };

  const fail = (key, detail) => {
    stats.failed++;
    if (!stats.errors[key]) console.error(`first failure "${key}": ${detail}`); // never the endpoint
    stats.errors[key] = (stats.errors[key] || 0) + 1;
  };

  async function send(entry) {
    try {
      const job = JSON.parse(entry.message.job);
      const payload = job.payload_encoding === 'base64' ? Buffer.from(job.payload, 'base64') : job.payload;
      await webpush.sendNotification(job.subscription, payload, {
        TTL: job.ttl ?? undefined,
        urgency: job.urgency ?? undefined,
        topic: job.topic ?? undefined,
        vapidDetails: cfg.vapidDetails,
        agent,
        timeout: 10000,
      });
      stats.sent++;
    } catch (err) {
      if (err instanceof webpush.WebPushError) fail(String(err.statusCode), err.body);
      else if (err instanceof SyntaxError) fail('invalid_job', err.message);
      else if (err.message === 'Socket timeout') fail('timeout', err.message);
      else fail(err.code || 'error', err.message);
    }
    try {
      await acker.xAck(cfg.stream, cfg.group, entry.id);
    } catch (err) {
      console.error('XACK:', err.message);
    }
    inFlight--;
    if (wake) wake();
  }

  const waitForSlot = () => new Promise((resolve) => { wake = () => { wake = null; resolve(); }; });

  while (!stopping) {
    if (inFlight >= cfg.concurrency) {
      await waitForSlot();
      continue;
    }
    const reply = await reader.xReadGroup(cfg.group, cfg.consumer, { key: cfg.stream, id: '>' }, {
      COUNT: Math.min(cfg.batch, cfg.concurrency - inFlight),
      BLOCK: 100,
    });
    // Entries read here are in our pending list even if a signal came meanwhile: send them all.
    for (const { messages } of reply || []) {
      for (const entry of messages) {
        inFlight++;
        send(entry);
      }
    }
  }

  while (inFlight > 0) await waitForSlot();
  agent.destroy();
  await Promise.all([acker.close(), reader.close()]);
  process.stdout.write(JSON.stringify(stats) + '\n', () => process.exit(0));
}

main().catch((err) => {
  console.error('consumer:', err.message);
  process.exit(1);
});
