"""The backends' own limit: the realistic mix's statements and commands, sent by the driver alone.

``python -m bench load`` says how many CallStore calls a second bridge-store serves on
each backend; this says how many the backend itself could take, so that the first can
be read as a share of the second. For each of SQLite, Postgres and Redis it

1. opens the backend in this process (a fresh Postgres database, a fresh Redis key
   prefix, a temporary SQLite file) and seeds it with ``bench load``'s world
   (``bench.mix.build_world``) through the dispatch layer;
2. records what the backend sends its driver for each operation of the mix and each
   record of the operation's pool: the SQL text and arguments each statement reaches
   asyncpg or sqlite3 with (``Session.run``), or the arguments of each Redis command
   (``execute_command``, Lua scripts' ``EVALSHA`` included);
3. replays those, and nothing else, on bare driver connections for ``--duration``
   seconds after ``--warmup``, operations in ``bench load``'s weighted order, each
   checkpoint create with a fresh blob id as under load.

Concurrency is ``bench load``'s: on Postgres and Redis ``--connections`` tasks share
the connections the server would have (Postgres: ``--pool`` connections, the server's
default pool; Redis: one client pool); an operation is all the statements of one call.
sqlite3 blocks, and its calls hold the GIL between the file's pages, so threads would
only fight: one thread runs the operations back to back, every ``--connections`` of
them as the server's threads would get them at that concurrency (the reads one by one,
the writes in one ``BEGIN IMMEDIATE`` transaction, as its group commit does).

No HTTP, no JSON parsing, no contract checks: this is the ceiling the backend puts on
the server, on this machine, with the client (this process) sharing its CPUs.

    python -m bench backend-limit [--targets sqlite,postgres,redis] [--duration 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import mix
from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.rpc.dispatch import call_store
from bridge_store.security.auth import local_principal
from bridge_store.stack.stores import Routes, open_stores
from testkit.services import REDIS_URL, postgres_database, redis_prefix

RESULTS = Path(__file__).parent / "results"
TARGETS = ("sqlite", "postgres", "redis")
#: What one operation sends its driver: SQL (a ``Bound``) or Redis command arguments.
Sent = Any


@dataclass
class Recording:
    """Per operation of the mix, per pool record: what the backend sent, in order."""

    ops: list[mix.Operation]
    calls: dict[int, list[tuple[list[Sent], str | None]]] = field(default_factory=dict)

    def variants(self, index: int) -> list[tuple[list[Sent], str | None]]:
        return self.calls[index]


@dataclass
class Outcome:
    target: str
    ops: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_ms)
        return {
            "target": self.target,
            "ops_per_second": round(self.ops / self.seconds, 1) if self.seconds else None,
            "p50_ms": round(statistics.median(ordered), 3) if ordered else None,
            "p99_ms": round(ordered[int(len(ordered) * 0.99)], 3) if ordered else None,
        }


# -- recording -----------------------------------------------------------------------


@contextlib.contextmanager
def _recording_sql(sent: list[Sent]) -> Iterator[None]:
    from bridge_store_sql.postgres import PostgresSession
    from bridge_store_sql.sqlite import SqliteSession

    originals = {cls: cls.run for cls in (PostgresSession, SqliteSession)}

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def run(self: Any, bound: Any) -> Any:
            sent.append(bound)
            return original(self, bound)

        return run

    for cls, original in originals.items():
        cls.run = wrap(original)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.run = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _recording_redis(sent: list[Sent]) -> Iterator[None]:
    from redis.asyncio import Redis

    original = Redis.execute_command

    async def execute_command(self: Any, *args: Any, **options: Any) -> Any:
        sent.append(args)
        return await original(self, *args, **options)  # type: ignore[no-untyped-call]

    Redis.execute_command = execute_command  # type: ignore[method-assign]
    try:
        yield
    finally:
        Redis.execute_command = original  # type: ignore[method-assign]


async def record(url: str, target: str, world: mix.World, ops: list[mix.Operation]) -> Recording:
    """Seed a fresh store at ``url`` and record what each operation sends its driver."""
    principal = local_principal()
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    recording = Recording(ops)
    try:
        for substore, method, data in world.calls:
            await call_store(opened.stores, substore, method, data, principal=principal)
        sent: list[Sent] = []
        recorder = _recording_redis if target == "redis" else _recording_sql
        for index, op in enumerate(ops):
            recording.calls[index] = []
            for record_values in world.pool(op.pool, "timed"):
                values = mix.dynamic_values(record_values, 1, 0, "0" * 8, 0)
                message = mix.render(op, record_values)
                sent.clear()
                with recorder(sent):
                    await call_store(
                        opened.stores, op.substore, op.method, message["input"], principal=principal
                    )
                unique = values["UNIQUE"] if "UNIQUE" in op.template.holes else None
                recording.calls[index].append((list(sent), unique))
    finally:
        await opened.close()
    return recording


def _fresh(value: Any, unique: str, fresh: str) -> Any:
    if isinstance(value, str):
        return value.replace(unique, fresh)
    if isinstance(value, bytes):
        return value.replace(unique.encode(), fresh.encode())
    return value


class Schedule:
    """``bench load``'s operation order, each draw on one of the records recorded."""

    def __init__(self, recording: Recording) -> None:
        self._recording = recording
        self._order = mix.schedule(recording.ops)
        self._next = 0

    def draw(self, bind: Callable[[Sent, str, str], Sent]) -> tuple[bool, list[Sent]]:
        """(whether it writes, what to send) of the next operation."""
        index = self._order[self._next % len(self._order)]
        variants = self._recording.variants(index)
        sent, unique = variants[self._next % len(variants)]
        self._next += 1
        op = self._recording.ops[index]
        writes = op.method not in ("get", "list")
        if unique is None:
            return writes, sent
        fresh = secrets.token_hex(32)
        return writes, [bind(item, unique, fresh) for item in sent]


# -- replaying -----------------------------------------------------------------------


def _bound_fresh(bound: Any, unique: str, fresh: str) -> Any:
    from dataclasses import replace

    return replace(bound, args=[_fresh(arg, unique, fresh) for arg in bound.args])


def _command_fresh(args: Any, unique: str, fresh: str) -> Any:
    return tuple(_fresh(arg, unique, fresh) for arg in args)


async def _closed_loop(
    target: str,
    schedule: Schedule,
    bind: Callable[[Sent, str, str], Sent],
    send: Callable[[list[Sent]], Any],
    args: argparse.Namespace,
) -> Outcome:
    outcome = Outcome(target)
    measuring = False
    stop = time.monotonic() + args.warmup + args.duration

    async def worker() -> None:
        while (now := time.monotonic()) < stop:
            _, sent = schedule.draw(bind)
            await send(sent)
            if measuring:
                outcome.ops += 1
                outcome.latencies_ms.append((time.monotonic() - now) * 1000)

    tasks = [asyncio.ensure_future(worker()) for _ in range(args.connections)]
    await asyncio.sleep(args.warmup)
    measuring, started = True, time.monotonic()
    await asyncio.gather(*tasks)
    outcome.seconds = time.monotonic() - started
    return outcome


async def replay_postgres(dsn: str, recording: Recording, args: argparse.Namespace) -> Outcome:
    import asyncpg  # type: ignore[import-untyped]

    free: asyncio.Queue[Any] = asyncio.Queue()
    connections = [await asyncpg.connect(dsn) for _ in range(args.pool)]
    for connection in connections:
        free.put_nowait(connection)

    async def send(sent: list[Any]) -> None:
        connection = await free.get()
        try:
            for bound in sent:
                if bound.many:
                    await connection.executemany(bound.sql, bound.args)
                elif bound.returns_rows:
                    await connection.fetch(bound.sql, *bound.args)
                else:
                    await connection.execute(bound.sql, *bound.args)
        finally:
            free.put_nowait(connection)

    try:
        return await _closed_loop("postgres", Schedule(recording), _bound_fresh, send, args)
    finally:
        for connection in connections:
            await connection.close()


async def replay_redis(recording: Recording, args: argparse.Namespace) -> Outcome:
    from redis.asyncio import Redis

    client = Redis.from_url(REDIS_URL)

    async def send(sent: list[Any]) -> None:
        for command in sent:
            await client.execute_command(*command)  # type: ignore[no-untyped-call]

    try:
        return await _closed_loop("redis", Schedule(recording), _command_fresh, send, args)
    finally:
        await client.aclose()


def replay_sqlite(path: Path, recording: Recording, args: argparse.Namespace) -> Outcome:
    import sqlite3

    writer = sqlite3.connect(path, isolation_level=None)
    reader = sqlite3.connect(path, isolation_level=None)
    for connection in (writer, reader):
        connection.execute("PRAGMA busy_timeout = 30000")
        connection.execute("PRAGMA synchronous = NORMAL")
    schedule = Schedule(recording)
    outcome = Outcome("sqlite")

    def run(connection: sqlite3.Connection, sent: list[Any]) -> None:
        for bound in sent:
            if bound.many:
                connection.cursor().executemany(bound.sql, bound.args)
            else:
                connection.cursor().execute(bound.sql, bound.args).fetchall()

    def round_of_calls() -> int:
        calls = [schedule.draw(_bound_fresh) for _ in range(args.connections)]
        for writes, sent in calls:
            if not writes:
                run(reader, sent)
        writer.execute("BEGIN IMMEDIATE")
        for writes, sent in calls:
            if writes:
                run(writer, sent)
        writer.execute("COMMIT")
        return len(calls)

    try:
        stop = time.monotonic() + args.warmup
        while time.monotonic() < stop:
            round_of_calls()
        started = time.monotonic()
        stop = started + args.duration
        while (now := time.monotonic()) < stop:
            outcome.ops += round_of_calls()
            # One round's calls are answered together, as a batch of the server's.
            outcome.latencies_ms.append((time.monotonic() - now) * 1000)
        outcome.seconds = time.monotonic() - started
    finally:
        writer.close()
        reader.close()
    return outcome


async def measure(target: str, args: argparse.Namespace) -> Outcome:
    ops = mix.operations()
    world = mix.build_world(active_runs=args.connections)
    if target == "postgres":
        with postgres_database("limit") as url:
            recording = await record(url, target, world, ops)
            return await replay_postgres(url, recording, args)
    if target == "redis":
        with redis_prefix("limit") as url:
            recording = await record(url, target, world, ops)
            return await replay_redis(recording, args)
    with tempfile.TemporaryDirectory(prefix="bench-limit-") as directory:
        path = Path(directory) / "limit.db"
        recording = await record(f"sqlite:///{path}", target, world, ops)
        return replay_sqlite(path, recording, args)


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench backend-limit", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--targets", default=",".join(TARGETS), help="(default: all three)")
    parser.add_argument("--connections", type=int, default=16, help="(default: 16, as load)")
    parser.add_argument("--pool", type=int, default=10, help="Postgres connections (default: 10)")
    parser.add_argument("--duration", type=float, default=10, help="seconds (default: 10)")
    parser.add_argument("--warmup", type=float, default=3, help="seconds (default: 3)")
    parser.add_argument("--json", type=Path, help="(default: bench/results/limit-*.json)")
    args = parser.parse_args(argv)
    args.targets = [name.strip() for name in args.targets.split(",") if name.strip()]
    if not args.targets or set(args.targets) - set(TARGETS):
        parser.error(f"targets are among {','.join(TARGETS)}")
    return args


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    started = datetime.datetime.now(datetime.UTC)
    load_before = os.getloadavg()
    rows = []
    for target in args.targets:
        outcome = asyncio.run(measure(target, args))
        rows.append(outcome.as_json() | {"load_average_after": os.getloadavg()})
    print(
        f"\nrealistic mix sent by the drivers alone, {args.connections} concurrent calls, "
        f"{args.duration:g} s after {args.warmup:g} s; load average {load_before[0]:.2f} before\n"
    )
    print("| backend | ops/s | p50 ms | p99 ms |\n|---|--:|--:|--:|")
    for row in rows:
        cells = (row["target"], f"{row['ops_per_second']:,.0f}", row["p50_ms"], row["p99_ms"])
        print("| " + " | ".join(map(str, cells)) + " |")
    if "sqlite" in args.targets:
        print(f"\nsqlite latencies are of one round of {args.connections} calls")
    path = args.json or RESULTS / f"limit-{started:%Y%m%d-%H%M%S}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    results = {
        "started": started.isoformat(timespec="seconds"),
        "load_average_before": load_before,
        "settings": {key: value for key, value in vars(args).items() if key != "json"},
        "rows": rows,
    }
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nresults: {path}")
    return 0
