"""The team lead's pages on a big store: the overview and the run list across agents.

Seeds RUNS runs (of AGENTS agents, over the last 30 days, three models, a tenth of
them failed, with token usage and tool calls) into SQLite and Postgres, as the SQL
backend stores them (each run's summary columns, each run's tool counts), and times
the pages' own functions, server side: the overview (its 30 days of counts and both
windows), the run list's first page newest first, by tokens, and filtered by status.
``--scan-runs`` also seeds that many runs, with their tool-call events, into a memory
store and times the same pages answered by the scan every non-SQL backend uses.

    python -m bench overview                      # 100,000 runs on SQLite and Postgres
    python -m bench overview --runs 2000 --scan-runs 500 --repeat 1   # a smoke run

Figures are medians (and the slowest) of ``--repeat`` calls after one warm-up; the
target is under a second for the overview over 100,000 runs on SQLite and Postgres.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import QueryParams

from bridge_store.dispatch import call_store
from bridge_store.history import run_history
from bridge_store.plugins import get_plugin_manager
from bridge_store.security.auth import local_principal
from bridge_store.statistics import DAY_MS, run_statistics
from bridge_store.stores import OpenStores, Routes, open_stores
from bridge_store.viewer import pages
from bridge_store.viewer.activity import Activity
from bridge_store.viewer.reader import HistoryReader, in_process
from bridge_store.viewer.search import ScanSearch
from bridge_store.wire import jsontext
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.statements import Session
from bridge_store_sql.summary import summary_columns
from bridge_store_sql.tables import agents, run_tool_calls, runs
from testkit.services import postgres_database

TENANT = "default"
MODELS = ("composer-2", "gpt-5", "claude-4")
TOOLS = ("read_file", "edit_file", "grep", "run_terminal_cmd", "list_dir", "web_search")
#: Rows per insert statement while seeding.
SEED_BATCH = 2000


def synthetic_run(rng: random.Random, n: int, agents_count: int, now: int) -> dict[str, Any]:
    started = now - rng.randrange(30 * DAY_MS)
    status = rng.choices(["finished", "error", "cancelled"], weights=(85, 10, 5))[0]
    return {
        "runId": f"run-{n:07}",
        "agentId": f"agent-{n % agents_count:05}",
        "turnNumber": n // agents_count + 1,
        "status": status,
        "model": {"id": rng.choice(MODELS)},
        "createdAt": started - 50,
        "updatedAt": started,
        "startedAt": started,
        "endedAt": started + rng.randrange(1_000, 1_200_000),
        "usage": {
            "inputTokens": rng.randrange(200_000),
            "outputTokens": rng.randrange(20_000),
            "cacheReadTokens": rng.randrange(500_000),
            "cacheWriteTokens": rng.randrange(10_000),
        },
    }


def tool_calls(rng: random.Random) -> list[tuple[str, int, int]]:
    picked = rng.sample(TOOLS, rng.randrange(1, 4))
    counts = [(tool, rng.randrange(1, 15)) for tool in picked]
    return [(tool, calls, sum(rng.random() < 0.08 for _ in range(calls))) for tool, calls in counts]


async def seed_sql(backend: SqlBackend, count: int, agents_count: int, now: int) -> None:
    rng = random.Random(25)
    agent_rows = [
        {
            "tenant": TENANT,
            "agent_id": f"agent-{a:05}",
            "cwd": f"/work/{a % 20}",
            "updated_at": now,
            "doc": jsontext.dumps_text(
                {"agentId": f"agent-{a:05}", "cwd": f"/work/{a % 20}", "name": f"task {a}"}
            ),
            "created_by": "ci",
        }
        for a in range(agents_count)
    ]

    def insert(rows: list[dict[str, Any]], table: Any) -> Callable[[Session], None]:
        def work(session: Session) -> None:
            session.execute(table.insert(), rows)

        return work

    await backend.db.write(insert(agent_rows, agents), what="seed", atomic=True, retry=False)
    for start in range(0, count, SEED_BATCH):
        run_rows, tool_rows = [], []
        for n in range(start, min(count, start + SEED_BATCH)):
            run = synthetic_run(rng, n, agents_count, now)
            run_rows.append(
                {
                    "tenant": TENANT,
                    "agent_id": run["agentId"],
                    "run_id": run["runId"],
                    "turn_number": run["turnNumber"],
                    "doc": jsontext.dumps_text(run),
                    "created_by": rng.choice(("alice", "bob", "ci")),
                    **summary_columns(run),
                }
            )
            tool_rows += [
                {"tenant": TENANT, "run_id": run["runId"], "tool": t, "calls": c, "failures": f}
                for t, c, f in tool_calls(rng)
            ]
        await backend.db.write(insert(run_rows, runs), what="seed", atomic=True, retry=False)
        await backend.db.write(
            insert(tool_rows, run_tool_calls), what="seed", atomic=True, retry=False
        )


async def seed_memory(opened: OpenStores, count: int, agents_count: int, now: int) -> None:
    rng, principal = random.Random(25), local_principal()
    for n in range(count):
        run = synthetic_run(rng, n, agents_count, now)
        await call_store(opened.stores, "runs", "create", {"run": run}, principal=principal)
        for tool, calls, failures in tool_calls(rng):
            for call in range(calls):
                status = "error" if call < failures else "completed"
                message = {"type": "tool_call", "call_id": f"c{call}", "name": tool}
                payload = {"type": "sdk_message", "message": {**message, "status": status}}
                data = {"runId": run["runId"], "eventType": "run_stream_event", "payload": payload}
                await call_store(opened.stores, "runEvents", "append", data, principal=principal)


async def timed(what: str, repeat: int, page: Callable[[], Awaitable[Any]]) -> None:
    await page()  # warm: statements compiled, caches filled
    took = []
    for _ in range(repeat):
        started = time.perf_counter()
        await page()
        took.append(time.perf_counter() - started)
    median, slowest = statistics.median(took) * 1e3, max(took) * 1e3
    print(f"  {what:<34} median {median:8.1f} ms   max {slowest:8.1f} ms")


async def time_pages(opened: OpenStores, repeat: int, label: str) -> None:
    stores, principal = opened.stores, local_principal()
    reader = HistoryReader(in_process(lambda: stores, principal))
    activity = Activity(
        lambda: stores,
        TENANT,
        history=lambda: run_history(stores.agents, stores.runs),
        statistics=lambda: run_statistics(stores.agents, stores.runs),
    )
    context = pages.Context(reader, ScanSearch(reader), activity, principal)
    view = await pages.overview(context, QueryParams({}))
    total = view.data["windows"]["30"]["total"]
    method = view.data["method"]
    print(f"{label} ({method}): {total['runs']:,} runs in 30 days, {total['failed']:,} failed")
    await timed(
        "overview (7 and 30 days)", repeat, lambda: pages.overview(context, QueryParams({}))
    )
    for what, params in (
        ("runs, newest first", {}),
        ("runs, most tokens first", {"sort": "tokens"}),
        ("runs, longest first, failed only", {"sort": "duration", "status": "error"}),
    ):
        query = QueryParams(params)
        await timed(what, repeat, lambda query=query: pages.runs(context, query))  # type: ignore[misc]


async def sql(url: str, args: argparse.Namespace, now: int) -> None:
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        backend = opened.backends[0]
        assert isinstance(backend, SqlBackend)
        started = time.perf_counter()
        await seed_sql(backend, args.runs, args.agents, now)
        print(f"  seeded {args.runs:,} runs in {time.perf_counter() - started:.1f} s")
        if backend.db.dialect == "postgresql":
            # What autovacuum does on a live database: the planner's statistics.
            await backend.db.migrate(lambda conn: conn.exec_driver_sql("ANALYZE"), what="bench")
        await time_pages(opened, args.repeat, backend.db.dialect)
    finally:
        await opened.close()


async def scan(args: argparse.Namespace, now: int) -> None:
    opened = await open_stores(get_plugin_manager(), Routes.single("memory://"), migrate=True)
    try:
        started = time.perf_counter()
        await seed_memory(opened, args.scan_runs, args.agents, now)
        print(f"  seeded {args.scan_runs:,} runs in {time.perf_counter() - started:.1f} s")
        await time_pages(opened, args.repeat, "memory")
    finally:
        await opened.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench overview", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--scan-runs", type=int, default=10_000, help="0: no scan")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-postgres", dest="postgres", action="store_false")
    args = parser.parse_args(argv)
    now = int(time.time() * 1000)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as directory:
        print("sqlite:")
        asyncio.run(sql(f"sqlite:///{directory}/overview.db", args, now))
    if args.postgres:
        print("postgresql:")
        with postgres_database() as url:
            asyncio.run(sql(url, args, now))
    if args.scan_runs:
        print("memory (the scan):")
        asyncio.run(scan(args, now))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0
