"""runEvents.append on the SQL backend: throughput, latency and database round trips.

Drives the backend directly (no HTTP), so the numbers are the storage layer's own
(CPU is this process's: the Python side, SQLite's worker threads included, not the Postgres
server's):
``appends`` events to ``--runs`` runs from ``--concurrency`` concurrent tasks, first
without idempotency keys, then with a fresh key each. On Postgres it also counts the
writes asyncpg makes to its socket during the timed appends: each write starts one
round trip, so writes / appends is the round trips per append. With ``--tool-calls``
every event ends a tool call (of one of five tools) of a run created first, so each
append also counts it (revision 0006's ``run_tool_calls``) and the database's
triggers write that count for the run (revision 0011's ``run_tool_days``).

    python -m bench sql-append --store sqlite:////tmp/bench.db
    python -m bench sql-append --store postgresql://postgres@127.0.0.1/bench_db

Without ``--store`` it runs SQLite in a temporary directory and Postgres in a fresh
database (``testkit.services``, dropped afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.rpc.contract import new_event
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.postgres import PostgresDatabase
from testkit.round_trips import WriteCounter
from testkit.services import postgres_database


async def run_case(
    backend: SqlBackend, counter: WriteCounter | None, args: argparse.Namespace, *, keyed: bool
) -> None:
    events = backend.run_events
    prefix = uuid.uuid4().hex[:8]
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(args.appends):
        queue.put_nowait(index)
    latencies: list[float] = []
    payload = {"type": "sdk_message", "message": {"type": "assistant", "text": "x" * 200}}
    if args.tool_calls:
        for run in range(args.runs):
            doc = {"runId": f"{prefix}-{run}", "agentId": "bench", "status": "running"}
            await backend.runs.create("default", {**doc, "createdAt": 1, "turnNumber": 1})

    def ending(index: int) -> dict[str, object]:
        tool = f"tool-{index % 5}"
        message = {"type": "tool_call", "call_id": f"c{index}", "name": tool, "status": "completed"}
        return {"type": "sdk_message", "message": message}

    async def worker() -> None:
        while not queue.empty():
            index = queue.get_nowait()
            data = {
                "runId": f"{prefix}-{index % args.runs}",
                "eventType": "run_stream_event",
                "payload": ending(index) if args.tool_calls else payload,
                "idempotencyKey": f"{prefix}-{index}" if keyed else None,
            }
            started = time.perf_counter()
            await events.append("default", new_event(data, "input"))
            latencies.append(time.perf_counter() - started)

    # Warm up the pool and its prepared statements outside the measurement.
    await asyncio.gather(
        *(
            events.append("default", new_event({"runId": f"warm-{n}", "eventType": "t"}, "input"))
            for n in range(args.concurrency * 2)
        )
    )
    writes_before = counter.writes if counter is not None else 0
    started, cpu_started = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    latencies.sort()
    line = (
        f"  {'keyed' if keyed else 'plain'}: {args.appends / elapsed:8.0f} appends/s   "
        f"p50 {statistics.median(latencies) * 1000:6.2f} ms   "
        f"p99 {latencies[int(len(latencies) * 0.99)] * 1000:6.2f} ms   "
        f"CPU {cpu / args.appends * 1000:5.2f} ms/append"
    )
    if counter is not None:
        line += f"   round trips/append {counter.per_call(args.appends, writes_before):.2f}"
    print(line)


async def bench(url: str, args: argparse.Namespace) -> None:
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=True)
    # Round trips are counted on Postgres; SQLite runs in this process.
    counter = WriteCounter(backend.db) if isinstance(backend.db, PostgresDatabase) else None
    try:
        print(
            f"{backend.db.dialect}: {args.appends} appends, {args.runs} runs, "
            f"concurrency {args.concurrency}"
        )
        await run_case(backend, counter, args, keyed=False)
        await run_case(backend, counter, args, keyed=True)
    finally:
        await backend.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench sql-append", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--store", help="a sqlite:// or postgresql:// URL")
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--tool-calls", action="store_true", help="every event ends a tool call of a stored run"
    )
    args = parser.parse_args(argv)
    if args.store:
        asyncio.run(bench(args.store, args))
        return 0
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(bench(f"sqlite:///{directory}/bench.db", args))
    with postgres_database() as url:
        # A pool as large as the concurrency: no connection churn in the measurement.
        asyncio.run(bench(f"{url}?pool_size={args.concurrency}", args))
    return 0
