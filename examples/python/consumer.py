#!/usr/bin/env python3
"""Read back what webpush-gateway did with your jobs, from Python, on redis-py.

Copy consume() (and what it calls) into your application; the command line around it is for
trying it out:

    consumer.py [--redis URL] [--prefix wp] [--shards N] [--group NAME] [--consumer NAME]
                [--store FILE] [--max N] [--idle-exit SECONDS]

reads every shard's results ledger (<prefix>:{<shard>}:results: one record per job that was
sent, with its outcome code) and gone stream (<prefix>:{<shard>}:gone: endpoints the push service
says are dead) with a consumer group of its own, and for each record:

* a ledger record marks the job's outcome in the store (delivered when its code is ACCEPTED);
* a gone record deletes its subscription from the store: stop sending to it;

then acknowledges the records (XACK) once the store is saved. A consumer that stops after
reading and before acknowledging (a crash, a kill) reads the same records again when it
restarts under the same --consumer name: it first reads its group's pending entries (ID 0),
and only then new ones (ID >). Handling a record twice changes nothing (the store is keyed by
job id and endpoint), so nothing is lost and nothing is counted twice. The gateway trims these
streams only up to what every group has acknowledged: a group that stops reading for good keeps
them growing, so delete it (XGROUP DESTROY) when its consumer is retired. The entries of a
consumer name that never comes back can be taken over with XAUTOCLAIM.

A campaign's recipient (campaign.py) is a job like any other, its id <campaign>/<n>; its records
also carry "campaign", and the ledger's "recipient" (your key for it, when you gave one): each
printed event shows them when present.

The store here is a JSON file ({"subscriptions": {endpoint: ...}, "outcomes": {job id: code}})
standing in for your database. Each record handled is also printed as one JSON line.
"""

import argparse
import json
import os
import signal
import socket
import sys
import time

import redis

GONE_CODES = ("GONE", "KEY_MISMATCH")


def record_streams(prefix, shards):
    """Every stream the consumer reads: each shard's ledger and gone stream."""
    keys = []
    for s in range(shards):
        keys += ["%s:{%d}:results" % (prefix, s), "%s:{%d}:gone" % (prefix, s)]
    return keys


def create_groups(r, keys, group):
    """Creates the group on every stream, from the first entry (use "$" to skip history)."""
    for key in keys:
        try:
            r.xgroup_create(key, group, id="0", mkstream=True)
        except redis.ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise


def load_store(path):
    try:
        with open(path, encoding="utf-8") as f:
            store = json.load(f)
    except FileNotFoundError:
        store = {}
    store.setdefault("subscriptions", {})
    store.setdefault("outcomes", {})
    return store


def save_store(path, store):
    # Written to a new file and renamed over the old one: a crash leaves one or the other.
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(store, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def handle(store, key, entry_id, fields):
    """Applies one record to the store and returns what was done, as a dict."""
    event = {"stream": key, "entry": entry_id, "id": fields.get("id", ""),
             "code": fields.get("code", ""), "provider": fields.get("provider", "")}
    # A campaign recipient's records name its campaign, and the ledger's your key for it.
    for name in ("campaign", "recipient"):
        if fields.get(name):
            event[name] = fields[name]
    if key.endswith(":gone"):
        endpoint = fields.get("endpoint", "")
        event["kind"] = "pruned"
        event["endpoint"] = endpoint
        event["had"] = store["subscriptions"].pop(endpoint, None) is not None
    else:
        event["kind"] = "outcome"
        store["outcomes"][event["id"]] = event["code"]
    return event


def consume(r, keys, group, consumer, store, store_path, emit, max_records=0, idle_exit=0,
            batch=100, poll=0.2, stop=lambda: False):
    """Reads, handles and acknowledges records until stop(), max_records, or idle_exit seconds
    without a record. Returns how many records were handled."""
    create_groups(r, keys, group)
    # "0" reads this consumer's pending entries (read before, never acknowledged); once a
    # stream has none left, ">" reads entries no consumer of the group has read yet.
    cursor = {key: "0" for key in keys}
    handled = 0
    last = time.monotonic()
    while not stop():
        got = 0
        for key in keys:
            count = batch if not max_records else min(batch, max_records - handled)
            if count <= 0:
                return handled
            # One stream a call: on Redis Cluster each shard's keys are in a slot of their own.
            reply = r.xreadgroup(group, consumer, {key: cursor[key]}, count=count)
            entries = reply[0][1] if reply else []
            if cursor[key] != ">":
                if not entries:
                    cursor[key] = ">"
                    continue
                cursor[key] = entries[-1][0]
            ids = []
            for entry_id, fields in entries:
                # A pending entry the gateway trimmed meanwhile comes back without fields.
                if fields:
                    emit(handle(store, key, entry_id, fields))
                ids.append(entry_id)
            if ids:
                save_store(store_path, store)  # before the XACK: a crash between them re-reads
                r.xack(key, group, *ids)
                handled += len(ids)
                got += len(ids)
        if got:
            last = time.monotonic()
        elif idle_exit and time.monotonic() - last >= idle_exit:
            return handled
        else:
            time.sleep(poll)
    return handled


def main():
    ap = argparse.ArgumentParser(description="Consume webpush-gateway's ledger and gone streams.")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--prefix", default="wp")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--group", default="upstream")
    ap.add_argument("--consumer", default=socket.gethostname(),
                    help="keep it the same across restarts: pending entries are per consumer")
    ap.add_argument("--store", default="store.json")
    ap.add_argument("--max", type=int, default=0, help="stop after N records (0: no limit)")
    ap.add_argument("--idle-exit", type=float, default=0,
                    help="stop after SECONDS without a record (0: run until SIGTERM)")
    args = ap.parse_args()

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))

    r = redis.Redis.from_url(args.redis, decode_responses=True)
    store = load_store(args.store)

    def emit(event):
        print(json.dumps(event, sort_keys=True), flush=True)

    n = consume(r, record_streams(args.prefix, args.shards), args.group, args.consumer, store,
                args.store, emit, max_records=args.max, idle_exit=args.idle_exit,
                stop=lambda: bool(stopping))
    print("consumer: handled %d records" % n, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
