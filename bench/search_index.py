"""The viewer's search on SQL stores: what the full-text index (revision 0003) costs
appends, and what it saves searches.

For SQLite (a temporary file) and Postgres (a fresh database):

1. **Appends.** ``--appends`` assistant text deltas (the commonest event a bridge
   writes) appended one after another to one run, first with the schema at revision
   0002 (no index), then at head (the index kept by triggers or GIN indexes), each on
   a store of its own: median and p99 latency per append.
2. **Searches.** A history of ``--agents`` agents with ``--runs`` runs of
   ``--events`` events each, in words drawn from a fixed vocabulary, where one rare
   word is in three runs and a common word is in every run. Each query is searched
   to its end (every page) by the index and by the scan, ``--repeat`` times: the
   median time and the pages taken. Both must find the same hits.

    python -m bench search-index [--agents 200 --runs 3 --events 40]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.rpc.contract import new_event
from bridge_store.rpc.dispatch import call_store
from bridge_store.security.auth import local_principal
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store.viewer.reader import HistoryReader, in_process
from bridge_store.viewer.search import IndexedSearch, ScanSearch, search, search_index
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.migrate import upgrade
from testkit.services import postgres_database

RARE, COMMON = "zanzibar", "router"
_WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "po", "ru", "si", "te") for b in "aeiou"]


def delta(run_id: str, words: list[str]) -> dict[str, Any]:
    content = [{"type": "text", "text": " ".join(words) + " "}]
    message = {"type": "assistant", "message": {"role": "assistant", "content": content}}
    payload = {"schemaVersion": 1, "type": "sdk_message", "runId": run_id, "message": message}
    return {"runId": run_id, "eventType": "run_stream_event", "payload": payload}


async def opened_at(url: str, revision: str) -> OpenStores:
    if url.startswith("sqlite:///"):
        # A start without migration opens only a store that exists: an empty file is one.
        await asyncio.to_thread(Path(url.removeprefix("sqlite:///")).touch, mode=0o600)
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=False)
    backend = opened.backends[0]
    assert isinstance(backend, SqlBackend)
    await backend.db.migrate(lambda conn: upgrade(conn, revision), what="bench")
    return opened


async def appends(make_url: Callable[[str], str], count: int) -> None:
    words = random.Random(1)
    for revision in ("0002", "head"):
        opened = await opened_at(make_url(f"appends-{revision}"), revision)
        try:
            events = opened.stores.run_events
            latencies = []
            for index in range(count + 50):
                data = delta("run-1", words.choices(_WORDS, k=6))
                started = time.perf_counter()
                await events.append("default", new_event(data, "input"))
                if index >= 50:  # the first ones warm the connection and statements
                    latencies.append(time.perf_counter() - started)
            latencies.sort()
            print(
                f"  appends at {revision:>4}: p50 {statistics.median(latencies) * 1e3:6.3f} ms"
                f"   p99 {latencies[int(len(latencies) * 0.99)] * 1e3:6.3f} ms"
            )
        finally:
            await opened.close()


async def fill(opened: OpenStores, args: argparse.Namespace) -> None:
    words = random.Random(2)
    stores, principal = opened.stores, local_principal()

    async def call(substore: str, method: str, data: Any) -> None:
        await call_store(stores, substore, method, data, principal=principal)

    rare_runs = {(args.agents // 4, 0), (args.agents // 2, 1), (args.agents - 1, 0)}
    for a in range(args.agents):
        agent_id = f"agent-{a:05}"
        agent = {"agentId": agent_id, "cwd": "/w", "name": f"task {a}", "status": "idle"}
        await call("agents", "create", {"agent": {**agent, "createdAt": a, "updatedAt": a}})
        for r in range(args.runs):
            run_id = f"{agent_id}-run-{r}"
            run = {"runId": run_id, "agentId": agent_id, "turnNumber": r + 1, "status": "finished"}
            await call("runs", "create", {"run": {**run, "createdAt": a, "updatedAt": a}})
            for e in range(args.events):
                chosen = words.choices(_WORDS, k=6)
                if e == 0:
                    chosen.append(COMMON)
                if e == args.events // 2 and (a, r) in rare_runs:
                    chosen.append(RARE)
                await call("runEvents", "append", delta(run_id, chosen))


async def searches(url: str, args: argparse.Namespace) -> None:
    opened = await opened_at(url, "head")
    try:
        started = time.perf_counter()
        await fill(opened, args)
        total, took = args.agents * args.runs * args.events, time.perf_counter() - started
        print(f"  filled {args.agents} agents, {total} events in {took:.1f} s")
        backend = opened.backends[0]
        assert isinstance(backend, SqlBackend)
        if backend.db.dialect == "postgresql":
            # What autovacuum does on a live database: the planner's statistics.
            await backend.db.write(
                lambda session: session.execute(sa.text("ANALYZE")),
                what="bench",
                atomic=False,
                retry=False,
            )
        reader = HistoryReader(in_process(lambda: opened.stores, local_principal()))
        index = search_index(opened.stores)
        assert index is not None
        for query in (RARE, COMMON):
            found: dict[str, list[Any]] = {}
            for name, searcher in (
                ("index", IndexedSearch(index, "default", reader)),
                ("scan", ScanSearch(reader)),
            ):
                times, pages = [], 0
                for _ in range(args.repeat):
                    hits: list[Any] = []
                    cursor, pages, started = None, 0, time.perf_counter()
                    while True:
                        page = await search(searcher, query, cursor=cursor)
                        hits.extend(page.hits)
                        pages += 1
                        cursor = page.next
                        if cursor is None:
                            break
                    times.append(time.perf_counter() - started)
                found[name] = hits
                print(
                    f"  {query!r:>10} by {name:<5}: {statistics.median(times) * 1e3:8.1f} ms"
                    f" for all {pages} pages, {len(hits)} hits"
                )
            assert found["index"] == found["scan"], f"the index and the scan differ on {query!r}"
    finally:
        await opened.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench search-index", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        print("sqlite:")
        asyncio.run(appends(lambda name: f"sqlite:///{directory}/{name}.db", args.appends))
        asyncio.run(searches(f"sqlite:///{directory}/search.db", args))
    print("postgresql:")
    with postgres_database() as a, postgres_database() as b, postgres_database() as c:
        urls = iter((a, b))
        asyncio.run(appends(lambda name: next(urls), args.appends))
        asyncio.run(searches(c, args))
    return 0
