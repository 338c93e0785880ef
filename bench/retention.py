"""Retention's cost: ``prune`` (dry run and real) and ``gc`` over a seeded store.

Seeds AGENTS agents (each with RUNS runs of EVENTS events and two 16 KiB checkpoint
blobs), half of them a year old, plus ORPHANS event logs whose run never was, then
times a dry-run prune (which reads every event and blob it would delete to count
them), the prune, and a gc that finds and deletes the orphans. Figures are per
pruned agent and per item deleted (runs, events and blobs)::

    python -m bench retention                       # SQLite, Postgres and Redis
    python -m bench retention --store memory:// --agents 50

Postgres runs in a fresh database and Redis under a fresh prefix (testkit.services),
both dropped afterwards; SQLite in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.lifecycle.gc import collect_garbage
from bridge_store.lifecycle.prune import PruneCriteria, prune
from bridge_store.stack.stores import Routes, Stores, open_stores
from testkit.services import postgres_database, redis_prefix

DAY_MS = 86_400_000
BLOB = os.urandom(16 * 1024)


async def seed(stores: Stores, agents: int, runs: int, events: int, orphans: int) -> None:
    now = int(time.time() * 1000)
    for number in range(agents):
        agent_id = f"agent-{number:05d}"
        at = now - (365 * DAY_MS if number % 2 == 0 else 0)
        agent = {
            "agentId": agent_id,
            "cwd": "/work/app",
            "status": "archived" if number % 2 == 0 else "idle",
            "activeRunId": None,
            "name": None,
            "createdAt": at,
            "updatedAt": at,
            "latestCheckpoint": None,
            "sdkMetadata": {"blobEncryptionKey": "00" * 32},
        }
        await stores.agents.create("default", agent)
        for turn in range(1, runs + 1):
            run_id = f"{agent_id}-run-{turn}"
            run = {"runId": run_id, "agentId": agent_id, "turnNumber": turn, "status": "finished"}
            await stores.runs.create("default", {**run, "createdAt": at, "updatedAt": at})
            for _ in range(events):
                event = {"runId": run_id, "eventType": "run_stream_event", "payload": {"n": 1}}
                await stores.run_events.append("default", {**event, "idempotencyKey": None})
        for blob in ("blob-a", "blob-b"):
            await stores.checkpoints.create("default", agent_id, blob, BLOB)
    for number in range(orphans):
        orphan: dict[str, object] = {"runId": f"orphan-{number}", "eventType": "x"}
        await stores.run_events.append("default", {**orphan, "idempotencyKey": None})


async def bench(url: str, agents: int, runs: int, events: int, orphans: int) -> None:
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    stores = opened.stores
    try:
        started = time.perf_counter()
        await seed(stores, agents, runs, events, orphans)
        seeded = time.perf_counter() - started
        criteria = PruneCriteria(cutoff_ms=int(time.time() * 1000) - 90 * DAY_MS)
        started = time.perf_counter()
        dry = await prune(stores, criteria, principal_name="bench", dry_run=True)
        dry_s = time.perf_counter() - started
        started = time.perf_counter()
        report = await prune(stores, criteria, principal_name="bench")
        prune_s = time.perf_counter() - started
        started = time.perf_counter()
        garbage = await collect_garbage(stores)
        gc_s = time.perf_counter() - started
    finally:
        await opened.close()
    pruned = len(report.agents)
    items = report.runs + dry.events + report.blobs + pruned
    scheme = url.split(":", 1)[0]
    print(
        f"{scheme:10} seed {seeded:6.1f} s | dry run {dry_s:6.2f} s "
        f"({pruned / dry_s:7.1f} agents/s) | prune {prune_s:6.2f} s "
        f"({pruned / prune_s:7.1f} agents/s, {items / prune_s:8.0f} items/s: {pruned} agents, "
        f"{report.runs} runs, {dry.events} events, {report.blobs} blobs) | gc {gc_s:6.2f} s "
        f"({garbage.event_logs} orphaned logs of {agents * runs // 2 + orphans} runs)"
    )


@contextlib.contextmanager
def default_stores() -> Iterator[list[str]]:
    with (
        tempfile.TemporaryDirectory() as directory,
        postgres_database() as postgres,
        redis_prefix() as redis,
    ):
        yield [f"sqlite:///{directory}/bench.db", postgres, redis]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench retention", description=__doc__)
    parser.add_argument("--store", action="append", help="store URL (repeatable)")
    parser.add_argument("--agents", type=int, default=400)
    parser.add_argument("--runs", type=int, default=4, help="runs per agent")
    parser.add_argument("--events", type=int, default=25, help="events per run")
    parser.add_argument("--orphans", type=int, default=200, help="orphaned event logs")
    args = parser.parse_args(argv)
    counts = (args.agents, args.runs, args.events, args.orphans)
    if args.store:
        for url in args.store:
            asyncio.run(bench(url, *counts))
        return 0
    with default_stores() as urls:
        for url in urls:
            asyncio.run(bench(url, *counts))
    return 0
