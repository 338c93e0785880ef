"""The team lead's pages on a big store: the overview, costs and the run list.

Seeds RUNS runs over the last DAYS days into SQLite and Postgres, as the SQL backend
stores them (each run's summary columns, its tool counts, and revision 0013's per-day
sums, which the database's triggers keep as the runs are inserted): conversations of
``--turns`` runs each (an agent's runs minutes apart, by one creator of three), three
models, a tenth of them failed, with token usage and tool calls. Then it times the
pages' own functions, server side, priced with a table whose prices change once in
the range: the overview (7 and 30 days, with who spent what, the budget and the
charts), the run list newest first, by tokens, costliest first (all of it, and the
last 30 days), filtered by status, and the agents list. ``--scan-runs`` also seeds
that many runs, with their tool-call events, into a memory store and times the same
pages answered by the scan every non-SQL backend uses (the overview's scan stops at
its bound and says so).

    python -m bench overview                                  # 100,000 runs, 30 days
    python -m bench overview --runs 1000000 --days 365 --scan-runs 0   # a year
    python -m bench overview --runs 2000 --scan-runs 500 --repeat 1    # a smoke run

Figures are medians (and the slowest) of ``--repeat`` calls after one warm-up; the
target is under 300 ms for each page over 1,000,000 runs of a year on SQLite and
Postgres.
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

import asyncpg  # type: ignore[import-untyped]
from starlette.datastructures import QueryParams

from bridge_store.backend.history import run_history
from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.shares import run_shares
from bridge_store.backend.statistics import DAY_MS, run_statistics
from bridge_store.pricing.book import PriceBook
from bridge_store.rpc.dispatch import call_store
from bridge_store.security.auth import local_principal
from bridge_store.stack.stores import OpenStores, Routes, open_stores
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


def synthetic_run(rng: random.Random, n: int, turns: int, now: int, days: int) -> dict[str, Any]:
    """Run ``n``: turn ``n % turns`` of agent ``n // turns``, whose first turn started at
    a time of the range its number decides, each turn minutes after the one before."""
    agent = n // turns
    first = now - days * DAY_MS + (agent * 7_919_993_011) % (days * DAY_MS - 3_600_000)
    started = first + (n % turns) * 300_000 + rng.randrange(60_000)
    status = rng.choices(["finished", "error", "cancelled"], weights=(85, 10, 5))[0]
    return {
        "runId": f"run-{n:07}",
        "agentId": f"agent-{agent:06}",
        "turnNumber": n % turns + 1,
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


CREATORS = ("alice", "bob", "ci")
#: The bench's prices, per million tokens; composer-2's change in the middle of the range.
PRICES = """
currency = "USD"
[[models."composer-2"]]
until = {middle}
input = 1.25
output = 10
cache_read = 0.125
cache_write = 1.25
[[models."composer-2"]]
from = {middle}
input = 1
output = 8
cache_read = 0.1
cache_write = 1
[models.gpt-5]
input = 1.25
output = 10
[budgets]
default = 50000
"""


def agent_doc(a: int, now: int) -> dict[str, Any]:
    return {
        "agentId": f"agent-{a:06}",
        "cwd": f"/work/{a % 20}",
        "name": f"task {a}",
        "status": "idle",
        "createdAt": now,
        "updatedAt": now,
    }


def agent_count(args: argparse.Namespace) -> int:
    return int(-(-args.runs // args.turns))


async def seed_sql(backend: SqlBackend, args: argparse.Namespace, now: int) -> None:
    rng = random.Random(25)
    agent_rows = [
        {
            "tenant": TENANT,
            "agent_id": f"agent-{a:06}",
            "cwd": f"/work/{a % 20}",
            "updated_at": now,
            "doc": jsontext.dumps_text(agent_doc(a, now)),
            "created_by": CREATORS[a % 3],
        }
        for a in range(agent_count(args))
    ]

    def insert(rows: list[dict[str, Any]], table: Any) -> Callable[[Session], None]:
        def work(session: Session) -> None:
            session.execute(table.insert(), rows)

        return work

    for start in range(0, len(agent_rows), SEED_BATCH):
        batch = agent_rows[start : start + SEED_BATCH]
        await backend.db.write(insert(batch, agents), what="seed", atomic=True, retry=False)
    for start in range(0, args.runs, SEED_BATCH):
        run_rows, tool_rows = [], []
        for n in range(start, min(args.runs, start + SEED_BATCH)):
            run = synthetic_run(rng, n, args.turns, now, args.days)
            run_rows.append(
                {
                    "tenant": TENANT,
                    "agent_id": run["agentId"],
                    "run_id": run["runId"],
                    "turn_number": run["turnNumber"],
                    "doc": jsontext.dumps_text(run),
                    "created_by": CREATORS[(n // args.turns) % 3],
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


async def seed_memory(opened: OpenStores, args: argparse.Namespace, now: int) -> None:
    rng, principal = random.Random(25), local_principal()
    for n in range(args.scan_runs):
        if n % args.turns == 0:
            agent = {"agent": agent_doc(n // args.turns, now)}
            await call_store(opened.stores, "agents", "create", agent, principal=principal)
        run = synthetic_run(rng, n, args.turns, now, args.days)
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
    print(f"  {what:<40} median {median:8.1f} ms   max {slowest:8.1f} ms")


def price_book(directory: str, now: int, days: int) -> PriceBook:
    middle = time.strftime("%Y-%m-%d", time.gmtime((now - days * DAY_MS // 2) / 1000))
    path = os.path.join(directory, "prices.toml")
    with open(path, "w") as handle:
        handle.write(PRICES.format(middle=middle))
    return PriceBook.read(path)


async def time_pages(
    opened: OpenStores, args: argparse.Namespace, label: str, book: PriceBook
) -> None:
    stores, principal = opened.stores, local_principal()
    reader = HistoryReader(in_process(lambda: stores, principal))
    activity = Activity(
        lambda: stores,
        TENANT,
        history=lambda: run_history(stores.agents, stores.runs),
        statistics=lambda: run_statistics(stores.agents, stores.runs),
        shares=lambda: run_shares(stores.agents, stores.runs),
    )
    context = pages.Context(reader, ScanSearch(reader), activity, principal, book)
    view = await pages.overview(context, QueryParams({"days": "30"}))
    data, method = view.data, view.data["method"]
    if "tooLarge" in data:
        print(f"{label} ({method}): more than {data['tooLarge']['runs']:,} runs: not counted")
    else:
        total = data["windows"]["30"]["total"]
        print(
            f"{label} ({method}): {total['runs']:,} runs in 30 days, {total['failed']:,} "
            f"failed, {total['cost']} USD; {data['byAgent']['agents']:,} agents"
        )
    since = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 29 * 86400))
    for what, params in (
        ("overview, last 7 days", {"days": "7"}),
        ("overview, last 30 days", {"days": "30"}),
    ):
        query = QueryParams(params)
        await timed(what, args.repeat, lambda query=query: pages.overview(context, query))  # type: ignore[misc]
    for what, params in (
        ("runs, newest first", {}),
        ("runs, most tokens first", {"sort": "tokens"}),
        ("runs, costliest first", {"sort": "cost"}),
        ("runs, costliest first, last 30 days", {"sort": "cost", "since": since}),
        ("runs, longest first, failed only", {"sort": "duration", "status": "error"}),
    ):
        query = QueryParams(params)
        await timed(what, args.repeat, lambda query=query: pages.runs(context, query))  # type: ignore[misc]
    await timed("agents list", args.repeat, lambda: pages.agents(context, QueryParams({})))
    one = QueryParams({"id": "agent-000001"})
    await timed("agent page", args.repeat, lambda: pages.agent(context, one))


async def sql(url: str, args: argparse.Namespace, now: int, book: PriceBook) -> None:
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        backend = opened.backends[0]
        assert isinstance(backend, SqlBackend)
        started = time.perf_counter()
        await seed_sql(backend, args, now)
        print(f"  seeded {args.runs:,} runs in {time.perf_counter() - started:.1f} s")
        if backend.db.dialect == "postgresql":
            # What autovacuum does on a live database: the planner's statistics, and the
            # visibility map that lets an index-only scan skip the table.
            connection = await asyncpg.connect(url)
            try:
                await connection.execute("VACUUM ANALYZE")
            finally:
                await connection.close()
        await time_pages(opened, args, backend.db.dialect, book)
    finally:
        await opened.close()


async def scan(args: argparse.Namespace, now: int, book: PriceBook) -> None:
    opened = await open_stores(get_plugin_manager(), Routes.single("memory://"), migrate=True)
    try:
        started = time.perf_counter()
        await seed_memory(opened, args, now)
        print(f"  seeded {args.scan_runs:,} runs in {time.perf_counter() - started:.1f} s")
        await time_pages(opened, args, "memory", book)
    finally:
        await opened.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench overview", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=30, help="the range the runs start in")
    parser.add_argument("--turns", type=int, default=10, help="runs per agent")
    parser.add_argument("--scan-runs", type=int, default=10_000, help="0: no scan")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-sqlite", dest="sqlite", action="store_false")
    parser.add_argument("--no-postgres", dest="postgres", action="store_false")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.days < 2 or args.turns < 1:
        parser.error("--runs and --turns must be positive, --days at least 2")
    now = int(time.time() * 1000)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as directory:
        book = price_book(directory, now, args.days)
        if args.sqlite:
            print("sqlite:")
            asyncio.run(sql(f"sqlite:///{directory}/overview.db", args, now, book))
        if args.postgres:
            print("postgresql:")
            with postgres_database() as url:
                asyncio.run(sql(url, args, now, book))
        if args.scan_runs:
            print("memory (the scan):")
            asyncio.run(scan(args, now, book))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0
