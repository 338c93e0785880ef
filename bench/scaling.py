"""List page latency against table size, per backend: does a page cost O(page)?

    python -m bench scaling [--backends memory,sqlite,postgres,redis,s3]
                            [--small 1000] [--large 100000] [--events 1000000]

For each backend one store is filled with ``--small`` agents and runs (and a run with
``--small`` events), another with ``--large`` rows (and a run with ``--events``
events), then every list page below is timed on both, the calls alternating between
the two stores so that load from elsewhere on the machine hits both alike. The figure
is the median of ``--repeat`` calls of one page through the backend's substore API
(the calls the contract layer makes: ``limit`` is the page size plus one), and the
ratio large/small should stay near 1.

Pages: agents newest first, from a cursor half way down the keyset, and both again
filtered by one ``cwd`` (a tenth of the agents); runs in list order, from a cursor
half way, of one agent (a tenth of the runs) first and half way, and by one run id;
events of one run from offset 0, from the middle, and the "nothing new" poll at its
end.

Rows are loaded the fast way for each backend: bulk INSERTs on SQL, Redis pipelines
for the event log, concurrent substore calls elsewhere. moto, the local S3 stand-in,
answers every LIST by sorting every key of the bucket, so an S3 page over moto costs
O(bucket) whatever the backend does; S3 is therefore loaded to ``--s3-large`` rows and
events at most (default 3,000) and its ratio measures moto as much as the backend.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import services
from bench.servers import start_child
from bridge_store import jsontext
from bridge_store.auth import DEFAULT_TENANT
from bridge_store.conformance.harness import agent, run
from bridge_store.plugins import get_plugin_manager, open_backend
from bridge_store.substores import AgentPosition, Backend, RunPosition, stored_event
from bridge_store.types import Document

BACKENDS = ("memory", "sqlite", "postgres", "redis", "s3")
BASE_MS = 1_700_000_000_000
#: Every row the bench loads and lists belongs to this tenant.
TENANT = DEFAULT_TENANT
CWDS = 10
RUN_AGENTS = 10
AGENT_PAGE, RUN_PAGE, EVENT_PAGE = 50, 50, 100
#: Substore calls in flight at once while loading through the backend's API.
LOAD_CONCURRENCY = 64
SQL_BATCH = 5000


def agent_id(i: int) -> str:
    return f"agent-{i:07d}"


def make_agent(i: int) -> Document:
    return agent(agent_id(i), updated_at=BASE_MS + i, cwd=f"/work/project-{i % CWDS}")


def make_run(i: int) -> Document:
    return run(f"run-{i:07d}", agent_id(i % RUN_AGENTS), turn_number=i // RUN_AGENTS + 1)


def run_position(i: int) -> RunPosition:
    return RunPosition(
        turn_number=i // RUN_AGENTS + 1, run_id=f"run-{i:07d}", agent_id=agent_id(i % RUN_AGENTS)
    )


def make_event(run_id: str, seq: int) -> Document:
    """An appended event as the contract hands it to a backend (no seq/offset)."""
    return {
        "runId": run_id,
        "eventType": "sdk_message",
        "payload": {"type": "assistant", "text": f"message {seq} " + "x" * 60},
        "payloadRef": None,
        "idempotencyKey": None,
        "createdAt": BASE_MS + seq,
    }


def events_run(count: int) -> str:
    return f"events-{count}"


# -- loading ---------------------------------------------------------------------------


async def concurrently(count: int, start: int, call: Callable[[int], Awaitable[Any]]) -> None:
    semaphore = asyncio.Semaphore(LOAD_CONCURRENCY)

    async def one(i: int) -> None:
        async with semaphore:
            await call(i)

    for chunk in range(start, count, LOAD_CONCURRENCY * 16):
        stop = min(count, chunk + LOAD_CONCURRENCY * 16)
        await asyncio.gather(*(one(i) for i in range(chunk, stop)))


class Target:
    """One backend under test: how to open it and fill it fast."""

    name = ""
    #: The largest row and event counts this target is loaded to (None: as asked).
    cap: int | None = None

    def __init__(self) -> None:
        self.backend: Backend | None = None

    @property
    def url(self) -> str:
        raise NotImplementedError

    async def open(self) -> Backend:
        backend = open_backend(get_plugin_manager(), self.url)
        await backend.start(migrate=True)
        self.backend = backend
        return backend

    async def load_rows(self, backend: Backend, start: int, stop: int) -> None:
        assert backend.agents is not None
        assert backend.runs is not None
        agents, runs = backend.agents, backend.runs
        await concurrently(stop, start, lambda i: agents.create(TENANT, make_agent(i)))
        await concurrently(stop, start, lambda i: runs.create(TENANT, make_run(i)))

    async def load_events(self, backend: Backend, run_id: str, count: int) -> None:
        assert backend.run_events is not None
        for seq in range(1, count + 1):
            await backend.run_events.append(TENANT, make_event(run_id, seq))

    def cleanup(self) -> None:
        """Drop what the bench made."""


class MemoryTarget(Target):
    name = "memory"
    url = "memory://"


class SqlTarget(Target):
    """Rows go in with bulk INSERTs (COPY on Postgres) on a connection of the bench's own."""

    async def insert(self, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError

    async def load_rows(self, backend: Backend, start: int, stop: int) -> None:
        for chunk in range(start, stop, SQL_BATCH):
            ids = range(chunk, min(stop, chunk + SQL_BATCH))
            agents = [make_agent(i) for i in ids]
            await self.insert(
                "agents",
                ["tenant", "agent_id", "cwd", "updated_at", "doc"],
                [(TENANT, a["agentId"], a["cwd"], a["updatedAt"], dump_json(a)) for a in agents],
            )
            runs = [make_run(i) for i in ids]
            await self.insert(
                "runs",
                ["tenant", "agent_id", "run_id", "turn_number", "doc"],
                [(TENANT, r["agentId"], r["runId"], r["turnNumber"], dump_json(r)) for r in runs],
            )
        await self.analyze()

    async def load_events(self, backend: Backend, run_id: str, count: int) -> None:
        for chunk in range(1, count + 1, SQL_BATCH):
            await self.insert(
                "run_events",
                ["tenant", "run_id", "seq", "idempotency_key", "doc"],
                [
                    (TENANT, run_id, seq, None, dump_json(make_event(run_id, seq)))
                    for seq in range(chunk, min(count + 1, chunk + SQL_BATCH))
                ],
            )
        await self.after_events(run_id, count)
        await self.analyze()

    async def after_events(self, run_id: str, count: int) -> None:
        """Dialect bookkeeping of a loaded log."""

    async def analyze(self) -> None:
        """Fresh planner statistics, as autovacuum would have after a load this size."""


def dump_json(doc: Document) -> str:
    # As the SQL backend stores documents.
    return jsontext.dumps_text(doc)


class SqliteTarget(SqlTarget):
    name = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory(prefix="bench-scaling-")
        self.path = Path(self._dir.name) / "store.db"

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def _run(self, statement: str, rows: list[tuple[Any, ...]] | None = None) -> None:
        connection = sqlite3.connect(self.path, timeout=60)
        try:
            with connection:
                if rows is None:
                    connection.execute(statement)
                else:
                    connection.executemany(statement, rows)
        finally:
            connection.close()

    async def insert(self, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        marks = ", ".join("?" for _ in columns)
        statement = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"  # noqa: S608
        await asyncio.to_thread(self._run, statement, rows)

    async def analyze(self) -> None:
        await asyncio.to_thread(self._run, "ANALYZE")

    def cleanup(self) -> None:
        self._dir.cleanup()


class PostgresTarget(SqlTarget):
    name = "postgres"

    def __init__(self) -> None:
        super().__init__()
        self._database = services.create_database("bench")

    @property
    def url(self) -> str:
        return services.database_url(self._database)

    async def _connect(self) -> Any:
        import asyncpg  # type: ignore[import-untyped]

        return await asyncpg.connect(self.url)

    async def insert(self, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        connection = await self._connect()
        try:
            await connection.copy_records_to_table(table, records=rows, columns=columns)
        finally:
            await connection.close()

    async def after_events(self, run_id: str, count: int) -> None:
        await self.insert(
            "run_event_counters", ["tenant", "run_id", "last_seq"], [(TENANT, run_id, count)]
        )

    async def analyze(self) -> None:
        connection = await self._connect()
        try:
            await connection.execute("ANALYZE")
        finally:
            await connection.close()

    def cleanup(self) -> None:
        services.drop_database(self._database)


class RedisTarget(Target):
    name = "redis"

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"bench-scaling-{secrets.token_hex(4)}"

    @property
    def url(self) -> str:
        return services.redis_store_url(self.prefix)

    async def load_events(self, backend: Backend, run_id: str, count: int) -> None:
        # The members APPEND_EVENT writes, written with pipelined ZADDs.
        import redis.asyncio

        from bridge_store.jsontext import dumps
        from bridge_store_redis.events import SEQ_WIDTH
        from bridge_store_redis.keys import KeySpace, utf8

        keys = KeySpace(self.prefix)
        client = redis.asyncio.Redis.from_url(services.REDIS_URL)
        try:
            for chunk in range(1, count + 1, 10_000):
                members = {
                    b"%0*d" % (SEQ_WIDTH, seq) + dumps(make_event(run_id, seq)): seq
                    for seq in range(chunk, min(count + 1, chunk + 10_000))
                }
                await client.zadd(keys.event_log(run_id), members)
            await client.zadd(keys.event_runs(), {utf8(run_id): float("inf")})
        finally:
            await client.aclose()

    def cleanup(self) -> None:
        import redis

        with redis.Redis.from_url(services.REDIS_URL) as client:
            services.delete_prefix(client, self.prefix)


class S3Target(Target):
    name = "s3"

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        # moto in a process of its own: its Python must not share this one's GIL.
        self._dir = tempfile.TemporaryDirectory(prefix="bench-scaling-")
        self._server = start_child("s3", "", Path(self._dir.name) / "s3.log")
        self._prefix = f"bench-scaling-{secrets.token_hex(4)}/"

    @property
    def url(self) -> str:
        return services.s3_store_url(self._server.ready["url"], self._prefix)

    async def load_events(self, backend: Backend, run_id: str, count: int) -> None:
        # The objects an append writes, put concurrently at their final keys.
        from bridge_store.jsontext import dumps
        from bridge_store_s3.backend import S3Backend

        assert isinstance(backend, S3Backend)
        bucket, layout = backend._bucket, backend._layout

        async def put(seq: int) -> None:
            stored = stored_event(make_event(run_id, seq), seq)
            await bucket.put(layout.event(run_id, seq), dumps(stored))

        await concurrently(count + 1, 1, put)

    def cleanup(self) -> None:
        self._server.stop()
        self._dir.cleanup()


# -- timing ----------------------------------------------------------------------------

Query = Callable[[], Awaitable[Any]]


def queries(backend: Backend, rows: int, events: int) -> dict[str, tuple[Query, int | None]]:
    """The pages to time at this scale, by name, with the item count each must return."""
    agents, runs, log = backend.agents, backend.runs, backend.run_events
    assert agents is not None
    assert runs is not None
    assert log is not None
    mid = rows // 2
    agent_mid = AgentPosition(updated_at=BASE_MS + mid, agent_id=agent_id(mid))
    # A run of agent 0 half way through its runs (agent 0 has runs 0, 10, 20, ...).
    of_agent_mid = run_position((mid // RUN_AGENTS) * RUN_AGENTS)
    cwd = "/work/project-0"
    cwd_mid = (mid // CWDS) * CWDS  # an agent of project-0 half way down
    cwd_after = AgentPosition(updated_at=BASE_MS + cwd_mid, agent_id=agent_id(cwd_mid))
    run_id = events_run(events)
    agent_page, run_page, event_page = AGENT_PAGE + 1, RUN_PAGE + 1, EVENT_PAGE + 1
    return {
        "agents first": (
            lambda: agents.list(TENANT, cwd=None, after=None, limit=agent_page),
            min(agent_page, rows),
        ),
        "agents mid": (
            lambda: agents.list(TENANT, cwd=None, after=agent_mid, limit=agent_page),
            min(agent_page, mid),
        ),
        "agents cwd first": (
            lambda: agents.list(TENANT, cwd=cwd, after=None, limit=agent_page),
            min(agent_page, -(-rows // CWDS)),
        ),
        "agents cwd mid": (
            lambda: agents.list(TENANT, cwd=cwd, after=cwd_after, limit=agent_page),
            min(agent_page, cwd_mid // CWDS),
        ),
        "runs first": (
            lambda: runs.list(TENANT, agent_ids=None, run_ids=None, after=None, limit=run_page),
            min(run_page, rows),
        ),
        "runs mid": (
            lambda: runs.list(
                TENANT, agent_ids=None, run_ids=None, after=run_position(mid), limit=run_page
            ),
            min(run_page, rows - mid - 1),
        ),
        "runs agent first": (
            lambda: runs.list(
                TENANT, agent_ids=[agent_id(0)], run_ids=None, after=None, limit=run_page
            ),
            min(run_page, -(-rows // RUN_AGENTS)),
        ),
        "runs agent mid": (
            lambda: runs.list(
                TENANT, agent_ids=[agent_id(0)], run_ids=None, after=of_agent_mid, limit=run_page
            ),
            min(run_page, -(-rows // RUN_AGENTS) - mid // RUN_AGENTS - 1),
        ),
        "runs by id": (
            lambda: runs.list(
                TENANT, agent_ids=None, run_ids=[f"run-{mid:07d}"], after=None, limit=run_page
            ),
            1,
        ),
        "events first": (
            lambda: log.list(TENANT, run_id, after_seq=0, limit=event_page),
            min(event_page, events),
        ),
        "events mid": (
            lambda: log.list(TENANT, run_id, after_seq=events // 2, limit=event_page),
            min(event_page, events - events // 2),
        ),
        "events poll at end": (
            lambda: log.list(TENANT, run_id, after_seq=events, limit=event_page),
            0,
        ),
    }


async def time_queries(
    small: dict[str, tuple[Query, int | None]],
    large: dict[str, tuple[Query, int | None]],
    repeat: int,
) -> tuple[dict[str, float], dict[str, float]]:
    """Median milliseconds per call of each query on each store.

    Calls alternate between the two stores, so load from elsewhere on the machine
    lands on both alike.
    """
    medians: tuple[dict[str, float], dict[str, float]] = ({}, {})
    for name in small:
        pair = (small[name], large[name])
        for query, expected in pair:
            result = await query()
            if expected is not None and len(result) != expected:
                raise AssertionError(f"{name}: {len(result)} items, expected {expected}")
            await query()
        samples: tuple[list[float], list[float]] = ([], [])
        for _ in range(repeat):
            for (query, _expected), times in zip(pair, samples, strict=True):
                started = time.perf_counter()
                await query()
                times.append((time.perf_counter() - started) * 1000)
        for times, into in zip(samples, medians, strict=True):
            into[name] = statistics.median(times)
    return medians


@dataclass
class Result:
    backend: str
    scales: list[tuple[int, int]] = field(default_factory=list)  # (rows, events)
    load_seconds: list[float] = field(default_factory=list)
    p50_ms: list[dict[str, float]] = field(default_factory=list)


async def measure(targets: list[Target], scales: list[tuple[int, int]], repeat: int) -> Result:
    """Fill one store per scale, then time the same pages on each, alternating."""
    result = Result(targets[0].name)
    backends: list[Backend] = []
    try:
        for target, (rows, events) in zip(targets, scales, strict=True):
            backend = await target.open()
            backends.append(backend)
            started = time.perf_counter()
            await target.load_rows(backend, 0, rows)
            await target.load_events(backend, events_run(events), events)
            result.load_seconds.append(time.perf_counter() - started)
            result.scales.append((rows, events))
            print(
                f"{target.name}: {rows:,} rows, {events:,} events loaded in "
                f"{result.load_seconds[-1]:.1f} s",
                file=sys.stderr,
            )
        (small_rows, small_events), (large_rows, large_events) = scales
        medians = await time_queries(
            queries(backends[0], small_rows, small_events),
            queries(backends[1], large_rows, large_events),
            repeat,
        )
        result.p50_ms.extend(medians)
    finally:
        for backend in backends:
            await backend.close()
    return result


def make_target(name: str, s3_cap: int) -> Target:
    if name == "memory":
        return MemoryTarget()
    if name == "sqlite":
        return SqliteTarget()
    if name == "postgres":
        return PostgresTarget()
    if name == "redis":
        return RedisTarget()
    if name == "s3":
        return S3Target(s3_cap)
    raise ValueError(f"unknown backend {name!r}; one of {', '.join(BACKENDS)}")


@contextmanager
def target_for(name: str, s3_cap: int) -> Iterator[Target]:
    target = make_target(name, s3_cap)
    try:
        yield target
    finally:
        target.cleanup()


def report(result: Result) -> None:
    (small_rows, small_events), (large_rows, large_events) = result.scales
    print(
        f"\n{result.backend}: p50 ms per page, {small_rows:,} rows / {small_events:,} events "
        f"vs {large_rows:,} rows / {large_events:,} events"
    )
    print(f"  {'page':20s} {'small':>8s} {'large':>8s} {'ratio':>6s}")
    small, large = result.p50_ms
    for name in small:
        ratio = large[name] / small[name]
        flag = "" if ratio <= 1.5 else "  <-- over 1.5x"
        print(f"  {name:20s} {small[name]:8.3f} {large[name]:8.3f} {ratio:6.2f}{flag}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench scaling", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--small", type=int, default=1000, help="agents and runs, small")
    parser.add_argument("--large", type=int, default=100_000, help="agents and runs, large")
    parser.add_argument("--events", type=int, default=1_000_000, help="events of one run, large")
    parser.add_argument(
        "--s3-large", type=int, default=3000, help="cap on S3's large rows and events (moto)"
    )
    parser.add_argument("--repeat", type=int, default=30, help="timed calls per page")
    parser.add_argument("--json", action="store_true", help="also print results as JSON")
    args = parser.parse_args(argv)

    results: list[Result] = []
    for name in args.backends.split(","):
        with target_for(name, args.s3_large) as target, target_for(name, args.s3_large) as small:
            large, events = args.large, args.events
            if target.cap is not None and (large > target.cap or events > target.cap):
                large, events = min(large, target.cap), min(events, target.cap)
                print(
                    f"{name}: loaded to {large:,} rows and {events:,} events only "
                    "(moto lists by sorting the whole bucket; see --s3-large)",
                    file=sys.stderr,
                )
            scales = [(args.small, args.small), (large, events)]
            result = asyncio.run(measure([small, target], scales, args.repeat))
        results.append(result)
        report(result)
    if args.json:
        print(json.dumps([result.__dict__ for result in results]))
    return 0
